import Foundation
import PinPolicy
import Testing
import TestSupport
@testable import ProxyCore

/// The plain-HTTP exchange machine without a socket: each event moves it, and the action it
/// answers says what the forwarder must do; each way an exchange ends gives its exact outcome.
@Suite struct ExchangeMachineTests {
    static let pin = Pins.leafEC

    static func policy(plainHTTP: String = "forward", parent: String? = nil, pinned: String = "api.test") -> Policy {
        let yaml = """
            version: 1
            proxy:
              allowed_plain_ports: [80, 8080]
              plain_http: \(plainHTTP)
              deny_destinations: [link-local]
              dns: { nameservers: [], hosts_file: none }\(parent.map { "\n  upstream_proxy: \($0)" } ?? "")
            defaults: { unpinned: allow, require_backup: off }
            resolve:
              mapped.test: 127.0.0.5
              denied.test: 169.254.0.9
            rules:
              - host: \(pinned)
                pins: ["\(pin)"]
            """
        return try! PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil)
    }

    static let plain = policy()
    static let server = SocketAddress.parse("127.0.0.5:80")!
    static let get = "GET http://mapped.test/a HTTP/1.1\r\nHost: mapped.test\r\n\r\n"
    static let ok = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"
    let now = ContinuousClock.now

    func machine(ownAddress: String? = nil) -> ExchangeMachine {
        ExchangeMachine(client: IPAddress("127.0.0.1")!) { $0.description == ownAddress }
    }

    func bytes(_ text: String) -> [UInt8] { Array(text.utf8) }

    func text(_ bytes: [UInt8]) -> String { String(decoding: bytes, as: UTF8.self) }

    /// A machine whose request went out on a fresh connection to `server`.
    func sent(_ request: String = Self.get, policy: Policy = Self.plain) -> ExchangeMachine {
        var m = machine()
        _ = m.headRead(bytes(request), policy: policy, keptServerIdle: false, at: now)
        guard case .send = m.connected(to: Self.server, policy: policy, at: now) else { preconditionFailure("\(m.state)") }
        return m
    }

    /// A machine past the final response head `response` (the request had no body).
    func answered(_ response: String = Self.ok, request: String = Self.get) -> ExchangeMachine {
        var m = sent(request)
        _ = m.requestBodyMoved(BodyMeter(.none), bytes: 0, .moved)
        guard case .responseHead = m.responseHead(bytes(response), stopping: false) else { preconditionFailure("\(m.state)") }
        return m
    }

    func meter(_ length: BodyLength, consumed: Int) -> BodyMeter {
        var meter = BodyMeter(length)
        meter.consume(count: consumed)
        return meter
    }

    func expectFinish(_ action: ExchangeMachine.Action, _ outcome: PlainOutcome, then after: ExchangeMachine.After,
                      sourceLocation: SourceLocation = #_sourceLocation) -> PlainExchange? {
        guard case .finish(let got, let exchange, let gotAfter) = action else {
            Issue.record("expected finish, got \(action)", sourceLocation: sourceLocation)
            return nil
        }
        #expect(got == outcome && gotAfter == after, sourceLocation: sourceLocation)
        return exchange
    }

    func expectRefuse(_ action: ExchangeMachine.Action, reason: String, detail: String? = nil, withRequest: Bool = true,
                      sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .refuse(let refusal, let request) = action else {
            Issue.record("expected a refusal, got \(action)", sourceLocation: sourceLocation)
            return
        }
        #expect(refusal.reason == reason, sourceLocation: sourceLocation)
        if let detail { #expect(refusal.detail == detail, sourceLocation: sourceLocation) }
        #expect((request != nil) == withRequest, sourceLocation: sourceLocation)
    }

    // MARK: reaching the server

    @Test func aMappedNameConnectsWithoutALookup() {
        var m = machine()
        guard case .connect(let addresses, let perAddress, let total) = m.headRead(bytes(Self.get), policy: Self.plain, keptServerIdle: false, at: now) else {
            Issue.record("expected a connect"); return
        }
        #expect(addresses == [Self.server] && perAddress == Self.plain.proxy.connectTimeout && total == Self.plain.proxy.connectTimeout)
        guard case .connecting(let request) = m.state else { Issue.record("\(m.state)"); return }
        #expect(request.authority.description == "mapped.test:80" && m.hasRequestInFlight && !m.isBetweenRequests)
    }

    @Test func anUnmappedNameIsLookedUpThenEveryAddressTriedWithinTheTotal() {
        var m = machine()
        guard case .lookUp("other.test") = m.headRead(bytes("GET http://other.test/ HTTP/1.1\r\n\r\n"), policy: Self.plain, keptServerIdle: false, at: now) else {
            Issue.record("expected a lookup"); return
        }
        guard case .resolving = m.state else { Issue.record("\(m.state)"); return }
        guard case .connect(let addresses, _, let total) = m.resolved(.success([IPAddress("127.0.0.8")!, IPAddress("127.0.0.9")!]), policy: Self.plain) else {
            Issue.record("expected a connect"); return
        }
        #expect(addresses.map(\.description) == ["127.0.0.8:80", "127.0.0.9:80"] && total == Self.plain.proxy.connectTotalTimeout)
    }

    @Test func aFailedOrLateLookupRefusesTheRequest() {
        var failed = machine()
        _ = failed.headRead(bytes("GET http://other.test/ HTTP/1.1\r\n\r\n"), policy: Self.plain, keptServerIdle: false, at: now)
        expectRefuse(failed.resolved(.failure(.notFound("NXDOMAIN")), policy: Self.plain), reason: "dns_error")
        var late = machine()
        _ = late.headRead(bytes("GET http://other.test/ HTTP/1.1\r\n\r\n"), policy: Self.plain, keptServerIdle: false, at: now)
        expectRefuse(late.lookupTimedOut(), reason: "dns_timeout", detail: "the name did not resolve in time")
        guard case .over = late.state else { Issue.record("\(late.state)"); return }
    }

    @Test func anIPLiteralConnectsAndAParentProxyResolvesNames() {
        var literal = machine()
        guard case .connect(let direct, _, _) = literal.headRead(bytes("GET http://127.0.0.7:8080/ HTTP/1.1\r\n\r\n"), policy: Self.plain, keptServerIdle: false, at: now) else {
            Issue.record("expected a connect"); return
        }
        #expect(direct.map(\.description) == ["127.0.0.7:8080"])
        let parent = Self.policy(parent: "http://127.0.0.9:3128")
        var viaParent = machine()
        guard case .connect(let hop, _, _) = viaParent.headRead(bytes("GET http://other.test/ HTTP/1.1\r\n\r\n"), policy: parent, keptServerIdle: false, at: now) else {
            Issue.record("expected a connect to the parent"); return
        }
        #expect(hop.map(\.description) == ["127.0.0.9:3128"])
        guard case .send(let head) = viaParent.connected(to: hop[0], policy: parent, at: now) else { Issue.record("expected a send"); return }
        #expect(text(head).hasPrefix("GET http://other.test/ HTTP/1.1\r\n"))  // absolute form toward a parent
        #expect(viaParent.server == KeptServer(authority: try! Authority.parse("other.test:80").get(), address: hop[0], parent: parent.proxy.upstreamProxy))
    }

    @Test func refusalsBeforeAnyExchange() {
        var garbled = machine()
        expectRefuse(garbled.headRead(bytes("HELLO\r\n\r\n"), policy: Self.plain, keptServerIdle: false, at: now), reason: "bad_request", withRequest: false)
        var pinned = machine()
        expectRefuse(pinned.headRead(bytes("GET http://api.test/ HTTP/1.1\r\n\r\n"), policy: Self.plain, keptServerIdle: false, at: now),
                     reason: "plain_http_to_pinned_host")
        var refused = machine()
        expectRefuse(refused.headRead(bytes(Self.get), policy: Self.policy(plainHTTP: "refuse"), keptServerIdle: false, at: now),
                     reason: "plain_http_refused", detail: "proxy.plain_http is refuse: pinproxy forwards no plain-HTTP request")
        var denied = machine()
        expectRefuse(denied.headRead(bytes("GET http://denied.test/ HTTP/1.1\r\n\r\n"), policy: Self.plain, keptServerIdle: false, at: now),
                     reason: "destination_ip_prohibited")
        var loop = machine(ownAddress: "127.0.0.5:80")
        expectRefuse(loop.headRead(bytes(Self.get), policy: Self.plain, keptServerIdle: false, at: now), reason: "proxy_loop_detected")
        var large = machine()
        expectRefuse(large.headRejected(.tooLarge("the request head is over max_request_bytes (8 bytes)")), reason: "request_too_large", withRequest: false)
        for var m in [garbled, pinned, refused, denied, loop, large] {
            guard case .over = m.state else { Issue.record("\(m.state)"); continue }
            #expect(m.server == nil)
            guard case .none = m.clientLeft(.closed) else { Issue.record("the session has the connection back: nothing to do"); continue }
        }
    }

    @Test func aFailedConnectRefusesTheRequest() {
        var m = machine()
        _ = m.headRead(bytes(Self.get), policy: Self.plain, keptServerIdle: false, at: now)
        expectRefuse(m.connectFailed(.internalError("bufferevent_socket_new failed")), reason: "internal_error", detail: "bufferevent_socket_new failed")
    }

    // MARK: one exchange

    @Test func aConnectedRequestIsSentAndItsExchangeBegins() {
        let m = sent()
        guard case .exchanging(let exchange, _) = m.state else { Issue.record("\(m.state)"); return }
        #expect(exchange.address == Self.server && !exchange.reused && exchange.status == 0 && !exchange.responseStarted)
        #expect(m.server?.address == Self.server)
    }

    @Test func theRequestBodyPausesTheClientWhenDoneOrBlocked() {
        var m = sent("POST http://mapped.test/ HTTP/1.1\r\nContent-Length: 10\r\n\r\n")
        guard case .none = m.requestBodyMoved(meter(.length(10), consumed: 4), bytes: 4, .moved) else { Issue.record("more to come: keep reading"); return }
        guard case .pauseClient = m.requestBodyMoved(meter(.length(10), consumed: 6), bytes: 2, .blocked) else { Issue.record("expected a pause"); return }
        guard case .pauseClient = m.requestBodyMoved(meter(.length(10), consumed: 10), bytes: 4, .moved) else { Issue.record("done: a pipelined request waits"); return }
        guard case .exchanging(let exchange, _) = m.state else { Issue.record("\(m.state)"); return }
        #expect(exchange.bytesUp == 10 && exchange.requestBody.isDone)
    }

    @Test func aBrokenRequestBodyIsAnsweredBeforeTheResponse() {
        var m = sent("POST http://mapped.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        let exchange = expectFinish(m.requestBodyMoved(BodyMeter(.chunked), bytes: 0, .malformed("a chunk size is not hex")),
                                    .badRequestBody("a chunk size is not hex"), then: .answer(.badRequest("the request body: a chunk size is not hex")))
        #expect(exchange?.request.method == "POST" && m.server == nil)
        guard case .over = m.state else { Issue.record("\(m.state)"); return }
    }

    @Test func aCompleteExchangeKeepsBothConnectionsForTheNext() {
        var m = answered()
        guard case .exchanging(let during, _) = m.state else { Issue.record("\(m.state)"); return }
        #expect(during.status == 200 && during.responseStarted)
        guard case .none = m.responseBodyMoved(meter(.length(5), consumed: 2), bytes: 2, .moved, serverIdle: true, stopping: false) else {
            Issue.record("more to come"); return
        }
        guard case .pauseServer = m.responseBodyMoved(meter(.length(5), consumed: 2), bytes: 0, .blocked, serverIdle: true, stopping: false) else {
            Issue.record("expected a pause"); return
        }
        let done = expectFinish(m.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 3, .moved, serverIdle: true, stopping: false),
                                .complete, then: .awaitHead)
        #expect(done?.status == 200 && done?.bytesDown == 5 && done?.bytesUp == 0)
        #expect(m.isBetweenRequests && m.server?.address == Self.server)
        // The next request to the same host goes over the kept connection.
        guard case .send = m.headRead(bytes(Self.get), policy: Self.plain, keptServerIdle: true, at: now) else { Issue.record("expected a send"); return }
        guard case .exchanging(let next, _) = m.state else { Issue.record("\(m.state)"); return }
        #expect(next.reused)
    }

    @Test func aServerThatClosesOrSentMoreIsNotKept() {
        var closes = answered("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\n")
        _ = expectFinish(closes.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false),
                         .complete, then: .awaitHead)
        #expect(closes.isBetweenRequests && closes.server == nil)
        var old = answered("HTTP/1.0 200 OK\r\nContent-Length: 5\r\n\r\n")
        _ = old.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false)
        #expect(old.isBetweenRequests && old.server == nil)  // HTTP/1.0 without keep-alive closes
        var more = answered()
        _ = more.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: false, stopping: false)
        #expect(more.isBetweenRequests && more.server == nil)  // bytes after the response
    }

    @Test func aKeptConnectionWithUnreadBytesOrAnotherHostIsNotReused() {
        var m = answered()
        _ = m.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false)
        guard case .connect = m.headRead(bytes(Self.get), policy: Self.plain, keptServerIdle: false, at: now) else {
            Issue.record("bytes after the response: a fresh connection"); return
        }
        #expect(m.server == nil)
        var other = answered()
        _ = other.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false)
        guard case .connect = other.headRead(bytes("GET http://127.0.0.5:8080/ HTTP/1.1\r\n\r\n"), policy: Self.plain, keptServerIdle: true, at: now) else {
            Issue.record("another port: a fresh connection"); return
        }
    }

    @Test func aCompleteExchangeClosesWhenTheClientAsksOrPinproxyStopsOrBodiesAreOutOfStep() {
        var asked = answered(request: "GET http://mapped.test/ HTTP/1.1\r\nConnection: close\r\n\r\n")
        _ = expectFinish(asked.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false), .complete, then: .close)
        #expect(asked.isClosing && asked.server == nil)
        guard case .release = asked.clientDrained() else { Issue.record("expected release"); return }
        guard case .over = asked.state else { Issue.record("\(asked.state)"); return }
        var stopping = answered()
        _ = expectFinish(stopping.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: true), .complete, then: .close)
        // The response ended before the request body did: out of step, both connections go.
        var early = sent("POST http://mapped.test/ HTTP/1.1\r\nContent-Length: 10\r\n\r\n")
        _ = early.responseHead(bytes(Self.ok), stopping: false)
        let exchange = expectFinish(early.responseBodyMoved(meter(.length(5), consumed: 5), bytes: 5, .moved, serverIdle: true, stopping: false),
                                    .complete, then: .close)
        #expect(exchange?.closeClient == true && exchange?.serverReusable == false && early.server == nil)
    }

    // MARK: response heads

    @Test func theFinalHeadIsRewrittenForTheClient() {
        var m = sent()
        guard case .responseHead(let head) = m.responseHead(bytes("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nKeep-Alive: timeout=5\r\n\r\n"), stopping: false) else {
            Issue.record("expected a head"); return
        }
        #expect(text(head) == "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nVia: 1.1 pinproxy\r\nConnection: keep-alive\r\n\r\n")
        var stopping = sent()
        guard case .responseHead(let last) = stopping.responseHead(bytes(Self.ok), stopping: true) else { Issue.record("expected a head"); return }
        #expect(text(last).contains("Connection: close\r\n"))
    }

    @Test func interimResponsesPassToHTTP11ClientsOnlyAndAreBounded() {
        var m = sent()
        for _ in 0..<ResponseHead.maxInterimResponses {
            guard case .interim(let head?) = m.responseHead(bytes("HTTP/1.1 100 Continue\r\n\r\n"), stopping: false) else { Issue.record("expected an interim head"); return }
            #expect(text(head) == "HTTP/1.1 100 Continue\r\nVia: 1.1 pinproxy\r\n\r\n")
        }
        _ = expectFinish(m.responseHead(bytes("HTTP/1.1 100 Continue\r\n\r\n"), stopping: false),
                         .badResponse("the server sent more than 8 interim (1xx) responses"), then: .answer(.network(.badUpstreamResponse, "the server sent more than 8 interim (1xx) responses")))
        var old = sent("GET http://mapped.test/ HTTP/1.0\r\n\r\n")
        guard case .interim(nil) = old.responseHead(bytes("HTTP/1.1 100 Continue\r\n\r\n"), stopping: false) else { Issue.record("not to an HTTP/1.0 client"); return }
    }

    @Test func aChunkedResponseToAnHTTP10ClientIsDechunkedAndClosesIt() {
        var m = sent("GET http://mapped.test/ HTTP/1.0\r\n\r\n")
        guard case .responseHead(let head) = m.responseHead(bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), stopping: false) else {
            Issue.record("expected a head"); return
        }
        #expect(text(head) == "HTTP/1.0 200 OK\r\nVia: 1.1 pinproxy\r\nConnection: close\r\n\r\n")
        guard case .exchanging(let exchange, _) = m.state, case .body(200, _, true) = exchange.response else { Issue.record("\(m.state)"); return }
        var gzip = sent("GET http://mapped.test/ HTTP/1.0\r\n\r\n")
        let detail = "the response has a transfer coding other than chunked, which an HTTP/1.0 client cannot read"
        _ = expectFinish(gzip.responseHead(bytes("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"), stopping: false),
                         .badResponse(detail), then: .answer(.network(.badUpstreamResponse, detail)))
    }

    @Test func unusableResponseHeadsAreAnswered() {
        let cases: [(String, String)] = [
            ("SSH-2.0-OpenSSH\r\n\r\n", "the server's answer is not an HTTP/1.x response pinproxy forwards"),
            ("HTTP/1.1 101 Switching Protocols\r\n\r\n", "the server's answer is not an HTTP/1.x response pinproxy forwards"),
            ("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", ""),
        ]
        for (response, detail) in cases {
            var m = sent()
            guard case .finish(.badResponse(let got), _, .answer(let refusal)) = m.responseHead(bytes(response), stopping: false) else {
                Issue.record("expected bad_response for \(response)"); continue
            }
            if !detail.isEmpty { #expect(got == detail) } else { #expect(got.hasPrefix("the response: ")) }
            #expect(refusal.reason == "bad_upstream_response" && refusal.status == 502)
        }
        var long = sent()
        _ = expectFinish(long.responseHeadTooLong(), .badResponse("the response head is over 65536 bytes"),
                         then: .answer(.network(.badUpstreamResponse, "the response head is over 65536 bytes")))
    }

    @Test func aBrokenResponseBodyCutsTheResponse() {
        var m = answered("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
        _ = expectFinish(m.responseBodyMoved(BodyMeter(.chunked), bytes: 0, .malformed("a chunk size is not hex"), serverIdle: true, stopping: false),
                         .badResponse("the response body: a chunk size is not hex"), then: .close)
        #expect(m.isClosing && m.server == nil)
    }

    // How exchanges end, and each outcome's log line: ExchangeMachineTests+Ends.swift.
}
