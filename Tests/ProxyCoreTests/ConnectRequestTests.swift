import Foundation
import Logging
import PinPolicy
import Testing
@testable import ProxyCore

@Suite struct ConnectRequestTests {
    func parse(_ text: String) -> Result<ConnectRequest, ConnectRequest.Problem> { ConnectRequest.parse(head: Array(text.utf8)) }

    @Test(arguments: [
        "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\n\r\n",
        "CONNECT api.example.com:443 HTTP/1.0\r\n\r\n",                       // Python http.client
        "CONNECT api.example.com:443 HTTP/1.1\nHost: API.example.com.\n\n",   // bare LF, Host without port
        "CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\nUser-Agent: curl/7.88\r\nProxy-Connection: Keep-Alive\r\n\r\n",
    ])
    func accepted(text: String) throws {
        let request = try parse(text).get()
        #expect(request.authority.port == 443)
    }

    /// Node's documented CONNECT pattern sends the proxy's address as Host; any Host is accepted and
    /// the request-target alone names the tunnel.
    @Test(arguments: ["127.0.0.1:3128", "b.example:443", "[::1]:3128", "not a host at all"])
    func theTargetDecidesWhateverHostSays(host: String) throws {
        let request = try parse("CONNECT a.example:443 HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n").get()
        #expect(request.authority.description == "a.example:443")
    }

    @Test(arguments: [
        ("GET http://a.example/ HTTP/1.1\r\n\r\n", ConnectRequest.Problem.methodNotAllowed("GET")),
        ("connect a.example:443 HTTP/1.1\r\n\r\n", .methodNotAllowed("connect")),
        ("CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\nHost: a.example:443\r\n\r\n", .malformed("more than one Host header")),
        ("CONNECT a.example:443\r\n\r\n", .malformed("the request line must be 'CONNECT host:port HTTP/1.1'")),
        ("CONNECT  a.example:443 HTTP/1.1\r\n\r\n", .malformed("the request line must be 'CONNECT host:port HTTP/1.1'")),
        ("CONNECT a.example:443 HTTP/1.1\r\nNo colon here\r\n\r\n", .malformed("a header line is not 'Name: value'")),
        ("CONNECT a.example:443 HTTP/1.1\r\nBad Name: x\r\n\r\n", .malformed("a header line is not 'Name: value'")),
        ("CONNECT a.example:443 HTTP/1.1\r\nX: a\u{1}b\r\n\r\n", .malformed("a header value has control bytes")),
        ("CONNECT a.example:443 HTTP/1.1\r\nX: a\r\n  continued\r\n\r\n", .malformed("obsolete header line folding is not accepted")),
        ("CONNECT a.example:443 HTTP/3\r\n\r\n", .malformed("unsupported protocol version 'HTTP/3'; pinproxy speaks HTTP/1.1 and HTTP/1.0")),
        ("CONNECT a.example HTTP/1.1\r\n\r\n", .badTarget(.missingPort)),
        ("CONNECT 127.1:443 HTTP/1.1\r\n\r\n", .badTarget(.badHost(.numericIPv4Form))),
        ("\r\n\r\n", .malformed("empty request")),
    ])
    func refused(text: String, problem: ConnectRequest.Problem) {
        #expect(throws: problem) { try parse(text).get() }
    }

    @Test func headerCountLimit() {
        let ok = "CONNECT a.example:443 HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: 100) + "\r\n"
        #expect(throws: Never.self) { try parse(ok).get() }
        let over = "CONNECT a.example:443 HTTP/1.1\r\n" + String(repeating: "X: y\r\n", count: 101) + "\r\n"
        #expect(throws: ConnectRequest.Problem.tooManyHeaders) { try parse(over).get() }
    }

    /// The head end is found whether the bytes arrive at once (blast) or one by one (drip), with
    /// CRLF or bare LF, and early tunnel bytes after it are not part of the head.
    @Test(arguments: ["CONNECT a.example:443 HTTP/1.1\r\nHost: a.example\r\n\r\n", "CONNECT a.example:443 HTTP/1.0\n\n"])
    func headLengthDripAndBlast(head: String) {
        let bytes = Array(head.utf8) + [0x16, 0x03, 0x01]  // a ClientHello starting right behind it
        #expect(bytes.withUnsafeBytes { ConnectRequest.headLength(in: $0) } == head.utf8.count)
        for cut in 0..<head.utf8.count {
            #expect(Array(bytes.prefix(cut)).withUnsafeBytes { ConnectRequest.headLength(in: $0) } == nil)
        }
    }
}

@Suite struct RefusalTests {
    @Test func pinMismatchResponse() {
        let text = String(decoding: Refusal.policy(.pinMismatch, detail: "no pin matched").response(host: "api.example.com"), as: UTF8.self)
        #expect(text == """
            HTTP/1.1 502 Certificate Pin Mismatch\r
            Proxy-Status: pinproxy; error=tls_certificate_error; details="pin_mismatch"\r
            Content-Type: text/plain; charset=utf-8\r
            Content-Length: 78\r
            Connection: close\r
            \r
            pinproxy refused the tunnel to api.example.com: pin_mismatch (no pin matched)\n
            """)
    }

    @Test(arguments: RefusalReason.allCases)
    func everyPolicyReasonHasAMeaningfulStatus(reason: RefusalReason) {
        let refusal = Refusal.policy(reason, detail: "x")
        #expect([403, 502].contains(refusal.status))
        #expect(refusal.reason == reason.rawValue)
        #expect(!refusal.phrase.isEmpty && refusal.phrase != "Bad Gateway" && refusal.phrase != "Forbidden")
    }

    @Test func methodAndLimitResponsesCarryTheirHeaders() {
        let method = String(decoding: Refusal.methodNotAllowed("only CONNECT").response(host: nil), as: UTF8.self)
        #expect(method.contains("\r\nAllow: CONNECT, DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT\r\n"))
        let limit = String(decoding: Refusal.tunnelLimit.response(host: "a"), as: UTF8.self)
        #expect(limit.hasPrefix("HTTP/1.1 503 Too Many Tunnels\r\n") && limit.contains("\r\nRetry-After: 1\r\n"))
    }
}

@Suite struct LogRecordTests {
    let time = Date(timeIntervalSince1970: 1_795_975_200.123)

    @Test func bothFormatsCarryTheSameKeysAndEscapeNetworkText() {
        var record = LogRecord(.warning, "tunnel_refused", [("conn", .int(7)), ("host", .string("evil\"host\n=x")), ("sni", .string("ünï"))])
        record.fields.append(("chain", .objects([[("position", .int(0)), ("spki", .string("spki-sha256:AA=="))], [("position", .int(1)), ("anchor", .bool(true))]])))
        #expect(record.text(at: time) == #"ts=2026-11-29T18:00:00.123Z level=warning event=tunnel_refused conn=7 host="evil\"host\n=x" sni="\u00fcn\u00ef" chain.0.position=0 chain.0.spki="spki-sha256:AA==" chain.1.position=1 chain.1.anchor=true"#)
        #expect(record.json(at: time) == #"{"ts":"2026-11-29T18:00:00.123Z","level":"warning","event":"tunnel_refused","conn":7,"host":"evil\"host\n=x","sni":"\u00fcn\u00ef","chain":[{"position":0,"spki":"spki-sha256:AA=="},{"position":1,"anchor":true}]}"#)
    }

    @Test func swiftLogMetadataComesBackInTheCanonicalOrder() {
        let record = LogRecord(.info, "tunnel_allowed", [("pin", .string("p")), ("host", .string("h")), ("conn", .int(1)), ("zzz", .string("z")), ("chain", .objects([[("anchor", .bool(false)), ("position", .int(0))]]))])
        let rebuilt = LogRecord(level: .info, event: "tunnel_allowed", metadata: record.metadata)
        #expect(rebuilt.fields.map(\.0) == ["host", "conn", "pin", "zzz", "chain"])
        #expect(rebuilt.text(at: time).hasSuffix("event=tunnel_allowed host=h conn=1 pin=p zzz=z chain.0.position=0 chain.0.anchor=false"))
    }
}

/// The first byte of a connection tells a client that speaks TLS or SOCKS to the proxy itself.
@Suite struct WrongProtocolTests {
    @Test func theFirstByteTells() {
        #expect(WrongProtocol.detect(firstByte: 0x16) == .tls)
        #expect(WrongProtocol.detect(firstByte: 0x04) == .socks4)
        #expect(WrongProtocol.detect(firstByte: 0x05) == .socks5)
        // Every byte an HTTP request line may start with (a method token, or the CRLF some clients
        // send first) is left to the HTTP parser.
        for byte in UInt8(0x20)...0x7e where isTokenByte(byte) { #expect(WrongProtocol.detect(firstByte: byte) == nil) }
        #expect(WrongProtocol.detect(firstByte: 0x0d) == nil)
        #expect(WrongProtocol.detect(firstByte: 0x0a) == nil)
    }

    @Test func eachIsAnsweredInItsOwnProtocolAndLoggedWithTheHint() {
        #expect(WrongProtocol.tls.refusal.response(host: nil) == [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28])
        #expect(WrongProtocol.socks5.refusal.response(host: nil) == [0x05, 0xff])
        #expect(WrongProtocol.socks4.refusal.response(host: nil) == [0x00, 0x5b, 0, 0, 0, 0, 0, 0])
        #expect(WrongProtocol.tls.refusal.reason == "tls_to_proxy")
        #expect(WrongProtocol.socks4.refusal.reason == "socks_to_proxy")
        #expect(WrongProtocol.socks5.refusal.reason == "socks_to_proxy")
    }
}

/// The CONNECT pinproxy sends a parent proxy, and how its answer is read.
@Suite struct ParentHopTests {
    let hop = ParentHop(parent: UpstreamProxy(address: SocketAddress.parse("10.0.0.1:3128")!, authorization: "Basic dTpw"),
                        target: Authority(target: .name("api.example.com"), port: 443))

    @Test func theRequestCarriesTheTargetAndTheCredentials() {
        #expect(String(decoding: hop.request, as: UTF8.self)
                == "CONNECT api.example.com:443 HTTP/1.1\r\nHost: api.example.com:443\r\nProxy-Authorization: Basic dTpw\r\n\r\n")
    }

    @Test(arguments: [
        ("HTTP/1.1 200 Connection established\r\n\r\n", ParentHop.Answer.established),
        ("HTTP/1.0 200\r\nVia: 1.1 squid\r\n\r\n", .established),
        ("HTTP/1.1 204 No Content\r\n\r\n", .established),
        ("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n", .refused(status: 403, phrase: "Forbidden")),
        ("HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", .refused(status: 407, phrase: "Proxy Authentication Required")),
        ("HTTP/1.1 503 Service \u{7}Unavailable\r\n\r\n", .refused(status: 503, phrase: "Service Unavailable")),
        ("HTTP/1.1 100 Continue\r\n\r\n", .malformed("its answer does not start with an HTTP/1.x status line")),
        ("SSH-2.0-OpenSSH\r\n\r\n", .malformed("its answer does not start with an HTTP/1.x status line")),
        ("HTTP/1.1 2000 OK\r\n\r\n", .malformed("its answer does not start with an HTTP/1.x status line")),
    ])
    func answers(text: String, answer: ParentHop.Answer) {
        #expect(ParentHop.parse(answer: Array(text.utf8)) == answer)
    }

    @Test func aRefusalKeepsTheParentsStatusExceptA407() {
        let forbidden = hop.refusal(status: 403, phrase: "Forbidden")
        #expect(forbidden.status == 403 && forbidden.phrase == "Forbidden" && forbidden.reason == "upstream_proxy_refused")
        #expect(String(decoding: forbidden.response(host: "api.example.com"), as: UTF8.self).contains(
            "Proxy-Status: pinproxy; error=http_request_denied; details=\"upstream_proxy_refused\"; received-status=403\r\n"))
        let auth = hop.refusal(status: 407, phrase: "Proxy Authentication Required")
        #expect(auth.status == 502 && auth.phrase == "Parent Proxy Authentication Failed")
        #expect(hop.refusal(status: 302, phrase: "Found").status == 502)
        #expect(!forbidden.detail.contains("dTpw"))
    }
}
