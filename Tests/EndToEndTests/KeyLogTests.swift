import Foundation
import Testing
import TestSupport

/// TLS 1.3 verified in the stream from the client's own key log (`SSLKEYLOGFILE`): pinproxy holds
/// the server's encrypted flight until the client's SERVER_HANDSHAKE_TRAFFIC_SECRET line opens it,
/// judges the chain the client is about to accept, and checks that its key signed this handshake.
/// The attacker lets the probe reach the genuine server and serves every later connection from a
/// rogue one the client's CA bundle trusts: only the pins stand between.
@Suite(.serialized) struct KeyLogTests {
    static let apiPinned = apiRule(pinsLine(Pins.leafEC))

    /// A key log on tmpfs (secrets never touch a disk), in a directory of its own (removed at exit).
    static func keyLogPath() throws -> String { try memoryDirectory() + "/keylog" }

    /// `wait` is long enough for a client on a loaded CI machine to write its line after the
    /// ServerHello (clients take 0.25-3.4 ms on a quiet one); only the no-key-log cases pay it.
    static func config(_ port: UInt16, keyLog path: String, rules: String = apiPinned) -> String {
        policy(ports: [port], rules: rules, proxy: "keylog: { path: \(path), wait: 2s }")
    }

    static func writing(_ path: String) -> [String: String] { ["SSLKEYLOGFILE": path] }

    @Test func theGoodServerIsVerifiedWithTheKeyLog() throws {
        let path = try Self.keyLogPath()
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.3")
        let proxy = try ProxyProcess(config: Self.config(server.port, keyLog: path))
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port, environment: Self.writing(path))
        #expect(result.body == "hello from good\n", "\(result.stderr)")
        #expect(try urllib(proxy: proxy.port, host: "api.pinproxy.test", port: server.port, environment: Self.writing(path)) == "OK 200 hello from good")
        let closed = proxy.events("tunnel_closed", count: 2)
        #expect(closed.count == 2 && closed.allSatisfy { $0["verify"] == "probe+keylog" && $0["tls"] == "TLSv1.3" })

        // A client that writes no key log is verified by the mirror check once its line is missing.
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from good\n")
        #expect(proxy.events("tunnel_closed", count: 3).last?["verify"] == "probe+mirror")
    }

    @Test func theSelectiveAttackerIsRefusedOnTLS13() throws {
        let path = try Self.keyLogPath()
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.3")
        let attacker = try Replayer(genuine: genuine.port, abort: "none", then: rogue.port)
        let proxy = try ProxyProcess(config: Self.config(attacker.port, keyLog: path))

        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: attacker.port, environment: Self.writing(path))
        #expect(result.connectStatus == 200)  // the probe passed
        #expect(result.exitCode != 0 && !result.body.contains("rogue"), "\(result)")
        let line = try #require(proxy.waitFor("tunnel_refused"))
        #expect(line["stage"] == "stream" && line.refusal == .stream(.policy(.pinMismatch)) && line["tls"] == "TLSv1.3")
        #expect(line["chain.0.spki"] == Pins.rogueLeaf && line["expected.0.pin"] == Pins.leafEC)

        // Python (urllib, SSLKEYLOGFILE read by ssl.create_default_context) is refused the same way.
        let path2 = try Self.keyLogPath()
        let second = try Replayer(genuine: genuine.port, abort: "none", then: rogue.port)
        let proxy2 = try ProxyProcess(config: Self.config(second.port, keyLog: path2))
        let out = try urllib(proxy: proxy2.port, host: "api.pinproxy.test", port: second.port, environment: Self.writing(path2))
        #expect(out.hasPrefix("ERROR") && !out.contains("rogue"), "\(out)")
        #expect(proxy2.waitFor("tunnel_refused")?.refusal == .stream(.policy(.pinMismatch)))
    }

    /// Node writes its key log with `--tls-keylog` (through NODE_OPTIONS), here with its documented
    /// CONNECT pattern (`Host:` naming the proxy): verified when genuine, refused when selective-rogue.
    @Test func nodeWithItsKeyLogIsVerifiedToo() throws {
        let path = try Self.keyLogPath()
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.3")
        let attacker = try Replayer(genuine: genuine.port, abort: "none", then: rogue.port)
        let proxy = try ProxyProcess(config: policy(ports: [genuine.port, attacker.port], rules: Self.apiPinned,
                                                    proxy: "keylog: { path: \(path), wait: 2s }"))
        var environment = ProcessInfo.processInfo.environment
        environment["NODE_OPTIONS"] = "--tls-keylog=\(path)"
        func node(_ port: UInt16) throws -> String {
            try run("/usr/bin/node", ["\(Paths.scripts)/node_connect.js", String(proxy.port), "api.pinproxy.test", String(port), "/",
                                      Paths.fixture("both-roots.pem")], environment: environment, timeout: 30)
                .stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try node(genuine.port) == "OK 200 hello from genuine")
        #expect(proxy.waitFor("tunnel_closed")?["verify"] == "probe+keylog")
        let rogueAnswer = try node(attacker.port)
        #expect(rogueAnswer.hasPrefix("ERROR") && !rogueAnswer.contains("rogue"), "\(rogueAnswer)")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["stage"] == "stream" && refused.refusal == .stream(.policy(.pinMismatch)) && refused["chain.0.spki"] == Pins.rogueLeaf)
    }

    /// A server that accepts only P-384 makes every X25519-first client retry: the check reads the
    /// second ClientHello into the transcript the CertificateVerify signs.
    @Test func aHelloRetryRequestIsVerifiedToo() throws {
        let path = try Self.keyLogPath()
        let good = try Upstream("leaf-ec256", name: "good", tls: "1.3", extra: ["--groups", "secp384r1"])
        let proxy = try ProxyProcess(config: Self.config(good.port, keyLog: path))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port, environment: Self.writing(path)).body == "hello from good\n")
        #expect(proxy.waitFor("tunnel_closed")?["verify"] == "probe+keylog")

        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3", extra: ["--groups", "secp384r1"])
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.3", extra: ["--groups", "secp384r1"])
        let attacker = try Replayer(genuine: genuine.port, abort: "none", then: rogue.port)
        let path2 = try Self.keyLogPath()
        let proxy2 = try ProxyProcess(config: Self.config(attacker.port, keyLog: path2))
        let result = try curl(proxy: proxy2.port, host: "api.pinproxy.test", port: attacker.port, environment: Self.writing(path2))
        #expect(!result.body.contains("rogue"))
        let refused = try #require(proxy2.waitFor("tunnel_refused"))
        #expect(refused["stage"] == "stream" && refused.refusal == .stream(.policy(.pinMismatch)))
    }

    @Test func requireKeylogRefusesAClientWithoutOne() throws {
        let path = try Self.keyLogPath()
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.3")
        let rules = apiRule("    require_keylog: true\n" + pinsLine(Pins.leafEC))
        let proxy = try ProxyProcess(config: Self.config(server.port, keyLog: path, rules: rules))
        let without = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port)
        #expect(without.exitCode != 0 && without.body.isEmpty)
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["stage"] == "stream" && refused.refusal == .stream(.keylogMissing))
        #expect(refused["detail"]?.contains("SSLKEYLOGFILE=\(path)") == true, "\(refused)")
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port, environment: Self.writing(path)).body == "hello from good\n")
        #expect(proxy.waitFor("tunnel_closed")?["verify"] == "probe+keylog")
    }

    /// A wrong line for the client's random, written before the client's own: the flight does not
    /// open under it, and the tunnel is refused — never let through as probe-only.
    @Test func aWrongLineIsRefusedNotIgnored() throws {
        let path = try Self.keyLogPath()
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.3")
        let proxy = try ProxyProcess(config: Self.config(server.port, keyLog: path))
        let client = { (mode: String) throws -> String in
            try run("/usr/bin/env", ["python3", "\(Paths.scripts)/keylog_client.py", String(proxy.port), "api.pinproxy.test", String(server.port),
                                     Paths.fixture("both-roots.pem"), path, mode]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try client("right") == "OK HTTP/1.1 200 OK")
        #expect(proxy.waitFor("tunnel_closed")?["verify"] == "probe+keylog")
        #expect(try client("wrong").hasPrefix("ERROR"))
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["stage"] == "stream" && refused.refusal == .stream(.keylogInvalid))
    }

    func sClient(proxy: UInt16?, port: UInt16, session: String, resume: Bool, keyLog: String) throws -> String {
        var args = ["s_client", "-connect", proxy == nil ? "127.0.0.1:\(port)" : "api.pinproxy.test:\(port)", "-servername", "api.pinproxy.test",
                    "-tls1_3", "-CAfile", Paths.fixture("both-roots.pem"), "-ign_eof", "-keylogfile", keyLog, resume ? "-sess_in" : "-sess_out", session]
        if let proxy { args += ["-proxy", "127.0.0.1:\(proxy)"] }
        let command = "printf 'GET / HTTP/1.1\\r\\nHost: api.pinproxy.test\\r\\n\\r\\n' | openssl " + args.map { "'\($0)'" }.joined(separator: " ")
        let r = try run("/bin/sh", ["-c", command], timeout: 15)
        return r.stdout + r.stderr
    }

    /// A TLS 1.3 ticket read in a tunnel verified with the key log resumes through pinproxy; one
    /// from a session made directly with a rogue server that shares the genuine one's ticket keys
    /// does not.
    @Test func resumptionIsAllowedOnlyForTicketsReadInVerifiedTunnels() throws {
        let path = try Self.keyLogPath()
        let directory = try temporaryDirectory()
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.3",
                                  extra: ["--rogue-cert", Paths.fixture("rogue-leaf.chain.pem"), "--rogue-key", Paths.fixture("rogue-leaf.key.pem")])
        let proxy = try ProxyProcess(config: Self.config(server.port, keyLog: path))
        let first = try sClient(proxy: proxy.port, port: server.port, session: "\(directory)/good.pem", resume: false, keyLog: path)
        #expect(first.contains("New, TLSv1.3") && first.contains("hello from good"), "\(first)")
        let again = try sClient(proxy: proxy.port, port: server.port, session: "\(directory)/good.pem", resume: true, keyLog: path)
        #expect(again.contains("Reused, TLSv1.3") && again.contains("hello from good"), "\(again)")
        let closed = proxy.events("tunnel_closed", count: 2)
        #expect(closed.count == 2 && closed.allSatisfy { $0["verify"] == "probe+keylog" }, "\(closed)")

        let roguePort = try #require(server.helper.reported["rogue_port"].flatMap(UInt16.init))
        let direct = try sClient(proxy: nil, port: roguePort, session: "\(directory)/rogue.pem", resume: false, keyLog: "/dev/null")
        #expect(direct.contains("New, TLSv1.3"), "\(direct)")
        let resumed = try sClient(proxy: proxy.port, port: server.port, session: "\(directory)/rogue.pem", resume: true, keyLog: path)
        #expect(!resumed.contains("hello from good"), "\(resumed)")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["stage"] == "stream" && refused.refusal == .stream(.unverifiedResumption))
    }
}
