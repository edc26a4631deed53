import Foundation
import Testing
import TestSupport

/// TLS 1.3 with no key log: the mirror check. pinproxy opens its own connection with the tunnel's
/// and sends a copy of the client's ClientHello (fresh random, session id and key shares), reads
/// the chain the server shows it, signed over the mirror's transcript, and holds the tunnel's
/// flight until then.
@Suite(.serialized) struct MirrorTests {
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
    /// later one from a rogue server the client trusts: the mirror is among them, and is caught.
    @Test func anInterceptorThatLetsTheProbeThroughIsCaught() throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.3")
        let attacker = try Replayer(genuine: genuine.port, abort: "none", then: rogue.port)
        let proxy = try ProxyProcess(config: policy(ports: [attacker.port], rules: Self.apiPinned))
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: attacker.port)
        #expect(result.connectStatus == 200)  // the probe passed
        #expect(result.exitCode != 0 && !result.body.contains("rogue"), "\(result)")
        let line = try #require(proxy.waitFor("tunnel_refused"))
        #expect(line["stage"] == "mirror" && line["reason"] == "pin_mismatch" && line["tls"] == "TLSv1.3", "\(line)")
        let caught = try #require(proxy.waitFor("interception_suspected"))
        #expect(caught["stage"] == "mirror" && caught["chain.0.spki"] == Pins.rogueLeaf && caught["quarantined_until"] != nil, "\(caught)")
    }
}
