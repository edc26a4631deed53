import Foundation
import Testing
import TestSupport

/// The package's CT log list update (systemd/pinproxy-ct-list.{service,timer}): the units verify
/// and are sandboxed, and the service's own command lines, run with a local list in place of
/// Google's address (no network), install a list the proxy then loads.
@Suite struct CTListTimerTests {
    static let service = Paths.repository.appendingPathComponent("systemd/pinproxy-ct-list.service").path
    static let timer = Paths.repository.appendingPathComponent("systemd/pinproxy-ct-list.timer").path

    /// `Key=value` lines of a unit file, in order.
    static func settings(_ path: String, _ key: String) throws -> [String] {
        try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
            .filter { $0.hasPrefix(key + "=") }.map { String($0.dropFirst(key.count + 1)) }
    }

    @Test func theUnitsVerifyAndTheServiceIsSandboxed() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let unit = try String(contentsOfFile: Self.service, encoding: .utf8).replacingOccurrences(of: "/usr/bin/pinproxy", with: Paths.pinproxy)
        try unit.write(toFile: directory + "/pinproxy-ct-list.service", atomically: true, encoding: .utf8)
        try FileManager.default.copyItem(atPath: Self.timer, toPath: directory + "/pinproxy-ct-list.timer")
        try FileManager.default.createDirectory(atPath: directory + "/man/man8", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: Paths.repository.appendingPathComponent("docs/man/pinproxy.8").path, toPath: directory + "/man/man8/pinproxy.8")
        var environment = ProcessInfo.processInfo.environment
        environment["MANPATH"] = directory + "/man"
        let verify = try run("/usr/bin/systemd-analyze", ["verify", directory + "/pinproxy-ct-list.service", directory + "/pinproxy-ct-list.timer"], environment: environment)
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(verify.stderr.isEmpty, "\(verify.stderr)")
        let security = try run("/usr/bin/systemd-analyze", ["security", "--offline=yes", directory + "/pinproxy-ct-list.service"])
        let overall = security.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") } ?? ""
        // Root (it owns the state directory) without a capability: 1.8 on systemd 252, as good as the proxy's own unit.
        let words = overall.split(separator: " ")
        let score = Double(words.dropLast(words.last == "🙂" || words.last == "😀" ? 2 : 1).last ?? "") ?? 99
        #expect(overall.contains(" OK ") || overall.contains(" SAFE "), "\(overall)")
        #expect(score <= 2.0, "\(overall)")

        #expect(try Self.settings(Self.timer, "OnCalendar") == ["daily"])
        #expect(try Self.settings(Self.timer, "RandomizedDelaySec") == ["6h"])
        #expect(try Self.settings(Self.timer, "Persistent") == ["true"])
        #expect(try Self.settings(Self.service, "ExecStartPost") == ["+/bin/systemctl try-reload-or-restart pinproxy.service"])
        #expect(try Self.settings(Self.service, "PrivateTmp") == ["yes"])
    }

    @Test func theServicesCommandsInstallAListTheProxyLoads() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        // What gstatic.com publishes, here as files: the list, and its signature by "Google".
        let published = fixture.directory + "/published"
        try FileManager.default.createDirectory(atPath: published, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: fixture.list, toPath: published + "/log_list.json")
        let (key, pub) = try fixture.keyPair("google")
        try fixture.sign(published + "/log_list.json", with: key, to: published + "/log_list.sig")
        let privateTmp = fixture.directory + "/tmp", state = fixture.directory + "/state"
        for path in [privateTmp, state] { try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true) }
        let config = try CTListCommandTests.policy(fixture, target: state + "/log_list.json", key: pub)

        let commands = try Self.settings(Self.service, "ExecStart")
        #expect(commands.count == 3)
        for command in commands {
            let local = command  // the unit's /tmp first: the test's own directories are under /tmp too
                .replacingOccurrences(of: " /tmp/", with: " \(privateTmp)/")
                .replacingOccurrences(of: "https://www.gstatic.com/ct/log_list/v3/", with: "file://\(published)/")
                .replacingOccurrences(of: "--proto =https", with: "--proto =file")
                .replacingOccurrences(of: "/usr/share/pinproxy/ct/log_list_pubkey.pem", with: pub)
                .replacingOccurrences(of: "/etc/pinproxy/pinproxy.yaml", with: config)
                .replacingOccurrences(of: "/usr/bin/pinproxy", with: Paths.pinproxy)
            let words = local.split(separator: " ").map(String.init)
            let r = try run(words[0], Array(words.dropFirst()))
            #expect(r.status == 0, "\(local): \(r.stderr)")
        }
        #expect(FileManager.default.contents(atPath: state + "/log_list.json") == FileManager.default.contents(atPath: published + "/log_list.json"))
        #expect(FileManager.default.contents(atPath: state + "/log_list.sig") == FileManager.default.contents(atPath: published + "/log_list.sig"))
        let check = try pinproxy("check", "--config", config)  // what the reload runs first
        #expect(check.status == 0, "\(check.stderr)")
    }

    /// The key the package ships is Google's: the SHA-256 of its DER SubjectPublicKeyInfo, as
    /// independent users of https://www.gstatic.com/ct/log_list/v3/log_list_pubkey.pem pin it.
    @Test func theShippedKeyIsGooglesLogListKey() throws {
        let r = try run("/bin/sh", ["-c", "openssl pkey -pubin -in config/ct/log_list_pubkey.pem -outform DER | openssl dgst -sha256 -r"])
        #expect(r.stdout.hasPrefix("f1d8b68e50210d8e73d9a3e97f571773c52d7f28c0b1a71beee81d8562e6fd85 "), "\(r.stdout)\(r.stderr)")
    }
}
