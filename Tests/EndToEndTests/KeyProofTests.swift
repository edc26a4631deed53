import Foundation
import Testing
import TestSupport

/// A chain counts only when the server proved, in the probe's handshake, that it holds the leaf's
/// key. These attackers send a site's genuine public chain and then abort, in every way a
/// handshake can end, on TLS 1.2 and 1.3.
@Suite(.serialized) struct KeyProofTests {
    static let aborts = ["1.2", "1.3"].flatMap { tls in ["alert", "fin", "rst"].map { (tls, $0) } }

    @Test(arguments: aborts)
    func aReplayedChainWithoutTheKeyIsRefused(tls: String, abort: String) throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: tls)
        let attacker = try Replayer(genuine: genuine.port, abort: abort)
        let proxy = try ProxyProcess(config: policy(ports: [attacker.port], rules: apiRule(pinsLine(Pins.leafEC))))

        let response = try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(attacker.port)")
        #expect(statusLine(response) == "HTTP/1.1 502 TLS Handshake Failed")
        #expect(header("Proxy-Status", in: response) == "pinproxy; error=tls_protocol_error; details=\"tls_protocol_error\"")
        let line = try #require(proxy.waitForConn("tunnel_refused"))
        #expect(line.refusal == .network(.tlsProtocolError))
        #expect(line["tls"] == "TLSv\(tls)")
        #expect(line["detail"]?.contains("sent a certificate chain but did not prove it holds its key") == true, "\(line)")
        #expect(proxy.events("tunnel_allowed").isEmpty)
    }

    /// The attack end to end: the probe's connection gets the genuine chain (and an abort), the
    /// tunnel's connection a rogue-CA server. Before the proof was required the probe's chain
    /// passed the pins and the client talked to the rogue server.
    @Test(arguments: ["1.2", "1.3"])
    func theSelectiveAttackerWhoReplaysThePublicChainIsRefused(tls: String) throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: tls)
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: tls)
        let attacker = try Replayer(genuine: genuine.port, abort: "alert", then: rogue.port)
        let proxy = try ProxyProcess(config: policy(ports: [attacker.port], rules: apiRule(pinsLine(Pins.leafEC))))

        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: attacker.port)
        #expect(result.connectStatus == 502)
        #expect(!result.body.contains("rogue"))
        #expect(proxy.waitForConn("tunnel_refused")?.refusal == .network(.tlsProtocolError))
    }

    /// A server that proves its key and then wants a client certificate is judged on its chain,
    /// and the log says how the key was proved.
    @Test(arguments: [("1.2", "server_key_exchange"), ("1.3", "handshake")])
    func aServerThatProvesItsKeyBeforeAskingForAClientCertificateIsJudgedOnItsChain(tls: String, proof: String) throws {
        let server = try Upstream("leaf-ec256", name: "mtls", tls: tls, mode: "clientcert")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC))))
        let raw = try rawResponseHead(port: proxy.port, send: Array("CONNECT api.pinproxy.test:\(server.port) HTTP/1.1\r\n\r\n".utf8))
        #expect(raw.hasPrefix("HTTP/1.1 200 Connection established"))
        #expect(proxy.waitFor("tunnel_allowed")?["key_proof"] == proof)
    }
}
