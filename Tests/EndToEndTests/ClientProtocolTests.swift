import Foundation
import Testing
import TestSupport

/// How clients really talk to a proxy: a Host header naming the proxy (Node's documented CONNECT
/// pattern), and clients configured with the wrong proxy scheme, answered at once.
@Suite(.serialized) struct ClientProtocolTests {
    /// The request-target names the tunnel; a Host header naming the proxy itself changes nothing.
    @Test func aHostHeaderNamingTheProxyIsAccepted() throws {
        let server = try Upstream("leaf-ec256", name: "host header")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC))))
        let head = "CONNECT api.pinproxy.test:\(server.port) HTTP/1.1\r\nHost: 127.0.0.1:\(proxy.port)\r\nConnection: keep-alive\r\n\r\n"
        let response = try rawResponseHead(port: proxy.port, send: Array(head.utf8))
        #expect(response == "HTTP/1.1 200 Connection established\r\n\r\n")
        let allowed = proxy.waitFor("tunnel_allowed")
        #expect(allowed?["host"] == "api.pinproxy.test")
        #expect(allowed?["port"] == String(server.port))
    }

    /// `http.request({method: 'CONNECT', path: 'host:port'})` + `tls.connect` with the system Node.
    @Test func nodesDocumentedConnectPattern() throws {
        let good = try Upstream("leaf-ec256", name: "node")
        let rogue = try Upstream("rogue-leaf", name: "rogue")
        let proxy = try ProxyProcess(config: policy(ports: [good.port, rogue.port], rules: apiRule(pinsLine(Pins.leafEC))))
        func node(_ port: UInt16) throws -> String {
            try run("/usr/bin/node", ["\(Paths.scripts)/node_connect.js", String(proxy.port), "api.pinproxy.test", String(port), "/",
                                      Paths.fixture("both-roots.pem")], timeout: 30).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        #expect(try node(good.port) == "OK 200 hello from node")
        #expect(try node(rogue.port) == "REFUSED 502 Certificate Pin Mismatch")
        #expect(proxy.waitFor("tunnel_refused")?.refusal == .policy(.pinMismatch))
        #expect(proxy.events("request_rejected").isEmpty)
    }

    /// `HTTPS_PROXY=https://…` and `socks5h://…`: answered in the client's own protocol, long before
    /// `header_timeout` (curl gives up after 20 s, well before the 60 s `header_timeout`, so a hang
    /// would be exit 28, not these).
    @Test(arguments: [
        ("https", Int32(35), "alert handshake failure", "tls_to_proxy", "TLS ClientHello"),
        ("socks5h", 97, "No authentication method was acceptable", "socks_to_proxy", "SOCKS 5 greeting"),
        ("socks4a", 97, "request rejected or failed", "socks_to_proxy", "SOCKS 4 request"),
    ])
    func aClientSpeakingTheWrongProtocolIsAnsweredAtOnce(scheme: String, exit: Int32, says: String, reason: String, detail: String) throws {
        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: "header_timeout: 60s"))
        let r = try run("/usr/bin/curl", ["-sS", "--max-time", "20", "-x", "\(scheme)://127.0.0.1:\(proxy.port)", "https://api.pinproxy.test/"],
                        timeout: 30)
        #expect(r.status == exit, "\(r.stderr)")
        #expect(r.stderr.contains(says), "\(r.stderr)")
        let line = proxy.waitFor("request_rejected")
        #expect(line?["reason"] == reason)
        #expect(line?["status"] == "400")
        #expect(line?["detail"] == "the client sent a \(detail) to the proxy: HTTPS_PROXY must be http://HOST:PORT; pinproxy speaks HTTP CONNECT")
        #expect(line?["hint"] == "HTTPS_PROXY must be http://HOST:PORT; pinproxy speaks HTTP CONNECT")
        #expect(proxy.events("request_rejected").count == 1)
    }

    /// The raw replies: a fatal TLS alert, SOCKS 5 "no acceptable methods", SOCKS 4 "rejected".
    @Test(arguments: [
        ([UInt8]([0x16, 0x03, 0x01, 0x00, 0x05]), [UInt8]([0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28])),
        ([0x05, 0x01, 0x00], [0x05, 0xff]),
        ([0x04, 0x01, 0x01, 0xbb, 127, 0, 0, 1, 0], [0x00, 0x5b, 0, 0, 0, 0, 0, 0]),
    ])
    func theProtocolsOwnFailureReply(greeting: [UInt8], reply: [UInt8]) throws {
        let proxy = try ProxyProcess(config: policy(ports: [443]))
        #expect(try rawExchangeBytes(port: proxy.port, send: greeting, timeout: 3) == reply)
        #expect(proxy.waitFor("request_rejected")?["reason"] == (greeting[0] == 0x16 ? "tls_to_proxy" : "socks_to_proxy"))
    }
}
