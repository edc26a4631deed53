import Foundation
import Synchronization

/// The Certificate Transparency test PKI, made fresh once per test process: the committed fixtures
/// in Fixtures/ct are dated from when they were made and expire, so the generator
/// (make-ct-fixtures.py) runs here with the current time into a directory of its own (on tmpfs,
/// removed at exit). Beside its leaves, scripts/ct_leaf.py adds two unlogged ones: `intercepted`
/// (the interception root's everyday certificate) and `two-operators-unlogged` (two-operators' name,
/// no SCT: the selective server's second chain).
///
/// Every leaf is served for `<leaf>.ct.pinproxy.test` (`host(_:)`), which `policy` resolves to 127.0.0.1.
public final class CTFixtures: Sendable {
    public let directory: String

    /// The generator's leaves and the two `ct_leaf.py` adds.
    public static let leaves = ["two-operators", "three-long", "two-long", "one-operator", "no-sct", "wrong-cert", "future",
                                "retired-log", "unlisted-log", "interception-logged", "intercepted", "two-operators-unlogged"]

    /// Made on first use; a failure is thrown to every test that asks.
    public static func made() throws -> CTFixtures { try shared.get() }

    private static let shared: Result<CTFixtures, HelperError> = Result { try CTFixtures() }.mapError {
        ($0 as? HelperError) ?? HelperError(message: "\($0)")
    }

    private init() throws {
        directory = try memoryDirectory() + "/ct"
        let generator = Paths.fixture("ct/make-ct-fixtures.py")
        let made = try run("/usr/bin/env", ["python3", generator, "--out", directory], timeout: 120)
        guard made.status == 0 else { throw HelperError(message: "make-ct-fixtures.py failed: \(made.stderr)") }
        for (ca, name, out) in [("interception-root", "intercepted.ct.pinproxy.test", "intercepted"),
                                ("ct-root", "two-operators.ct.pinproxy.test", "two-operators-unlogged")] {
            let leaf = try run("/usr/bin/env", ["python3", "\(Paths.scripts)/ct_leaf.py", directory, ca, name, out], timeout: 60)
            guard leaf.status == 0 else { throw HelperError(message: "ct_leaf.py failed: \(leaf.stderr)") }
        }
        let roots = try String(contentsOfFile: directory + "/ct-root.pem", encoding: .utf8)
            + String(contentsOfFile: directory + "/interception-root.pem", encoding: .utf8)
        try roots.write(toFile: directory + "/roots.pem", atomically: true, encoding: .utf8)
    }

    public func path(_ file: String) -> String { "\(directory)/\(file)" }
    public func chain(_ leaf: String) -> String { path("\(leaf).chain.pem") }
    public func key(_ leaf: String) -> String { path("\(leaf).key.pem") }
    public func certificate(_ leaf: String) -> String { path("\(leaf).pem") }

    /// The name a leaf is for: `<leaf>.ct.pinproxy.test` (the unlogged twin carries two-operators').
    public func host(_ leaf: String) -> String {
        leaf == "two-operators-unlogged" ? "two-operators.ct.pinproxy.test" : "\(leaf).ct.pinproxy.test"
    }

    /// ct-root and interception-root: the proxy's `trust:` and curl's `--cacert` (a machine that
    /// trusts an interception root, as those it matters for do).
    public var roots: String { path("roots.pem") }
    public var logList: String { path("log_list.json") }
    /// SCTs by TLS extension for no-sct: TLS 1.2 ServerHello only, and v2 (also TLS 1.3's CertificateEntry).
    public var serverinfo: String { path("no-sct.serverinfo.pem") }
    public var serverinfoV2: String { path("no-sct.serverinfo-v2.pem") }
    /// An OCSP response for no-sct with SCTs in it (openssl s_server -status_file).
    public var ocspResponse: String { path("no-sct.ocsp.der") }

    /// A test log's id as pinproxy writes it (base64 of the SHA-256 of its key): a1, a2, b1, b2, b3, unlisted.
    public func logID(_ log: String) throws -> String {
        try shell("openssl dgst -sha256 -binary '\(path("log-\(log).pub.der"))' | base64 -w0")
    }

    /// A leaf's `spki-sha256:` pin.
    public func pin(_ leaf: String) throws -> String { try pin(certificateFile: certificate(leaf)) }

    /// The `spki-sha256:` pin of the certificate in this file (a root: `path("ct-root.pem")`).
    public func pin(certificateFile file: String) throws -> String {
        "spki-sha256:" + (try shell("openssl x509 -in '\(file)' -noout -pubkey | openssl pkey -pubin -outform DER"
            + " | openssl dgst -sha256 -binary | base64 -w0"))
    }

    /// A copy of the log list, changed by `edit` (the parsed JSON object), in a directory of its own:
    /// returns its path (`log_list.json`, so the signature beside it is `log_list.sig`).
    public func editedLogList(_ edit: (inout [String: Any]) -> Void) throws -> String {
        let data = try Data(contentsOf: URL(fileURLWithPath: logList))
        guard var object = try JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw HelperError(message: "log_list.json is not an object")
        }
        edit(&object)
        let out = try memoryDirectory() + "/log_list.json"
        try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys]).write(to: URL(fileURLWithPath: out))
        return out
    }

    /// A copy of the log list whose text is changed by `edit` (for a list that does not parse).
    public func editedLogListText(_ edit: (String) -> String) throws -> String {
        let out = try memoryDirectory() + "/log_list.json"
        try edit(try String(contentsOfFile: logList, encoding: .utf8)).write(toFile: out, atomically: true, encoding: .utf8)
        return out
    }

    /// A policy with `proxy.ct_log_list` (`logList`, or this path; "" for none) and `defaults.ct` ("" for none), trusting `roots`,
    /// every leaf's host resolved to 127.0.0.1, the given upstream ports allowed. `proxy` lines are
    /// added under `proxy:` as given (indent them by two), `rules` is the whole `rules:` section.
    public func policy(ports: [UInt16], ct: String = "require", rules: String = "rules: []", proxy: String = "",
                       logList list: String? = nil, extra: String = "") -> String {
        let names = Set(Self.leaves.map(host)).sorted()
        return """
            version: 1
            proxy:
              allowed_ports: [\(ports.map(String.init).joined(separator: ", "))]
              deny_destinations: [link-local, unspecified, multicast]
              dns: { nameservers: [], hosts_file: none }
              stats_interval: 0
            \(list == "" ? "" : "  ct_log_list: \(list ?? logList)")
            \(proxy)
            defaults:
              unpinned: allow
              trust: "ca-file:\(roots)"
              require_backup: off
            \(ct.isEmpty ? "" : "  ct: \(ct)")
            resolve:
            \(names.map { "  \($0): 127.0.0.1" }.joined(separator: "\n"))
            \(rules)
            \(extra)
            """
    }

    private func shell(_ command: String) throws -> String {
        let r = try run("/bin/sh", ["-c", command], timeout: 30)
        guard r.status == 0 else { throw HelperError(message: "\(command): \(r.stderr)") }
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// `openssl s_server -www` on 127.0.0.1 for what Python's ssl cannot serve: a stapled OCSP response
/// (`-status_file`); also SCTs by TLS extension (`-serverinfo`, which upstream.py's `--serverinfo`
/// serves concurrently too). It serves one connection at a time: a rule for its host needs
/// `mirror_checks: 0` (the mirror's connection arrives together with the tunnel's). Answers any
/// request with `HTTP/1.0 200 ok` and a status page.
public final class OpenSSLWebServer: @unchecked Sendable {
    public let process = Process()
    public private(set) var port: UInt16 = 0
    private let output = Pipe()

    /// Serves `certificate` and `issuer` (s_server's `-cert` sends only the file's first certificate:
    /// the rest of a chain goes in `-cert_chain`).
    public init(certificate: String, issuer: String, key: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        process.arguments = ["s_server", "-accept", "127.0.0.1:0", "-www", "-cert", certificate, "-cert_chain", issuer, "-key", key] + arguments
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try ChildProcesses.launch(process)
        // `ACCEPT 127.0.0.1:<port>` once it listens: read for at most 15 s (a loaded machine).
        let fd = output.fileHandleForReading.fileDescriptor
        let deadline = Date().addingTimeInterval(15)
        var text = ""
        var buffer = [UInt8](repeating: 0, count: 4096)
        func acceptLine() -> Substring? { text.split(separator: "\n").dropLast(text.hasSuffix("\n") ? 0 : 1).first { $0.hasPrefix("ACCEPT ") } }
        while acceptLine() == nil, deadline.timeIntervalSinceNow > 0 {
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, 100) > 0 else { continue }
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            text += String(decoding: buffer[0..<n], as: UTF8.self)
        }
        guard let accept = acceptLine(), let port = UInt16(accept.split(separator: ":").last ?? "") else {
            stop()
            throw HelperError(message: "openssl s_server \(arguments) did not listen: \(text)")
        }
        self.port = port
        // What it prints about each connection is read and dropped, so a full pipe never stalls it.
        output.fileHandleForReading.readabilityHandler = { _ = $0.availableData }
    }

    /// SIGKILL at once: it has nothing to finish.
    public func stop() {
        ChildProcesses.end(process, grace: 0)
        output.fileHandleForReading.readabilityHandler = nil
    }

    deinit { stop() }
}

/// A log list's JSON object, as the tests edit it.
extension Dictionary where Key == String, Value == Any {
    /// Changes `operators[o]` with `edit`.
    public mutating func editOperator(_ o: Int, _ edit: (inout [String: Any]) -> Void) {
        var operators = self["operators"] as! [[String: Any]]
        edit(&operators[o])
        self["operators"] = operators
    }

    /// Changes `operators[o].logs[l]` with `edit`.
    public mutating func editLog(operator o: Int, log l: Int, _ edit: (inout [String: Any]) -> Void) {
        editOperator(o) { entry in
            var logs = entry["logs"] as! [[String: Any]]
            edit(&logs[l])
            entry["logs"] = logs
        }
    }
}
