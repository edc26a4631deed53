import Foundation
import Testing
import TestSupport

/// A client of 2026 (OpenSSL 4.0 through pyOpenSSL, scripts/pq_peer.py) through pinproxy to a
/// server of 2026 that picks the client's post-quantum share: the mirror sends a share of its own
/// in that group and verifies; a share in a group pinproxy cannot compute leaves the tunnel to the
/// probe, saying so.
@Suite(.serialized) struct PostQuantumMirrorTests {
    static let script = Paths.scripts + "/pq_peer.py"

    /// The server takes the hybrids and X25519 (the probe's group: Debian's OpenSSL 3.0).
    static func server() throws -> Helper {
        try Helper(try Paths.requirePeers(), [
            script, "server", "--cert", Paths.fixture("leaf-ec256.pem"), "--key", Paths.fixture("leaf-ec256.key.pem"),
            "--chain", Paths.fixture("good-intermediate.pem"), "--groups", "X25519MLKEM768:SecP256r1MLKEM768:X25519",
        ])
    }

    static func client(proxy: UInt16, server: UInt16, groups: String) throws -> Run {
        try run(try Paths.requirePeers(), [
            script, "client", "--proxy", "\(proxy)", "--host", "api.pinproxy.test", "--port", "\(server)",
            "--groups", groups, "--cafile", Paths.fixture("both-roots.pem"),
        ], timeout: 30)
    }

    @Test(arguments: ["X25519MLKEM768", "SecP256r1MLKEM768"])
    func aHybridShareIsVerifiedByTheMirror(_ group: String) throws {
        let server = try Self.server()
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC))))
        let result = try Self.client(proxy: proxy.port, server: server.port, groups: group)
        #expect(result.stdout == "200 \(group) hello from pq\n", "\(result.stderr)")
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(closed["verify"] == "probe+mirror" && closed["tls"] == "TLSv1.3" && closed["reason"] == nil, "\(closed)")
    }

    /// MLKEM512 (0x0200): the client's only share, a group pinproxy does not compute. No mirror is
    /// sent (random bytes would be refused and would mark it); the server asks the client for
    /// X25519MLKEM768 and the tunnel, verified by the probe alone, says why.
    @Test func aShareOfAGroupPinproxyCannotComputeLeavesTheTunnelToTheProbe() throws {
        let server = try Self.server()
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC))))
        let result = try Self.client(proxy: proxy.port, server: server.port, groups: "MLKEM512:X25519MLKEM768")
        #expect(result.stdout == "200 X25519MLKEM768 hello from pq\n", "\(result.stderr)")
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(closed["verify"] == "probe-only" && closed["reason"] == "mirror_unavailable", "\(closed)")
        #expect(closed["detail"] == "the client's ClientHello cannot be mirrored: mirror hello: the ClientHello has a key share in group 0x0200, which pinproxy cannot compute; a look-alike would give the mirror away, so the mirror is not sent", "\(closed)")
        #expect(closed["level"] == "warning", "\(closed)")
        #expect(proxy.stop() == 0)
        #expect(proxy.events("stopped").first?["mirrors_unavailable"] == "1", "\(proxy.events("stopped"))")
    }
}
