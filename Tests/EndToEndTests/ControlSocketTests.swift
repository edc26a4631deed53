import Foundation
import Testing
import TestSupport

/// `proxy.control_socket` and `pinproxy quarantine`: an operator lists a quarantine a real
/// interceptor caused and lifts it; the socket is 0600, a stale one is replaced at start and a live
/// one is not; a bad request line is answered `error` and harms nothing.
@Suite(.serialized) struct ControlSocketTests {
    static let rules = apiRule("    quarantine: 1h\n" + pinsLine(Pins.leafEC))

    func pinproxy(_ arguments: String...) throws -> Run { try run(Paths.pinproxy, arguments, timeout: 30) }

    /// The whole answer of the control socket at `path` to `bytes` (the server closes after one).
    func exchange(_ path: String, _ bytes: [UInt8]) throws -> String {
        let fd = try connectUnix(path)
        defer { close(fd) }
        _ = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<256 {
            let n = recv(fd, &buffer, buffer.count, 0)
            guard n > 0 else { break }
            answer += buffer[..<n]
        }
        return String(decoding: answer, as: UTF8.self)
    }

    /// A connected Unix stream socket with a 10 s receive timeout.
    func connectUnix(_ path: String) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw HelperError(message: "connect \(path): \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// A socket file nobody listens on, as a killed pinproxy leaves it.
    func staleSocket(_ path: String) {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
        _ = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        close(fd)
    }

    func fileType(_ path: String) -> FileAttributeType? {
        (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType
    }

    /// The catch, the list, the refusal while quarantined, the lift with its line, the empty list and
    /// the tunnel that passes again; a second lift finds nothing.
    @Test func anOperatorListsAndLiftsACaughtInterception() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/run/control.sock"  // its directory is made at start
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.3")
        defer { genuine.stop(); rogue.stop() }
        // A guesser: it takes the second connection, once: after the probe, the tunnel's or the
        // mirror's (whichever came first); curl's key log opens the tunnel's, so the two looks
        // with the client's hello disagree whichever was taken: a caught interception.
        var attacker: Interceptor? = try Interceptor(genuine: genuine.port, rogue: rogue.port, strategy: .every(2), limit: 1)
        let port = attacker!.port
        let keyLog = try memoryDirectory() + "/keylog"
        defer { try? FileManager.default.removeItem(atPath: (keyLog as NSString).deletingLastPathComponent) }
        let proxy = try ProxyProcess(config: policy(ports: [port], rules: Self.rules,
                                                    proxy: "control_socket: \(socket)\nkeylog: { path: \(keyLog), wait: 2s }"))
        #expect(proxy.events("started").first?["control_socket"] == socket)
        #expect(fileType(socket) == .typeSocket)
        #expect((try FileManager.default.attributesOfItem(atPath: socket)[.posixPermissions] as? Int) == 0o600)

        let before = try pinproxy("quarantine", "list", "--socket", socket)
        #expect(before.status == 0 && before.stdout == "" && before.stderr == "", "\(before)")

        _ = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: port, environment: ["SSLKEYLOGFILE": keyLog])
        let caught = try #require(proxy.waitFor("interception_suspected"))
        let until = try #require(caught["quarantined_until"])
        attacker?.stop()
        attacker = nil
        // The same port now reaches the genuine server only: still quarantined, so refused.
        let back = try Upstream("leaf-ec256", name: "back", tls: "1.3", port: port)
        defer { back.stop() }
        let listed = try pinproxy("quarantine", "list", "--config", proxy.configPath)
        #expect(listed.status == 0, "\(listed)")
        let line = try #require(listed.stdout.split(separator: "\n").first.map(String.init), "\(listed)")
        #expect(listed.stdout == line + "\n")
        #expect(line.hasPrefix("host=api.pinproxy.test port=\(port) since=") && line.hasSuffix(" until=\(until) rule=api.pinproxy.test"), "\(line)")
        let refused = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: port)
        #expect(refused.exitCode != 0 && !refused.body.contains("hello from"), "\(refused)")
        #expect(proxy.waitFor("tunnel_refused") { $0["reason"] == "quarantined" } != nil)

        let lifted = try pinproxy("quarantine", "lift", "api.pinproxy.test:\(port)", "--socket", socket)
        #expect(lifted.status == 0 && lifted.stdout == "lifted host=api.pinproxy.test port=\(port)\n" && lifted.stderr == "", "\(lifted)")
        let logged = try #require(proxy.waitFor("quarantine_lifted"))
        #expect(logged["reason"] == "operator" && logged["host"] == "api.pinproxy.test" && logged["port"] == String(port), "\(logged)")
        #expect(logged["since"].map { line.contains("since=\($0) ") } == true, "\(logged) vs \(line)")
        let after = try pinproxy("quarantine", "list", "--socket", socket)
        #expect(after.status == 0 && after.stdout == "", "\(after)")

        let passes = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: port, environment: ["SSLKEYLOGFILE": keyLog])
        #expect(passes.exitCode == 0 && passes.body == "hello from back\n", "\(passes)")
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(closed["host"] == "api.pinproxy.test" && closed["tls"] == "TLSv1.3" && closed["verify"] == "probe+keylog", "\(closed)")

        let again = try pinproxy("quarantine", "lift", "api.pinproxy.test:\(port)", "--socket", socket)
        #expect(again.status == 0 && again.stdout == "not_quarantined host=api.pinproxy.test port=\(port)\n", "\(again)")
        let all = try pinproxy("quarantine", "lift", "--all", "--socket", socket)
        #expect(all.status == 0 && all.stdout == "", "\(all)")
        #expect(proxy.events("quarantine_lifted").count == 1)
        #expect(proxy.stop() == 0)
        #expect(fileType(socket) == nil, "the control socket outlived the proxy")
    }

    /// A quarantine is about an incident at its host:port: a reload that adds a `deny:` key (which
    /// moves every rule's lines) or changes another rule keeps it; a reload that changes the host's
    /// own rule lifts it (`quarantine_lifted reason=rule_changed`).
    @Test func aReloadLiftsAQuarantineOnlyWhenItsOwnRuleChanged() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/control.sock"
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.3")
        defer { genuine.stop(); rogue.stop() }
        let attacker = try Interceptor(genuine: genuine.port, rogue: rogue.port, strategy: .every(2), limit: 1)
        defer { attacker.stop() }
        let port = attacker.port
        let keyLog = try memoryDirectory() + "/keylog"
        let proxySettings = "control_socket: \(socket)\nkeylog: { path: \(keyLog), wait: 2s }"
        let rules = Self.rules + "\n  - host: other.pinproxy.test\n" + pinsLine(Pins.leafEC)
        let proxy = try ProxyProcess(config: policy(ports: [port], rules: rules, proxy: proxySettings))
        _ = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: port, environment: ["SSLKEYLOGFILE": keyLog])
        #expect(proxy.waitFor("interception_suspected") != nil, "\(proxy.log)")
        let listed = try pinproxy("quarantine", "list", "--socket", socket)
        #expect(listed.stdout.hasPrefix("host=api.pinproxy.test port=\(port) since="), "\(listed)")

        // A key on the deny list, above the rules, and another rule's pins: the quarantine stays.
        let denied = policy(ports: [port], rules: rules.replacingOccurrences(of: "  - host: other.pinproxy.test\n\(pinsLine(Pins.leafEC))",
                                                                                with: "  - host: other.pinproxy.test\n\(pinsLine(Pins.leafEC, Pins.backup))"),
                            proxy: proxySettings)
            .replacingOccurrences(of: "resolve:\n", with: "deny:\n  - \"\(Pins.leafRotated)\"\nresolve:\n")
        try proxy.reload(denied)
        let kept = try #require(proxy.waitFor("policy_reloaded"))
        #expect(kept["changes"] == "rules +0 -0 ~1 (~other.pinproxy.test); pins +1 -0; deny +1 -0", "\(kept)")
        #expect(try pinproxy("quarantine", "list", "--socket", socket).stdout == listed.stdout)
        #expect(proxy.events("quarantine_lifted").isEmpty, "\(proxy.events("quarantine_lifted"))")

        // The host's own rule changes: the quarantine is lifted, with the reason.
        try proxy.reload(denied.replacingOccurrences(of: "    quarantine: 1h\n", with: "    quarantine: 2h\n"))
        let lifted = try #require(proxy.waitFor("quarantine_lifted"))
        #expect(lifted["reason"] == "rule_changed" && lifted["host"] == "api.pinproxy.test" && lifted["port"] == String(port), "\(lifted)")
        #expect(proxy.events("policy_reloaded", count: 2).last?["changes"] == "rules +0 -0 ~1 (~api.pinproxy.test); pins +0 -0; deny +0 -0")
        #expect(try pinproxy("quarantine", "list", "--socket", socket).stdout == "")
        #expect(proxy.stop() == 0)
    }

    /// A socket file whose process is gone is replaced; a second pinproxy on a live one fails to
    /// start and leaves it alone; a file that is not a socket is never touched.
    @Test func aStaleSocketIsReplacedALiveOneIsAStartError() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/control.sock"
        staleSocket(socket)
        #expect(fileType(socket) == .typeSocket)
        #expect(throws: HelperError.self) { try connectUnix(socket) }

        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: "control_socket: \(socket)"))
        let listed = try pinproxy("quarantine", "list", "--socket", socket)
        #expect(listed.status == 0 && listed.stdout == "", "\(listed)")

        let second = try run(Paths.pinproxy, ["run", "--config", proxy.configPath, "--listen", "127.0.0.1:0"], timeout: 20)
        #expect(second.status == 1)
        let failed = second.stderr.split(separator: "\n").map { parseLogLine(String($0)) }.first { $0["event"] == "start_failed" }
        #expect(failed?["detail"] == "the control socket \(socket) is in use: another process (another pinproxy?) accepts connections on it; stop it, or give this one another proxy.control_socket",
                "\(second.stderr)")
        let still = try pinproxy("quarantine", "list", "--socket", socket)
        #expect(still.status == 0, "the failed start took the running proxy's socket: \(still)")
        #expect(proxy.stop() == 0)
        #expect(fileType(socket) == nil)

        try "not a socket\n".write(toFile: socket, atomically: false, encoding: .utf8)
        let blocked = try run(Paths.pinproxy, ["run", "--config", proxy.configPath, "--listen", "127.0.0.1:0"], timeout: 20)
        #expect(blocked.status == 1)
        let refusal = blocked.stderr.split(separator: "\n").map { parseLogLine(String($0)) }.first { $0["event"] == "start_failed" }
        #expect(refusal?["detail"] == "proxy.control_socket \(socket) exists and is not a socket; pinproxy replaces only a stale socket: remove the file or choose another path",
                "\(blocked.stderr)")
        #expect(try String(contentsOfFile: socket, encoding: .utf8) == "not a socket\n")
    }

    /// Garbage, an oversized line, a full set of silent clients: each is answered `error` (or waits
    /// its turn), and the proxy and its control socket go on serving.
    @Test func badRequestsAreAnsweredErrorWithoutHarm() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let socket = directory + "/control.sock"
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.3")
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.rules, proxy: "control_socket: \(socket)"))
        let usage = "requests: 'quarantine list', 'quarantine lift HOST:PORT' ([IPv6]:PORT), 'quarantine lift --all'"

        #expect(try exchange(socket, Array("hello\n".utf8)) == "error unknown request; \(usage)\n")
        #expect(try exchange(socket, Array("quarantine lift api.pinproxy.test\n".utf8))
                == "error 'api.pinproxy.test' is not HOST:PORT: the CONNECT target needs a port (host:port)\n")
        #expect(try exchange(socket, [0x00, 0xff, 0x1b, 0x0a]) == "error the request is not printable ASCII; \(usage)\n")
        #expect(try exchange(socket, [UInt8](repeating: UInt8(ascii: "A"), count: 600)) == "error the request line is over 512 bytes\n")
        #expect(try exchange(socket, Array(("quarantine list " + String(repeating: "x", count: 4096) + "\n").utf8))
                == "error the request line is over 512 bytes\n")

        // Four silent clients fill the server; a fifth is told so at once. Each silent one is closed
        // unanswered at its 5 s deadline, not before it (a recv that returns 0 saw the server's
        // close, not its own 10 s timeout), and the server serves again.
        let silent = try (0..<4).map { _ in try connectUnix(socket) }
        defer { for fd in silent { close(fd) } }
        usleep(200_000)
        let opened = Date()
        #expect(try exchange(socket, Array("quarantine list\n".utf8)) == "error busy: 4 control connections are open; retry shortly\n")
        var byte: UInt8 = 0
        #expect(silent.map { recv($0, &byte, 1, 0) } == [0, 0, 0, 0])
        #expect(Date().timeIntervalSince(opened) > 4)
        var answer = ""
        for _ in 0..<50 {
            answer = try exchange(socket, Array("quarantine list\n".utf8))
            if !answer.hasPrefix("error busy") { break }
            usleep(100_000)
        }
        #expect(answer == "")

        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port)
        #expect(result.exitCode == 0 && result.body == "hello from good\n", "\(result)")
        #expect(proxy.events("quarantine_lifted").isEmpty)
        #expect(proxy.stop() == 0)
    }

    /// The socket is 0600: another user than pinproxy's (and root) is refused, and told why.
    @Test func anotherUserIsRefused() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        chmod(directory, 0o755)  // the socket's mode alone keeps the user out, not its directory's
        let socket = directory + "/control.sock"
        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: "control_socket: \(socket)"))
        let nobody = try run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", Paths.pinproxy,
                                                   "quarantine", "list", "--socket", socket], timeout: 30)
        #expect(nobody.status == 1 && nobody.stdout == "")
        #expect(nobody.stderr == "pinproxy quarantine: cannot connect to the control socket \(socket): Permission denied; it is mode 0600, for pinproxy's user and root only: run this as root (sudo)\n",
                "\(nobody)")
        #expect(proxy.stop() == 0)
    }

    /// The CLI says what is missing: no socket in the policy, or no socket file (pinproxy not running).
    @Test func theCLINamesWhatIsMissing() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let config = directory + "/pinproxy.yaml"
        try policy(ports: [443]).write(toFile: config, atomically: true, encoding: .utf8)
        let unset = try pinproxy("quarantine", "list", "--config", config)
        #expect(unset.status == 1 && unset.stdout == "")
        #expect(unset.stderr == "\(config) sets no proxy.control_socket: pinproxy serves no control socket; add 'control_socket: /run/pinproxy/control.sock' under proxy: and restart it, or name the socket with --socket PATH\n",
                "\(unset.stderr)")
        let absent = try pinproxy("quarantine", "lift", "--all", "--socket", directory + "/none.sock")
        #expect(absent.status == 1 && absent.stdout == "")
        #expect(absent.stderr == "pinproxy quarantine: cannot reach the control socket \(directory)/none.sock: No such file or directory; is pinproxy running with proxy.control_socket: \(directory)/none.sock?\n",
                "\(absent.stderr)")
        let neither = try pinproxy("quarantine", "lift", "--socket", directory + "/none.sock")
        #expect(neither.status == 64 && neither.stderr.contains("name the HOST:PORT to lift, or --all"), "\(neither)")
    }
}
