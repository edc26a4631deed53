import Foundation
import Testing
import TestSupport

// InterceptionTests, section 7: a TLS 1.3 resumption with no key line is allowed and said
// unverified, and refused while the host is quarantined. The scene and the attempts are in
// InterceptionTests.swift.
extension InterceptionTests {
    // MARK: 7. Resumption

    /// openssl s_client through pinproxy with no key log, saving (`-sess_out`) or resuming
    /// (`-sess_in`) a session; its output.
    static func sClient(proxy: UInt16, port: UInt16, session: String, resume: Bool, extra: [String] = []) throws -> String {
        let args = ["s_client", "-connect", "\(host):\(port)", "-proxy", "127.0.0.1:\(proxy)", "-servername", host, "-tls1_3",
                    "-CAfile", Paths.fixture("both-roots.pem"), "-ign_eof", resume ? "-sess_in" : "-sess_out", session] + extra
        let command = "printf 'GET / HTTP/1.1\\r\\nHost: \(host)\\r\\n\\r\\n' | openssl " + args.map { "'\($0)'" }.joined(separator: " ")
        let r = try run("/bin/sh", ["-c", command], timeout: 20)
        return r.stdout + r.stderr
    }

    /// curl resumes within one run: the second tunnel resumed a ticket with no key line, so nothing
    /// verified it: allowed, said at warning level (`verify=resumption-unverified`,
    /// `reason=resumption_unverified`), counted in `resumptions_unverified`.
    @Test func aResumptionWithNoKeyLineIsAllowedAndSaidUnverified() throws {
        let server = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.rules))
        let url = "https://\(Self.host):\(server.port)/"
        let r = try run("/usr/bin/curl", ["-sS", "--max-time", "20", "--proxy", "http://127.0.0.1:\(proxy.port)",
                                          "--cacert", Paths.fixture("both-roots.pem"), url, url],
                        environment: ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()])
        #expect(r.stdout == "hello from genuine\nhello from genuine\n", "\(r)")
        let closed = proxy.events("tunnel_closed", count: 2)
        #expect(closed.map { $0["verify"] ?? "?" } == ["probe+mirror", "resumption-unverified"], "\(closed)")
        #expect(closed.last?["level"] == "warning" && closed.last?["reason"] == "resumption_unverified", "\(closed)")
        #expect(proxy.stop() == 0)
        #expect(proxy.events("stopped").first?["resumptions_unverified"] == "1", "\(proxy.events("stopped"))")
    }

    /// Where the resumed ticket came from: a session in a tunnel pinproxy verified, or one the rogue
    /// server minted (after a lucky interception) and the genuine server accepts (they share ticket
    /// keys: upstream.py's `--rogue-cert`).
    enum Ticket: String, CaseIterable, Sendable { case fromAVerifiedTunnel, mintedByTheRogueServer }

    /// Item 5 both ways: before a catch a TLS 1.3 resumption with no key line is allowed and said
    /// unverified (the residual: nothing can tell a minted ticket from a genuine one); after a catch
    /// the same resumption is refused `quarantined`.
    @Test(arguments: Ticket.allCases)
    func aResumptionIsAllowedUnverifiedThenRefusedWhileTheHostIsQuarantined(ticket: Ticket) throws {
        let server = try Upstream("leaf-ec256", name: "genuine", tls: "1.3",
                                  extra: ["--rogue-cert", Paths.fixture("rogue-leaf.chain.pem"), "--rogue-key", Paths.fixture("rogue-leaf.key.pem")])
        defer { server.stop() }
        let roguePort = try #require(server.helper.reported["rogue_port"].flatMap(UInt16.init))
        // Takes curl's hellos only: s_client's (another shape) reach the genuine server.
        let capture = try Self.curlShapeCapture()
        // A guesser: it takes the first curl-shaped connection only, the tunnel's or its mirror's.
        let interceptor = try Interceptor(genuine: server.port, rogue: roguePort, strategy: .fingerprint(learnedFrom: capture.logPath), limit: 1)
        defer { interceptor.stop() }
        // curl writes a key log for the catch, so that whichever of its two connections was taken,
        // the other look with the same hello shows the genuine chain: a proved disagreement.
        // s_client writes none: its tunnels wait the 2 s, then rest on the mirror as before.
        let keyLog = try memoryDirectory() + "/keylog"
        defer { try? FileManager.default.removeItem(atPath: (keyLog as NSString).deletingLastPathComponent) }
        let proxy = try ProxyProcess(config: policy(ports: [interceptor.port], rules: Self.rules, proxy: "keylog: { path: \(keyLog), wait: 2s }"))
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let session = directory + "/session.pem"
        var tunnels = 0
        switch ticket {
        case .fromAVerifiedTunnel:
            let first = try Self.sClient(proxy: proxy.port, port: interceptor.port, session: session, resume: false)
            #expect(first.contains("New, TLSv1.3") && first.contains("hello from genuine"), "\(first)")
            #expect(proxy.events("tunnel_closed", count: 1).first?["verify"] == "probe+mirror")
            tunnels = 1
        case .mintedByTheRogueServer:
            let direct = try run("/bin/sh", ["-c", "printf 'GET / HTTP/1.1\\r\\nHost: \(Self.host)\\r\\n\\r\\n' | openssl s_client -connect 127.0.0.1:\(roguePort) "
                                           + "-servername \(Self.host) -tls1_3 -CAfile '\(Paths.fixture("both-roots.pem"))' -ign_eof -sess_out '\(session)'"], timeout: 20)
            #expect(direct.stdout.contains("New, TLSv1.3") && direct.stdout.contains("rogue"), "\(direct)")
        }

        let resumed = try Self.sClient(proxy: proxy.port, port: interceptor.port, session: session, resume: true)
        #expect(resumed.contains("Reused, TLSv1.3") && resumed.contains("hello from genuine"), "\(resumed)")
        let closed = try #require(proxy.events("tunnel_closed", count: tunnels + 1).last)
        #expect(closed["verify"] == "resumption-unverified" && closed["level"] == "warning" && closed["reason"] == "resumption_unverified", "\(closed)")

        let caughtOutput = try curl(proxy: proxy.port, host: Self.host, port: interceptor.port, environment: ["SSLKEYLOGFILE": keyLog])
        #expect(["", "hello from genuine\n"].contains(caughtOutput.body) && caughtOutput.connectStatus == 200, "\(caughtOutput)")
        let caught = try #require(proxy.waitFor("interception_suspected"))
        #expect(["mirror", "stream"].contains(caught["stage"] ?? "") && caught["chain.0.spki"] == Pins.rogueLeaf, "\(caught)")

        let quarantined = try Self.sClient(proxy: proxy.port, port: interceptor.port, session: session, resume: true)
        #expect(!quarantined.contains("hello from"), "\(quarantined)")
        let refused = try #require(proxy.waitFor("tunnel_refused") { $0["reason"] == "quarantined" })
        #expect(refused["tls"] == "TLSv1.3" && refused["host"] == Self.host, "\(refused)")
        // Each resumption's tunnel and its mirror (random identities of the same lengths) offered a
        // PSK. The interceptor logs a connection when it has read its hello, which may come after
        // the refusal's line under load: wait for it (bounded), then count exactly.
        let deadline = Date().addingTimeInterval(10)
        while interceptor.entries.filter(\.offersPSK).count < 4 && Date() < deadline { usleep(50_000) }
        #expect(interceptor.entries.filter(\.offersPSK).count == 4, "\(interceptor.entries)")
        #expect(proxy.stop() == 0)
        #expect(proxy.events("stopped").first?["resumptions_unverified"] == "1", "\(proxy.events("stopped"))")
    }
}
