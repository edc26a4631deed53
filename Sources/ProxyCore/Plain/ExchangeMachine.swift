import Foundation
import PinPolicy

/// The plain-HTTP exchanges of one client connection as values: the stage it is in and what it
/// knows there. Each event is a method that moves it and returns what the forwarder must do; an
/// event that cannot happen in the current stage is a programming error and traps. No sockets and
/// no libevent: tests drive it without either (`ExchangeMachineTests`).
///
/// awaitingHead → (resolving →) connecting → exchanging → awaitingHead again on a kept-alive
/// connection (or straight to exchanging over the kept server connection), with `closing` (the
/// client is owed the rest of a response) and `over` reachable from every stage before it.
struct ExchangeMachine {
    enum State {
        /// Waiting for a request head, with nothing in flight; `kept`: the server connection kept
        /// from the last exchange, for a next request to the same host and port.
        case awaitingHead(kept: KeptServer?)
        /// Admitted; its server's name is being looked up.
        case resolving(PlainRequest)
        case connecting(PlainRequest)
        /// The request went out on this server connection; its body and its response are moving.
        case exchanging(PlainExchange, on: KeptServer)
        /// Flushing what the client is still owed, then the end.
        case closing
        case over
    }

    /// What the forwarder does once an exchange's line is logged.
    enum After: Equatable {
        /// Answer the client with this refusal (no response head reached it) and end.
        case answer(Refusal)
        /// Flush what the client is owed, then end.
        case close
        /// The client is gone: end now.
        case release
        /// Wait for the next request on this connection (`header_timeout` applies again).
        case awaitHead
        /// The session takes the connection back (a shutdown): nothing more.
        case handBack
    }

    enum Action {
        case none
        /// Refuse this request (nil: its head did not parse): log `request_rejected`, answer, end.
        case refuse(Refusal, PlainRequest?)
        /// Look this name up (the answer is `resolved`, the deadline `lookupTimedOut`).
        case lookUp(String)
        /// Connect to the first of these that accepts (`connected` or `connectFailed`).
        case connect([SocketAddress], perAddress: Double, total: Double)
        /// Send this request head to the server, then move the request body.
        case send([UInt8])
        /// Stop reading the client: its output toward the server is full, or the body is through.
        case pauseClient
        /// Stop reading the server until the client drains.
        case pauseServer
        /// Pass this 1xx response on (nil: not to an HTTP/1.0 client), then read on.
        case interim([UInt8]?)
        /// Pass this final response head on, then move the response body.
        case responseHead([UInt8])
        /// The exchange is over: count it, log its `http_forwarded` line, then `After`.
        case finish(PlainOutcome, PlainExchange, then: After)
        /// Flush what the client is owed (`clientDrained`), then end.
        case close
        /// End now (nothing was in flight).
        case release
    }

    /// What one move of body bytes found.
    enum Moved: Equatable { case moved, blocked, malformed(String) }

    /// How the server connection ended, as its bufferevent said.
    enum ServerEnd {
        case closed, timedOut, reset, failed

        var outcome: PlainOutcome {
            switch self {
            case .closed: return .upstreamClosed
            case .timedOut: return .upstreamTimeout
            case .reset: return .upstreamReset
            case .failed: return .upstreamError
            }
        }
    }

    /// How the client left.
    enum ClientEnd {
        case idle, closed, failed

        var outcome: PlainOutcome {
            switch self {
            case .idle: return .idleTimeout
            case .closed: return .clientClosed
            case .failed: return .clientError
            }
        }
    }

    /// The largest response head pinproxy reads from a server.
    static let maxResponseHead = 64 * 1024
    /// Methods sent again, once, when a kept connection turns out closed (RFC 9110 §9.2.2).
    static let retriable: Set<String> = ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"]

    let client: IPAddress
    /// Whether an address is one pinproxy itself listens on (a request there is a loop).
    private let isOwnAddress: (SocketAddress) -> Bool
    private(set) var state = State.awaitingHead(kept: nil)

    /// The server connection in use or kept for the next request (nil: none; the forwarder lets
    /// its socket go when this goes).
    var server: KeptServer? {
        switch state {
        case .awaitingHead(let kept): return kept
        case .exchanging(_, let server): return server
        case .resolving, .connecting, .closing, .over: return nil
        }
    }

    init(client: IPAddress, isOwnAddress: @escaping (SocketAddress) -> Bool) {
        self.client = client
        self.isOwnAddress = isOwnAddress
    }

    /// Waiting for the next request on a kept-alive connection, with nothing in flight.
    var isBetweenRequests: Bool {
        if case .awaitingHead = state { return true }
        return false
    }

    /// A request is admitted and not yet answered: the client's socket is watched for a hang-up.
    var hasRequestInFlight: Bool {
        switch state {
        case .resolving, .connecting, .exchanging: return true
        case .awaitingHead, .closing, .over: return false
        }
    }

    var isExchanging: Bool {
        if case .exchanging = state { return true }
        return false
    }

    var isClosing: Bool {
        if case .closing = state { return true }
        return false
    }

    // MARK: requests

    /// A request head arrived (the session read the first, the forwarder those after it). `keptServerIdle`:
    /// the kept server connection has no unread bytes.
    mutating func headRead(_ bytes: [UInt8], policy: Policy, keptServerIdle: Bool, at now: ContinuousClock.Instant) -> Action {
        guard case .awaitingHead(let kept) = state else { preconditionFailure("request head in \(state)") }
        let request: PlainRequest
        switch PlainRequest.parse(head: bytes) {
        case .success(let parsed): request = parsed
        case .failure(let problem): return refuse(problem.refusal, nil)
        }
        // The gate refuses first when proxy.plain_http is refuse.
        if let refusal = AdmissionGate.admit(request.authority, client: client, policy: policy, kind: .plain).refusal {
            return refuse(refusal, request)
        }
        if case .failure(let problem) = request.upstreamHead(viaParent: policy.proxy.upstreamProxy) { return refuse(problem.refusal, request) }
        if let kept, kept.fits(request.authority, idle: keptServerIdle, under: policy) {
            return begin(request, on: kept, reused: true, policy: policy, at: now)
        }
        return reach(request, policy: policy)
    }

    /// The head never ended within `max_request_bytes`.
    mutating func headRejected(_ refusal: Refusal) -> Action {
        guard case .awaitingHead = state else { preconditionFailure("head rejected in \(state)") }
        return refuse(refusal, nil)
    }

    /// `header_timeout` passed on a kept-alive connection with no next head: close it.
    mutating func headTimedOut() -> Action {
        guard case .awaitingHead = state else { preconditionFailure("head timeout in \(state)") }
        return close()
    }

    mutating func resolved(_ result: Result<[IPAddress], Resolver.Failure>, policy: Policy) -> Action {
        guard case .resolving(let request) = state, case .name(let name) = request.authority.target else {
            preconditionFailure("resolved in \(state)")
        }
        switch result {
        case .success(let addresses): return addressesKnown(request, addresses, policy: policy)
        case .failure(let failure): return refuse(.dnsError(failure.detail(resolving: name)), request)
        }
    }

    mutating func lookupTimedOut() -> Action {
        guard case .resolving(let request) = state else { preconditionFailure("lookup timeout in \(state)") }
        return refuse(.dnsTimeout, request)
    }

    /// A connection to `address` is open (through the parent, if the policy names one).
    mutating func connected(to address: SocketAddress, policy: Policy, at now: ContinuousClock.Instant) -> Action {
        guard case .connecting(let request) = state else { preconditionFailure("connected in \(state)") }
        let server = KeptServer(authority: request.authority, address: address, parent: policy.proxy.upstreamProxy)
        return begin(request, on: server, reused: false, policy: policy, at: now)
    }

    mutating func connectFailed(_ refusal: Refusal) -> Action {
        guard case .connecting(let request) = state else { preconditionFailure("connect failed in \(state)") }
        return refuse(refusal, request)
    }

    /// Resolves (or asks the parent) and connects: a fresh server connection for this request.
    private mutating func reach(_ request: PlainRequest, policy: Policy) -> Action {
        if let parent = policy.proxy.upstreamProxy {
            // The parent resolves the name (deny_destinations applies to IP-literal targets only, as for CONNECT).
            return connect(request, to: [parent.address], policy: policy)
        }
        switch request.authority.target {
        case .ip(let ip):
            return addressesKnown(request, [ip], policy: policy)
        case .name(let name):
            if let mapped = policy.resolve[name] { return addressesKnown(request, mapped, policy: policy) }
            state = .resolving(request)
            return .lookUp(name)
        }
    }

    private mutating func addressesKnown(_ request: PlainRequest, _ all: [IPAddress], policy: Policy) -> Action {
        switch DestinationFilter(deny: policy.proxy.denyDestinations, isOwnAddress: isOwnAddress).filter(all, for: request.authority) {
        case .reach(let allowed): return connect(request, to: allowed.map { SocketAddress(ip: $0, port: request.authority.port) }, policy: policy)
        case .refused(let cause): return refuse(cause.refusal, request)
        }
    }

    private mutating func connect(_ request: PlainRequest, to addresses: [SocketAddress], policy: Policy) -> Action {
        let settings = policy.proxy
        state = .connecting(request)
        return .connect(addresses, perAddress: settings.connectTimeout,
                        total: addresses.count == 1 ? settings.connectTimeout : settings.connectTotalTimeout)
    }

    private mutating func begin(_ request: PlainRequest, on server: KeptServer, reused: Bool, policy: Policy,
                                at now: ContinuousClock.Instant) -> Action {
        switch request.upstreamHead(viaParent: policy.proxy.upstreamProxy) {
        case .failure(let problem):
            return refuse(problem.refusal, request)  // a reload set a parent with credentials meanwhile
        case .success(let head):
            state = .exchanging(PlainExchange(request: request, address: server.address, reused: reused, at: now), on: server)
            return .send(head.bytes)
        }
    }

    private mutating func refuse(_ refusal: Refusal, _ request: PlainRequest?) -> Action {
        state = .over
        return .refuse(refusal, request)
    }

    // MARK: bodies and the response

    /// Request body bytes moved toward the server: `meter` as it now stands, `bytes` passed on.
    mutating func requestBodyMoved(_ meter: BodyMeter, bytes: Int, _ moved: Moved) -> Action {
        guard case .exchanging(var exchange, let server) = state else { preconditionFailure("request body in \(state)") }
        exchange.requestBody = meter
        exchange.bytesUp += bytes
        state = .exchanging(exchange, on: server)
        switch moved {
        case .moved: return meter.isDone ? .pauseClient : .none  // a pipelined request waits for its turn
        case .blocked: return .pauseClient
        case .malformed(let why): return abort(exchange, .badRequestBody(why))
        }
    }

    /// More than `maxResponseHead` bytes came without the end of a head.
    mutating func responseHeadTooLong() -> Action {
        guard case .exchanging(let exchange, _) = state, !exchange.responseStarted else { preconditionFailure("head too long in \(state)") }
        return abort(exchange, .badResponse("the response head is over \(Self.maxResponseHead) bytes"))
    }

    /// A whole response head from the server. `stopping`: a shutdown is under way, so this is the
    /// connection's last exchange.
    mutating func responseHead(_ raw: [UInt8], stopping: Bool) -> Action {
        guard case .exchanging(var exchange, let server) = state, case .awaitingHead(let interim) = exchange.response else {
            preconditionFailure("response head in \(state)")
        }
        switch ResponseHead.read(raw, for: exchange.request, interimSeen: interim, clientCloses: exchange.closeClient, stopping: stopping) {
        case .unusable(let detail):
            return abort(exchange, .badResponse(detail))
        case .interim(let bytes):
            exchange.response = .awaitingHead(interim: interim + 1)
            state = .exchanging(exchange, on: server)
            return .interim(bytes)
        case .final(let head):
            exchange.closeClient = head.closesClient
            if head.serverCloses || head.body == .untilClose { exchange.serverReusable = false }
            exchange.response = .body(status: head.status, meter: BodyMeter(head.body), dechunk: head.dechunk)
            state = .exchanging(exchange, on: server)
            return .responseHead(head.bytes)
        }
    }

    /// Response body bytes moved toward the client. `serverIdle`: the server sent nothing past
    /// them (bytes after a response would be read as the next one's).
    mutating func responseBodyMoved(_ meter: BodyMeter, bytes: Int, _ moved: Moved, serverIdle: Bool, stopping: Bool) -> Action {
        guard case .exchanging(var exchange, let server) = state, case .body(let status, _, let dechunk) = exchange.response else {
            preconditionFailure("response body in \(state)")
        }
        exchange.response = .body(status: status, meter: meter, dechunk: dechunk)
        exchange.bytesDown += bytes
        state = .exchanging(exchange, on: server)
        switch moved {
        case .moved: return meter.isDone ? complete(exchange, serverIdle: serverIdle, stopping: stopping) : .none
        case .blocked: return .pauseServer
        case .malformed(let why): return abort(exchange, .badResponse("the response body: \(why)"))
        }
    }

    // MARK: ends

    /// The server connection ended during an exchange (what it sent before is already moved).
    mutating func serverEnded(_ end: ServerEnd, serverIdle: Bool, policy: Policy, stopping: Bool) -> Action {
        guard case .exchanging(var exchange, _) = state else { preconditionFailure("server ended in \(state)") }
        // A kept connection the server closed just as the request went out (the keep-alive race):
        // an idempotent request of which no body byte was sent and no answer came goes again, once,
        // on a fresh connection, admitted again under the policy in force now.
        if exchange.reused, !exchange.responseStarted, exchange.bytesUp == 0, serverIdle, Self.retriable.contains(exchange.request.method) {
            if let refusal = AdmissionGate.admit(exchange.request.authority, client: client, policy: policy, kind: .plain).refusal {
                state = .over
                return .finish(.policyReload(refusal), exchange, then: .answer(refusal))
            }
            return reach(exchange.request, policy: policy)
        }
        if end == .closed, case .body(let status, let meter, let dechunk) = exchange.response, meter.state == .untilClose {
            exchange.response = .body(status: status, meter: BodyMeter(.none), dechunk: dechunk)
            exchange.serverReusable = false
            return complete(exchange, serverIdle: serverIdle, stopping: stopping)
        }
        return abort(exchange, end.outcome)
    }

    /// A kept server connection closed, or sent bytes, between requests: it is not used again.
    mutating func serverLeft() -> Action {
        guard !isExchanging else { preconditionFailure("server left mid-exchange") }
        if case .awaitingHead = state { state = .awaitingHead(kept: nil) }
        return .none
    }

    /// A reload: an exchange in flight, or a kept server connection, that the new policy would not
    /// allow ends now (a host just pinned is not fetched in cleartext to the end of a long transfer).
    mutating func policyChanged(to policy: Policy) -> Action {
        guard let server else { return .none }
        let refusal = AdmissionGate.admit(server.authority, client: client, policy: policy, kind: .plain).refusal
            ?? (server.isAllowed(under: policy) ? nil : .policy(.destinationProhibited, detail: "a reload denied \(server.address.ip)"))
        guard let refusal else { return .none }
        if case .exchanging(let exchange, _) = state { return abort(exchange, .policyReload(refusal)) }
        state = .awaitingHead(kept: nil)  // the only other stage with a server
        return .none
    }

    /// The client is gone (or timed out): whatever is in flight ends, and everything is let go.
    mutating func clientLeft(_ end: ClientEnd) -> Action {
        let was = state
        if case .over = was { return .none }  // the session has the connection back
        state = .over
        if case .exchanging(let exchange, _) = was { return .finish(end.outcome, exchange, then: .release) }
        return .release
    }

    /// The client's output drained while closing.
    mutating func clientDrained() -> Action {
        guard case .closing = state else { preconditionFailure("drained in \(state)") }
        state = .over
        return .release
    }

    /// pinproxy is stopping: the session takes the connection back (only a shutdown leaves mid-exchange).
    mutating func cancel() -> Action {
        let was = state
        state = .over
        if case .exchanging(let exchange, _) = was { return .finish(.shutdown, exchange, then: .handBack) }
        return .none
    }

    /// Both bodies are through: wait for the next request, or close.
    private mutating func complete(_ exchange: PlainExchange, serverIdle: Bool, stopping: Bool) -> Action {
        var exchange = exchange
        // A response that ended before its request body did leaves the connection out of step.
        if !exchange.requestBody.isDone {
            exchange.closeClient = true
            exchange.serverReusable = false
        }
        if !serverIdle { exchange.serverReusable = false }
        if exchange.closeClient || stopping {
            _ = close()
            return .finish(.complete, exchange, then: .close)
        }
        state = .awaitingHead(kept: exchange.serverReusable ? server : nil)
        return .finish(.complete, exchange, then: .awaitHead)
    }

    /// The exchange cannot go on. Before the response head the client is answered with the refusal;
    /// after it, the connection closes once what it is owed is flushed (it sees a cut body).
    private mutating func abort(_ exchange: PlainExchange, _ outcome: PlainOutcome) -> Action {
        if !exchange.responseStarted, let refusal = outcome.refusal {
            state = .over
            return .finish(outcome, exchange, then: .answer(refusal))
        }
        _ = close()
        return .finish(outcome, exchange, then: .close)
    }

    private mutating func close() -> Action {
        state = .closing
        return .close
    }
}
