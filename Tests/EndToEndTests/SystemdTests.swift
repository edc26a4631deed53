import Foundation
import Testing
import TestSupport

/// The systemd integration: the unit passes `systemd-analyze verify` and scores OK or better in
/// `systemd-analyze security`; the notify protocol; socket activation.
@Suite(.serialized) struct SystemdTests {
    /// The unit with the paths of this checkout (verify checks that ExecStart exists).
    func localUnit() throws -> String {
        let unit = try String(contentsOfFile: Paths.repository.appendingPathComponent("systemd/pinproxy.service").path, encoding: .utf8)
            .replacingOccurrences(of: "/usr/bin/pinproxy", with: Paths.pinproxy)
            .replacingOccurrences(of: "/etc/pinproxy/pinproxy.yaml", with: Paths.repository.appendingPathComponent("config/pinproxy.yaml").path)
        return try temporaryFile(unit, name: "pinproxy.service")
    }

    @Test func unitVerifiesAndIsWellSandboxed() throws {
        let unit = try localUnit()
        // verify runs man(1) for the unit's Documentation=man: pages: give it docs/man as installed.
        let manual = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: manual) }
        for (page, section) in [("pinproxy.8", "man8"), ("pinproxy.yaml.5", "man5")] {
            try FileManager.default.createDirectory(atPath: "\(manual)/\(section)", withIntermediateDirectories: true)
            try FileManager.default.copyItem(atPath: Paths.repository.appendingPathComponent("docs/man/\(page)").path, toPath: "\(manual)/\(section)/\(page)")
        }
        var environment = ProcessInfo.processInfo.environment
        environment["MANPATH"] = manual
        let verify = try run("/usr/bin/systemd-analyze", ["verify", unit], environment: environment)
        #expect(verify.status == 0, "\(verify.stderr)")
        #expect(verify.stderr.isEmpty, "\(verify.stderr)")
        let security = try run("/usr/bin/systemd-analyze", ["security", "--offline=yes", unit])
        let overall = security.stdout.split(separator: "\n").first { $0.contains("Overall exposure level") } ?? ""
        let words = overall.split(separator: " ")
        let score = Double(words.dropLast(words.last == "🙂" || words.last == "😀" ? 2 : 1).last ?? "") ?? 99
        #expect(overall.contains(" OK ") || overall.contains(" SAFE "), "\(overall)")
        #expect(score <= 2.0, "\(overall)")
    }

    @Test func notifiesReadyReloadingWatchdogAndStopping() throws {
        let directory = try temporaryDirectory()
        let socketPath = directory + "/notify"
        let listener = try DatagramListener(path: socketPath)
        var environment = ProcessInfo.processInfo.environment
        environment["NOTIFY_SOCKET"] = socketPath
        environment["WATCHDOG_USEC"] = "300000"
        let proxy = try ProxyProcess(config: policy(ports: [443]), environment: environment)
        let ready = listener.receive(until: { $0.contains("READY=1") })
        #expect(ready.contains { $0.hasPrefix("READY=1\nSTATUS=0 tunnels open") })
        #expect(!listener.receive(until: { $0 == "WATCHDOG=1" }).isEmpty)
        proxy.signal(SIGHUP)
        let reload = listener.receive(until: { _ in listener.count("READY=1") == 2 })
        #expect(reload.contains { $0.hasPrefix("RELOADING=1\nMONOTONIC_USEC=") })
        #expect(proxy.stop() == 0)
        #expect(listener.receive(until: { $0.hasPrefix("STOPPING=1") }).contains { $0.hasPrefix("STOPPING=1") })
    }

    /// systemd-socket-activate binds the port, starts pinproxy on the first connection and hands it
    /// the socket as fd 3 with LISTEN_FDS/LISTEN_PID. One bounded shell command drives it, because
    /// the launcher execs pinproxy only after curl connects.
    @Test func socketActivationUsesTheInheritedSocket() throws {
        let server = try Upstream("leaf-ec256", name: "activated")
        let port = try freePort()
        let config = try temporaryFile(policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC))))
        let log = config + ".log"
        let script = """
            timeout 20 /usr/bin/systemd-socket-activate -l 127.0.0.1:\(port) \(Paths.pinproxy) run --config \(config) 2>\(log) &
            sleep 0.3
            curl -sS --max-time 10 --proxy http://127.0.0.1:\(port) --cacert \(Paths.fixture("both-roots.pem")) https://api.pinproxy.test:\(server.port)/
            kill %1; wait
            """
        let r = try run("/bin/sh", ["-c", script], timeout: 40)
        #expect(r.stdout == "hello from activated\n", "\(r.stderr)")
        let lines = try String(contentsOfFile: log, encoding: .utf8).split(separator: "\n").map { parseLogLine(String($0)) }
        #expect(lines.first { $0["event"] == "started" }?["listen"] == "127.0.0.1:\(port)")
        #expect(lines.contains { $0["event"] == "tunnel_allowed" })
        #expect(lines.contains { $0["event"] == "stopped" })
    }
}

/// A Unix datagram socket that collects what pinproxy sends to `$NOTIFY_SOCKET`.
final class DatagramListener {
    let fd: Int32
    private var seen: [String] = []

    init(path: String) throws {
        fd = try boundDatagramSocket(path: path, receiveTimeoutMicroseconds: 200_000)
    }

    func count(_ prefix: String) -> Int { seen.filter { $0.hasPrefix(prefix) }.count }

    /// Messages received so far, reading more (for at most 10 s) until one satisfies `done`.
    func receive(until done: (String) -> Bool) -> [String] {
        let deadline = Date().addingTimeInterval(10)
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !seen.contains(where: done) && Date() < deadline {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 { seen.append(String(decoding: buffer[0..<n], as: UTF8.self)) }
        }
        return seen
    }

    deinit { close(fd) }
}
