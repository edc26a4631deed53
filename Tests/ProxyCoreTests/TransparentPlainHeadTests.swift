import PinPolicy
import Testing
@testable import ProxyCore

/// An origin-form request from a redirected plain port, written as the absolute-form request a proxy
/// client would send.
@Suite struct TransparentPlainHeadTests {
    static func origin(_ original: String) -> TransparentOrigin {
        TransparentOrigin(original: SocketAddress.parse(original)!, listener: SocketAddress.parse("127.0.0.1:15001")!)
    }

    func rewritten(_ head: String, _ original: String = "10.0.0.7:80") -> String {
        String(decoding: TransparentPlainHead.absoluteForm(Array(head.utf8), origin: Self.origin(original)), as: UTF8.self)
    }

    @Test(arguments: [
        ("GET /a?b HTTP/1.1\r\nHost: Example.test\r\n\r\n", "10.0.0.7:80", "GET http://example.test/a?b HTTP/1.1\r\nHost: Example.test\r\n\r\n"),
        ("GET / HTTP/1.1\r\nhost: example.test:8080\r\n\r\n", "10.0.0.7:80", "GET http://example.test:8080/ HTTP/1.1\r\nhost: example.test:8080\r\n\r\n"),
        ("GET / HTTP/1.1\r\nHost: example.test\r\n\r\n", "10.0.0.7:8080", "GET http://example.test:8080/ HTTP/1.1\r\nHost: example.test\r\n\r\n"),
        ("GET / HTTP/1.0\r\n\r\n", "10.0.0.7:80", "GET http://10.0.0.7:80/ HTTP/1.0\r\n\r\n"),
        ("GET / HTTP/1.1\r\nHost: evil@x/y\r\n\r\n", "[fd00::7]:80", "GET http://[fd00::7]:80/ HTTP/1.1\r\nHost: evil@x/y\r\n\r\n"),
        ("GET http://other.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n", "10.0.0.7:80", "GET http://other.test/ HTTP/1.1\r\nHost: example.test\r\n\r\n"),
    ])
    func originFormBecomesTheURLTheHostNames(head: String, original: String, expected: String) {
        #expect(rewritten(head, original) == expected)
    }
}
