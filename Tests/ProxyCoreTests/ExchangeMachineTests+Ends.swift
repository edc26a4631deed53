import Foundation
import PinPolicy
import Testing
import TestSupport
@testable import ProxyCore

// ExchangeMachineTests: how an exchange ends (the server's end or the client's, a body until close,
// a kept connection closed under a request, a reload, a shutdown) and the outcome each end logs. The
// policy, the machines at each stage and the expectations are in ExchangeMachineTests.swift.
extension ExchangeMachineTests {
    // MARK: ends

    @Test func aBodyUntilCloseEndsCompleteWhenTheServerCloses() {
        var m = answered("HTTP/1.1 200 OK\r\n\r\n")
        guard case .exchanging(let exchange, _) = m.state else { Issue.record("\(m.state)"); return }
        #expect(exchange.closeClient && !exchange.serverReusable)
        let done = expectFinish(m.serverEnded(.closed, serverIdle: true, policy: Self.plain, stopping: false), .complete, then: .close)
        #expect(done?.status == 200 && m.server == nil && m.isClosing)
    }

    @Test(arguments: [
        (ExchangeMachine.ServerEnd.timedOut, PlainOutcome.upstreamTimeout, "connection_timeout", "the server did not answer within idle_timeout"),
        (.closed, .upstreamClosed, "bad_upstream_response", "the server closed the connection before its response was complete"),
        (.reset, .upstreamReset, "bad_upstream_response", "the server reset the connection before its response was complete"),
        (.failed, .upstreamError, "bad_upstream_response", "the server reset the connection before its response was complete"),
    ])
    func aServerEndBeforeTheHeadIsAnswered(end: ExchangeMachine.ServerEnd, outcome: PlainOutcome, reason: String, detail: String) {
        var m = sent()
        guard case .finish(let got, _, .answer(let refusal)) = m.serverEnded(end, serverIdle: true, policy: Self.plain, stopping: false) else {
            Issue.record("expected an answered finish"); return
        }
        #expect(got == outcome && refusal.reason == reason && refusal.detail == detail)
        var cut = answered()
        _ = expectFinish(cut.serverEnded(end, serverIdle: true, policy: Self.plain, stopping: false), outcome, then: .close)
    }

    @Test func aKeptConnectionClosedUnderARequestSendsItAgainOnce() {
        var m = answered()
        _ = m.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false)
        _ = m.headRead(bytes(Self.get), policy: Self.plain, keptServerIdle: true, at: now)
        guard case .connect(let addresses, _, _) = m.serverEnded(.closed, serverIdle: true, policy: Self.plain, stopping: false) else {
            Issue.record("expected a fresh connect"); return
        }
        #expect(addresses == [Self.server] && m.server == nil)
        guard case .send = m.connected(to: Self.server, policy: Self.plain, at: now), case .exchanging(let again, _) = m.state else { Issue.record("\(m.state)"); return }
        #expect(!again.reused)  // a second close is an ordinary upstream_closed
    }

    @Test func aRequestSentAgainIsAdmittedAgain() {
        var m = answered()
        _ = m.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false)
        _ = m.headRead(bytes(Self.get), policy: Self.plain, keptServerIdle: true, at: now)
        let pinned = Self.policy(pinned: "mapped.test")
        guard case .finish(.policyReload(let refusal), _, .answer(let answer)) = m.serverEnded(.closed, serverIdle: true, policy: pinned, stopping: false) else {
            Issue.record("expected policy_reload"); return
        }
        #expect(refusal == answer && refusal.reason == "plain_http_to_pinned_host")
    }

    @Test func aReloadEndsAnExchangeOrAKeptConnectionItNoLongerAllows() {
        let pinned = Self.policy(pinned: "mapped.test")
        var before = sent()
        guard case .finish(.policyReload(let refusal), _, .answer) = before.policyChanged(to: pinned) else { Issue.record("expected an answer"); return }
        #expect(refusal.reason == "plain_http_to_pinned_host")
        var during = answered()
        guard case .finish(.policyReload, _, .close) = during.policyChanged(to: pinned) else { Issue.record("expected a cut response"); return }
        var kept = answered()
        _ = kept.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false)
        guard case .none = kept.policyChanged(to: Self.plain) else { Issue.record("still allowed"); return }
        #expect(kept.server != nil)
        guard case .none = kept.policyChanged(to: Self.policy(parent: "http://127.0.0.9:3128")) else { Issue.record("a kept connection just goes"); return }
        #expect(kept.server == nil && kept.isBetweenRequests)
    }

    @Test(arguments: [
        (ExchangeMachine.ClientEnd.idle, PlainOutcome.idleTimeout), (.closed, .clientClosed), (.failed, .clientError),
    ])
    func aClientThatLeavesEndsWhatIsInFlight(end: ExchangeMachine.ClientEnd, outcome: PlainOutcome) {
        var exchanging = sent()
        _ = expectFinish(exchanging.clientLeft(end), outcome, then: .release)
        #expect(exchanging.server == nil)
        var resolving = machine()
        _ = resolving.headRead(bytes("GET http://other.test/ HTTP/1.1\r\n\r\n"), policy: Self.plain, keptServerIdle: false, at: now)
        guard case .release = resolving.clientLeft(end) else { Issue.record("nothing to log: release"); return }
        var idle = machine()
        guard case .release = idle.clientLeft(end), case .over = idle.state else { Issue.record("expected release"); return }
    }

    @Test func aShutdownLogsTheExchangeInFlightAndHandsTheConnectionBack() {
        var m = sent()
        _ = expectFinish(m.cancel(), .shutdown, then: .handBack)
        var idle = machine()
        guard case .none = idle.cancel(), case .over = idle.state else { Issue.record("nothing in flight"); return }
    }

    @Test func aKeptConnectionThatTricklesItsNextHeadIsClosed() {
        var m = answered()
        _ = m.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false)
        guard case .close = m.headTimedOut() else { Issue.record("expected close"); return }
        #expect(m.isClosing && m.server == nil)
    }

    @Test func aServerThatClosesBetweenRequestsIsLetGo() {
        var m = answered()
        _ = m.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false)
        guard case .none = m.serverLeft() else { Issue.record("expected nothing"); return }
        #expect(m.server == nil && m.isBetweenRequests)
    }

    // MARK: outcomes

    @Test func everyOutcomeHasItsLogCodeLevelAndAnswer() {
        let table: [(PlainOutcome, String, info: Bool, String?)] = [
            (.complete, "complete", true, nil),
            (.shutdown, "shutdown", false, nil),
            (.policyReload(.policy(.destinationProhibited, detail: "a reload denied 127.0.0.5")), "policy_reload", false, "destination_ip_prohibited"),
            (.badRequestBody("x"), "bad_request_body", false, "bad_request"),
            (.badResponse("x"), "bad_response", false, "bad_upstream_response"),
            (.upstreamTimeout, "upstream_timeout", false, "connection_timeout"),
            (.upstreamClosed, "upstream_closed", false, "bad_upstream_response"),
            (.upstreamReset, "upstream_reset", false, "bad_upstream_response"),
            (.upstreamError, "upstream_error", false, "bad_upstream_response"),
            (.idleTimeout, "idle_timeout", false, nil),
            (.clientClosed, "client_closed", false, nil),
            (.clientError, "client_error", false, nil),
        ]
        for (outcome, code, info, reason) in table {
            #expect(outcome.code.rawValue == code && outcome.code.level == (info ? .info : .warning) && outcome.refusal?.reason == reason, "\(outcome)")
        }
    }

    @Test func theForwardedLineKeepsItsKeysAndBytes() {
        var m = answered()
        guard case .finish(let outcome, let exchange, _) = m.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false) else {
            Issue.record("expected finish"); return
        }
        let line = PlainLog.forwarded(exchange, outcome: outcome, conn: 3, client: SocketAddress.parse("127.0.0.1:4000")!, duration: .milliseconds(12))
        #expect(line.event == "http_forwarded" && line.level == .info)
        #expect(line.fields.map(\.0) == ["conn", "client", "method", "host", "port", "address", "status", "bytes_up", "bytes_down", "duration_ms", "outcome"])
        guard case .int(200)? = line["status"], case .int(5)? = line["bytes_down"], case .int(12)? = line["duration_ms"],
              case .string("complete")? = line["outcome"] else { Issue.record("\(line.fields)"); return }
    }
}
