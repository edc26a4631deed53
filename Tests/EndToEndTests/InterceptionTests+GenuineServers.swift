import Foundation
import Testing
import TestSupport

// InterceptionTests, sections 4 to 6: genuine servers pass, with no refusal and no suspicion, also
// when one picks TLS 1.2 on the mirror or asks for a HelloRetryRequest (which the mirror answers).
// The scene, the attempts and what they must show are in InterceptionTests.swift.
extension InterceptionTests {
    // MARK: 4. Genuine servers: no refusal, no suspicion

    /// `count` curl requests through pinproxy to one port, `parallel` curl runs at once, each run
    /// a new connection per URL (`--no-sessionid`: full handshakes, so every tunnel has a mirror to
    /// verify); the bodies' lines.
    static func curlMany(proxy: UInt16, port: UInt16, count: Int, parallel: Int) throws -> [String] {
        let url = "https://\(host):\(port)/"
        let runs = try (0..<parallel).map { index in
            try BackgroundRun("/usr/bin/curl", ["-sS", "--max-time", "60", "--no-sessionid", "--proxy", "http://127.0.0.1:\(proxy)",
                                                "--cacert", Paths.fixture("both-roots.pem"), "-w", "\n"]
                                + Array(repeating: url, count: count / parallel + (index < count % parallel ? 1 : 0)))
        }
        return runs.flatMap { $0.output(timeout: 120).split(separator: "\n").map(String.init) }
    }

    /// Every tunnel verified by the mirror, nothing refused or suspected.
    static func expectAllVerified(_ proxy: ProxyProcess, count: Int, sourceLocation: SourceLocation = #_sourceLocation) {
        let closed = proxy.events("tunnel_closed", count: count, timeout: 30)
        #expect(closed.count == count, sourceLocation: sourceLocation)
        let other = closed.filter { $0["verify"] != "probe+mirror" }
        #expect(other.isEmpty, "\(other.prefix(3))", sourceLocation: sourceLocation)
        let bad = proxy.lines.filter { ["tunnel_refused", "interception_suspected", "tunnel_warning"].contains($0["event"] ?? "") }
        #expect(bad.isEmpty, "\(bad.prefix(3))", sourceLocation: sourceLocation)
    }

    /// 200 tunnels, four curl runs at once (measured: 4 s on a 2-core machine shared with four builds).
    @Test func aGenuineServerIsNeverRefused() throws {
        let server = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.rules))
        let bodies = try Self.curlMany(proxy: proxy.port, port: server.port, count: 200, parallel: 4)
        #expect(bodies.filter { $0 == "hello from genuine" }.count == 200, "\(bodies.filter { $0 != "hello from genuine" }.prefix(5))")
        Self.expectAllVerified(proxy, count: 200)
    }

    /// A pool behind one address answering with either of two pinned keys: the probe, the mirror
    /// and the client's connection may each meet another backend, and all pass.
    @Test func aLoadBalancedServerWithTwoPinnedKeysIsNeverRefused() throws {
        let server = try LoadBalancedUpstream(seed: 5)
        defer { server.stop() }
        let rules = apiRule("    quarantine: 1h\n" + pinsLine(Pins.leafEC, Pins.leafRotated))
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: rules))
        let bodies = try Self.curlMany(proxy: proxy.port, port: server.port, count: 200, parallel: 4)
        #expect(bodies.count == 200 && bodies.allSatisfy { $0 == "key=a" || $0 == "key=b" }, "\(bodies.prefix(5))")
        #expect(Set(bodies) == ["key=a", "key=b"])
        Self.expectAllVerified(proxy, count: 200)
    }

    // MARK: 5. A server that picks TLS 1.2 on the mirror

    /// The "rogue" side is a genuine TLS 1.2 server with the genuine chain: the tunnel and the
    /// mirror each meet TLS 1.3 or 1.2 at random; a TLS 1.2 answer shows its Certificate in clear and
    /// passes. Every attempt succeeds.
    @Test func aServerThatPicksTLS12OnTheMirrorPasses() throws {
        let scene = try Scene(.random(probability: 0.5, seed: 7), rogue: ("leaf-ec256", "tls12", "1.2"))
        defer { scene.stop() }
        let attempts = try scene.attack { try scene.curl() }
        for attempt in attempts {
            let tls12 = attempt.output == "hello from tls12\n" && attempt.end["tls"] == "TLSv1.2"
            let tls13 = attempt.output == "hello from genuine\n" && attempt.end["tls"] == "TLSv1.3"
            #expect((tls12 || tls13) && ["probe+mirror", "probe+stream"].contains(attempt.end["verify"] ?? ""), "\(attempt)\n\(attempts)")
        }
        // Seed 7's draws are R, then the pairs Rg Rg RR gR RR RR … (R: the TLS 1.2 server): the probe
        // meets TLS 1.2, and in the RR attempts both the tunnel and its mirror do. Each draw of the
        // interceptor went to a probe, a tunnel or a mirror: the mirrors that met TLS 1.2 are the rest.
        let toTLS12 = scene.interceptor.entries.filter { $0.decision == .rogue }.count
        let probesOnTLS12 = scene.proxy.events("tunnel_allowed").filter { $0["cached"] == "false" && $0["tls"] == "TLSv1.2" }.count
        let tunnelsOnTLS12 = attempts.filter { $0.end["tls"] == "TLSv1.2" }.count
        #expect(probesOnTLS12 >= 1 && tunnelsOnTLS12 >= 4 && toTLS12 - probesOnTLS12 - tunnelsOnTLS12 >= 4, "\(toTLS12) \(probesOnTLS12) \(tunnelsOnTLS12)")
        // Nothing suspected, refused or warned of but the documented difference between the probe's TLS version and the tunnel's.
        let suspicious = scene.proxy.lines.filter {
            ["interception_suspected", "tunnel_refused"].contains($0["event"] ?? "") || ($0["event"] == "tunnel_warning" && $0["reason"] != "tls_version_changed")
        }
        #expect(suspicious.isEmpty, "\(suspicious)")
    }

    // MARK: 6. HelloRetryRequest

    /// Servers that accept only P-384 make curl's X25519-first hello retry; the mirror answers the
    /// HelloRetryRequest with a mirror of curl's second hello. A genuine server passes; the
    /// interceptor that takes every curl-shaped hello is refused every time (it answers that hello
    /// the same way on every look, so it is no incident: see alpnInvertedIsRefusedEveryTime).
    @Test func aHelloRetryRequestGoesThroughTheMirror() throws {
        let good = try Upstream("leaf-ec256", name: "good", tls: "1.3", extra: ["--groups", "secp384r1"])
        defer { good.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [good.port], rules: Self.rules))
        for _ in 0..<3 { #expect(try curl(proxy: proxy.port, host: Self.host, port: good.port).body == "hello from good\n") }
        Self.expectAllVerified(proxy, count: 3)

        let capture = try Self.curlShapeCapture()
        let scene = try Scene(.fingerprint(learnedFrom: capture.logPath), upstreamExtra: ["--groups", "secp384r1"])
        defer { scene.stop() }
        let attempts = try scene.attack(4) { try scene.curl() }
        Self.expectRefusedEveryTimeByTheMirror(scene, attempts)
    }

    /// A balancer whose two backends prefer different groups (one has only P-384): of a tunnel's
    /// connection and its mirror, one reaches each backend, so one of them gets a HelloRetryRequest
    /// and the other not. When the mirror gets it, it answers as the client would (RFC 8446
    /// §4.1.2); when the client gets it, the mirror mirrors its second hello. Every tunnel gets
    /// its body, verified by the mirror, nothing refused.
    @Test func aBalancerWhoseBackendsPreferOtherGroupsPassesEveryTunnel() throws {
        let x25519 = try Upstream("leaf-ec256", name: "x25519 backend", tls: "1.3")
        defer { x25519.stop() }
        let p384 = try Upstream("leaf-ec256", name: "p384 backend", tls: "1.3", extra: ["--groups", "secp384r1"])
        defer { p384.stop() }
        // Every second connection to the P-384 backend: whatever the order, the pair splits.
        let balancer = try Interceptor(genuine: x25519.port, rogue: p384.port, strategy: .every(2))
        defer { balancer.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [balancer.port], rules: Self.rules))
        for attempt in 1...8 {
            let body = try curl(proxy: proxy.port, host: Self.host, port: balancer.port).body
            #expect(["hello from x25519 backend\n", "hello from p384 backend\n"].contains(body), "attempt \(attempt): \(body)")
        }
        let closed = proxy.events("tunnel_closed", count: 8)
        #expect(closed.count == 8 && closed.allSatisfy { $0["verify"] == "probe+mirror" }, "\(closed)")
        #expect(proxy.events("tunnel_refused").isEmpty && proxy.events("interception_suspected").isEmpty, "\(proxy.log)")
        // Both kinds happened: a retry the mirror answered itself and one the client answered.
        let retried = balancer.entries.filter { $0.decision == .rogue }.count
        #expect(retried >= 8, "\(balancer.entries.count) connections")
    }
}
