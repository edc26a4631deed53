import Foundation
import PinPolicy
import Testing
@testable import ProxyCore

/// What the connector says when every address failed, and the parent proxy's answers it reads, as
/// tables: no socket (the end-to-end tests dial real ones).
@Suite struct ConnectorTests {
    static let a = SocketAddress(ip: IPAddress("192.0.2.1")!, port: 443)
    static let b = SocketAddress(ip: IPAddress("2001:db8::1")!, port: 443)

    struct FailureCase: CustomTestStringConvertible, Sendable {
        let name: String
        let failures: [Connector.Failure]
        let reason: String
        let nothingListens: Bool
        let detail: String
        var testDescription: String { name }
    }

    static let failureCases: [FailureCase] = [
        FailureCase(name: "no address", failures: [], reason: "connection_refused", nothingListens: false, detail: "no address to connect to"),
        FailureCase(name: "one timed out", failures: [.timedOut], reason: "connection_timeout", nothingListens: false,
                    detail: "192.0.2.1:443: no answer within the connect timeout"),
        FailureCase(name: "both timed out", failures: [.timedOut, .timedOut], reason: "connection_timeout", nothingListens: false,
                    detail: "192.0.2.1:443: no answer within the connect timeout; [2001:db8::1]:443: no answer within the connect timeout"),
        FailureCase(name: "nothing listens", failures: [.refused(errno: ECONNREFUSED)], reason: "connection_refused", nothingListens: true,
                    detail: "192.0.2.1:443: \(errnoText(ECONNREFUSED))"),
        FailureCase(name: "nothing listens on either", failures: [.refused(errno: ECONNREFUSED), .refused(errno: ECONNREFUSED)],
                    reason: "connection_refused", nothingListens: true,
                    detail: "192.0.2.1:443: \(errnoText(ECONNREFUSED)); [2001:db8::1]:443: \(errnoText(ECONNREFUSED))"),
        FailureCase(name: "refused, then timed out", failures: [.refused(errno: ECONNREFUSED), .timedOut], reason: "connection_refused",
                    nothingListens: false, detail: "192.0.2.1:443: \(errnoText(ECONNREFUSED)); [2001:db8::1]:443: no answer within the connect timeout"),
        FailureCase(name: "a network unreachable", failures: [.refused(errno: ENETUNREACH)], reason: "connection_refused", nothingListens: false,
                    detail: "192.0.2.1:443: \(errnoText(ENETUNREACH))"),
    ]

    @Test(arguments: failureCases)
    func everyAddressFailing(_ c: FailureCase) {
        let refusal = Connector.refusal(after: zip([Self.a, Self.b], c.failures).map { (address: $0, failure: $1) })
        #expect(refusal.reason == c.reason)
        #expect(refusal.nothingListens == c.nothingListens)
        #expect(refusal.detail == c.detail)
    }

    @Test func noAddressFailsAtOnceWithoutASocket() {
        var outcome: Connector.Outcome?
        let connector = Connector(loop: EventLoop(), addresses: [], perAddress: 1, total: 1) { outcome = $0 }
        withExtendedLifetime(connector) {}
        guard case .failed(let refusal)? = outcome else { Issue.record("no failure: \(String(describing: outcome))"); return }
        #expect(refusal.reason == "connection_refused" && refusal.detail == "no address to connect to")
    }

    struct AnswerCase: CustomTestStringConvertible, Sendable {
        let head: String
        let answer: ParentHop.Answer
        var testDescription: String { head.debugDescription }
    }

    static let answers: [AnswerCase] = [
        AnswerCase(head: "HTTP/1.1 200 Connection established\r\n\r\n", answer: .established),
        AnswerCase(head: "HTTP/1.0 200 OK\r\nProxy-Agent: x\r\n\r\n", answer: .established),
        AnswerCase(head: "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n", answer: .refused(status: 407, phrase: "Proxy Authentication Required")),
        AnswerCase(head: "HTTP/1.1 403 Forbidden\r\n\r\n", answer: .refused(status: 403, phrase: "Forbidden")),
        AnswerCase(head: "HTTP/1.1 502\r\n\r\n", answer: .refused(status: 502, phrase: "")),
        AnswerCase(head: "HTTP/1.1 100 Continue\r\n\r\n", answer: .malformed(notHTTP)),
        AnswerCase(head: "SSH-2.0-OpenSSH\r\n\r\n", answer: .malformed(notHTTP)),
        AnswerCase(head: "HTTP/2 200\r\n\r\n", answer: .malformed(notHTTP)),
    ]
    static let notHTTP = "its answer does not start with an HTTP/1.x status line"

    @Test(arguments: answers)
    func theParentsAnswer(_ c: AnswerCase) {
        #expect(ParentHop.parse(answer: Array(c.head.utf8)) == c.answer)
    }
}
