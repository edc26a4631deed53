import Foundation
import Testing
import TestSupport

/// TLS 1.3 with no key log: the mirror check. pinproxy opens its own connection with the tunnel's
/// and sends a copy of the client's ClientHello (fresh random, session id and key shares), reads
/// the chain the server shows it, signed over the mirror's transcript, and holds the tunnel's
/// flight until then.
@Suite(.serialized) struct MirrorCheckTests {
    static let apiPinned = apiRule(pinsLine(Pins.leafEC))

    @Test func aGenuineServerIsVerifiedByTheMirror() throws {
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.3")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.apiPinned))
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port)
        #expect(result.body == "hello from good\n", "\(result.stderr)")
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(closed["verify"] == "probe+mirror" && closed["tls"] == "TLSv1.3", "\(closed)")
    }

    /// The attacker lets the first connection (the probe) reach the genuine server and serves every
    /// later one from a rogue server the client trusts: the mirror is among them, and the tunnel is
    /// refused with the rogue chain. The confirming look of the same hello meets the rogue server
    /// too: every copy of the client's hello answered one way, as a server that changed its key
    /// after the probe would — refused every time, `confirming_look outcome=same_chain`, and no
    /// incident (the attacker never wins a tunnel to be quarantined against).
    @Test func anInterceptorThatLetsTheProbeThroughIsRefusedWithTheRogueChain() throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.3")
        let attacker = try Replayer(genuine: genuine.port, abort: "none", then: rogue.port)
        let proxy = try ProxyProcess(config: policy(ports: [attacker.port], rules: Self.apiPinned))
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: attacker.port)
        #expect(result.connectStatus == 200)  // the probe passed
        #expect(result.exitCode != 0 && !result.body.contains("rogue"), "\(result)")
        let line = try #require(proxy.waitFor("tunnel_refused"))
        #expect(line["stage"] == "mirror" && line["reason"] == "pin_mismatch" && line["tls"] == "TLSv1.3", "\(line)")
        let confirmed = try #require(proxy.waitFor("confirming_look"))
        #expect(confirmed["outcome"] == "same_chain" && confirmed["stage"] == "mirror" && confirmed["chain.0.spki"] == Pins.rogueLeaf, "\(confirmed)")
        #expect(proxy.events("interception_suspected").isEmpty)
    }

    /// The reverse of a cached refusal: a server fixed after a refusal is allowed on the next
    /// CONNECT (no refusal is cached).
    @Test func aServerFixedAfterARefusalIsAllowedOnTheNextConnect() throws {
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.3")
        let port = rogue.port
        let proxy = try ProxyProcess(config: policy(ports: [port], rules: Self.apiPinned))
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(port)")) == "HTTP/1.1 502 Certificate Pin Mismatch")
        rogue.stop()
        let fixed = try Upstream("leaf-ec256", name: "fixed", tls: "1.3", port: port)
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: port)
        #expect(result.body == "hello from fixed\n", "\(result.stderr)")
        #expect(proxy.waitFor("tunnel_closed")?["verify"] == "probe+mirror")
        _ = fixed
    }

    /// A server switched to a rogue chain within `verify_cache_ttl` of a good probe is refused on
    /// the next CONNECT: the cached probe chain stands for nothing, the mirror sees the rogue one.
    @Test func aServerSwitchedToARogueChainIsRefusedOnTheNextConnectCacheOrNot() throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        let port = genuine.port
        let proxy = try ProxyProcess(config: policy(ports: [port], rules: Self.apiPinned, proxy: "workers: 1"))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: port).body == "hello from genuine\n")
        genuine.stop()
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.3", port: port)
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: port)
        #expect(result.connectStatus == 200 && result.exitCode != 0 && !result.body.contains("rogue"), "\(result)")
        let allowed = proxy.events("tunnel_allowed", count: 2)
        #expect(allowed.map { $0["cached"] ?? "?" } == ["false", "true"])  // the second CONNECT did not probe
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["stage"] == "mirror" && refused["reason"] == "pin_mismatch" && refused["chain.0.spki"] == Pins.rogueLeaf, "\(refused)")
        _ = rogue
    }

    /// `mirror_checks: 2`: two decoys per tunnel, each verified; the server answers three handshakes
    /// besides the probe's, and the genuine tunnel passes.
    @Test func decoysAreVerifiedToo() throws {
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.3")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC) + "\n    mirror_checks: 2")))
        for _ in 0..<3 { #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from good\n") }
        let closed = proxy.events("tunnel_closed", count: 3)
        #expect(closed.count == 3 && closed.allSatisfy { $0["verify"] == "probe+mirror" }, "\(closed)")
        #expect(proxy.lines.allSatisfy { $0["event"] != "interception_suspected" && $0["event"] != "tunnel_refused" })
    }

    /// `mirror_checks: 0`: no mirror, and the probe is made for every CONNECT (no cache stands for
    /// the check a TLS 1.3 tunnel then rests on).
    @Test func withoutMirrorsTheProbeIsMadeForEveryConnect() throws {
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.3")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC) + "\n    mirror_checks: 0")))
        for _ in 0..<2 { #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from good\n") }
        #expect(proxy.events("tunnel_allowed", count: 2).map { $0["cached"] ?? "?" } == ["false", "false"])
        let closed = proxy.events("tunnel_closed", count: 2)
        #expect(closed.count == 2 && closed.allSatisfy { $0["verify"] == "probe-only" && $0["reason"] == nil }, "\(closed)")
    }
}
