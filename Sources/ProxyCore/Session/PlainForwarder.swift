import CLibevent
import Foundation
import PinPolicy

/// Forwards plain-HTTP requests on one client connection, one exchange at a time, like an HTTP/1.1
/// proxy: each request is admitted under the policy in force when it arrives (a host a rule pins is
/// never reached), its body streamed to the server and the response streamed back, with at most
/// `highWater` bytes queued per direction (reading the other side stops until they drain), so a
/// body of any size costs bounded memory. The connection to a server is kept for the next request
/// to the same host and port.
///
/// The session owns the client bufferevent; the forwarder routes its callbacks while it runs and
/// tells the session, through `onEnd`, when the connection is over or must be answered with a refusal.
/// Bound to its proxy's loop thread.
final class PlainForwarder {
    enum End {
        /// The client is done (or the connection broke): release it.
        case finished
        /// Answer this refusal and close (already logged).
        case refused(Refusal)
    }

    /// Bytes queued toward one side before reading from the other stops.
    static let highWater = 256 * 1024
    /// The largest response head pinproxy reads from a server.
    static let maxResponseHead = 64 * 1024

    private struct Server {
        let side: BufferEvent
        let authority: Authority
        let address: SocketAddress
        /// The parent proxy it goes through (nil: the server itself).
        let parent: UpstreamProxy?

        /// Whether this policy still allows the connection: a reload may have denied its address or
        /// changed the parent since it was opened.
        func isAllowed(under policy: Policy) -> Bool {
            guard parent == policy.proxy.upstreamProxy else { return false }
            return parent != nil || !policy.proxy.denyDestinations.containsAnyForm(of: address.ip)
        }

        /// Whether the next request to `authority` may use it: allowed, and idle — bytes the server
        /// sent after its last response would be read as the next answer.
        func fits(_ authority: Authority, under policy: Policy) -> Bool {
            authority == self.authority && evbuffer_get_length(side.input) == 0 && isAllowed(under: policy)
        }
    }

    /// One request and its response in flight.
    private struct Exchange {
        let request: PlainRequest
        let address: SocketAddress
        let startedAt = ContinuousClock.now
        var requestBody: BodyMeter
        var responseBody: BodyMeter?
        var status = 0
        /// 1xx responses seen before the final one (bounded: a server cannot send them forever).
        var interim = 0
        var bytesUp = 0
        var bytesDown = 0
        /// The client connection ends after this exchange.
        var closeClient: Bool
        /// The server connection can carry the next request.
        var serverReusable = true
        /// Sent on a connection kept from an earlier exchange (which the server may have closed meanwhile).
        let reused: Bool
    }

    private enum Stage {
        case awaitingHead
        case resolving(PlainRequest, ResolveRequest, deadline: Timer)
        case connecting(PlainRequest, Connector)
        case exchanging(Exchange)
        /// Flushing what the client is still owed, then the end.
        case closing
        case over
    }

    private let worker: Worker
    private let conn: Int
    private let clientAddress: SocketAddress
    private let client: BufferEvent
    private let onEnd: (End) -> Void
    private var stage = Stage.awaitingHead
    private var server: Server?
    /// `header_timeout` for the next request on a kept-alive connection: a client that trickles a
    /// head byte by byte is closed as the first request's would be.
    private var headTimer: Timer?
    /// 1xx responses forwarded before a final one, at most.
    static let maxInterimResponses = 8

    init(worker: Worker, conn: Int, client clientAddress: SocketAddress, side: BufferEvent, onEnd: @escaping (End) -> Void) {
        self.worker = worker
        self.conn = conn
        self.clientAddress = clientAddress
        self.client = side
        self.onEnd = onEnd
        let idle = worker.snapshot.policy.proxy.idleTimeout
        var timeout = timeval(tv_sec: Int(idle), tv_usec: Int((idle - idle.rounded(.down)) * 1_000_000))
        bufferevent_set_timeouts(side.ref, &timeout, &timeout)
        // Enough for the largest head `max_request_bytes` allows; a body waits in at most this much.
        side.setWatermark(EV_READ, low: 0, high: max(64 * 1024, worker.snapshot.policy.proxy.maxRequestBytes + 1024))
        side.setWatermark(EV_WRITE, low: Self.highWater / 4, high: 0)
        Self.widen(side)
        side.route(to: self, read: plainClientReadCB, write: plainClientWriteCB, event: plainClientEventCB)
        side.enable(EV_READ | EV_WRITE)
    }

    /// Waiting for the next request on a kept-alive connection, with nothing in flight.
    var isBetweenRequests: Bool {
        if case .awaitingHead = stage { return true }
        return false
    }

    /// libevent reads and writes at most 16 KiB per callback by default: a GiB body would take
    /// 65,536 turns of the loop each way. 64 KiB (within the 256 KiB bound) cuts that fourfold.
    private static func widen(_ side: BufferEvent) {
        bufferevent_set_max_single_read(side.ref, 64 * 1024)
        bufferevent_set_max_single_write(side.ref, 64 * 1024)
    }

    /// Stops without calling back: the session is leaving this stage. Hands the client side back untouched.
    func cancel() {
        if case .exchanging(let exchange) = stage { log(exchange, outcome: "shutdown") }  // only a shutdown leaves mid-exchange
        cancelPending()
        stage = .over
        server = nil
        bufferevent_set_timeouts(client.ref, nil, nil)
        client.setWatermark(EV_WRITE, low: 0, high: 0)
    }

    /// Cancels what the stage waits for (a lookup, a connect, the next head): nothing may call back
    /// into a forwarder that has ended.
    private func cancelPending() {
        switch stage {
        case .resolving(_, let request, _): request.cancel()
        case .connecting(_, let connector): connector.cancel()
        default: break
        }
        headTimer = nil
    }

    /// A reload: an exchange in flight, or a kept server connection, that the new policy would not
    /// allow ends now (a host just pinned is not fetched in cleartext to the end of a long transfer).
    func policyChanged(to policy: Policy) {
        guard let server else { return }
        let refusal = AdmissionGate.admit(server.authority, client: clientAddress.ip, policy: policy, kind: .plain).refusal
            ?? (server.isAllowed(under: policy) ? nil : .policy(.destinationProhibited, detail: "a reload denied \(server.address.ip)"))
        guard let refusal else { return }
        if case .exchanging(let exchange) = stage { return abort(exchange, outcome: "policy_reload", refusal: refusal) }
        self.server = nil
    }

    // MARK: requests

    /// A request head arrived: admit it, then reach its server (or reuse the kept connection).
    func handle(_ request: PlainRequest) {
        let policy = worker.snapshot.policy
        if let refusal = AdmissionGate.admit(request.authority, client: clientAddress.ip, policy: policy, kind: .plain).refusal {
            return refuse(refusal, request)
        }
        if let server, server.fits(request.authority, under: policy) {
            return begin(request, on: server, reused: true)
        }
        reach(request, policy: policy)
    }

    /// Resolves (or asks the parent) and connects: a fresh server connection for this request.
    private func reach(_ request: PlainRequest, policy: Policy) {
        server = nil
        if let parent = policy.proxy.upstreamProxy {
            // The parent resolves the name (deny_destinations applies to IP-literal targets only, as for CONNECT).
            return connect(request, to: [parent.address])
        }
        switch request.authority.target {
        case .ip(let ip):
            addressesKnown(request, [ip])
        case .name(let name):
            if let mapped = policy.resolve[name] { return addressesKnown(request, mapped) }
            let settings = policy.proxy
            let deadline = Timer(loop: worker.loop, after: settings.dnsTimeout) { [weak self] in
                guard let self else { return }
                withExtendedLifetime(self) { refuse(.dnsTimeout, request) }
            }
            // The answer may come inside `resolve` (a cached or failed lookup), before the stage is set.
            let lookup = worker.resolver.resolve(name) { [weak self] result in
                guard let self else { return }
                withExtendedLifetime(self) {
                    if case .over = stage { return }
                    switch result {
                    case .success(let addresses): addressesKnown(request, addresses)
                    case .failure(let failure): refuse(.dnsError(failure.detail(resolving: name)), request)
                    }
                }
            }
            if case .awaitingHead = stage { stage = .resolving(request, lookup, deadline: deadline) }
        }
    }

    private func addressesKnown(_ request: PlainRequest, _ all: [IPAddress]) {
        let filter = DestinationFilter(deny: worker.snapshot.policy.proxy.denyDestinations) { [worker] in worker.isOwnAddress($0) }
        switch filter.filter(all, for: request.authority) {
        case .reach(let allowed): connect(request, to: allowed.map { SocketAddress(ip: $0, port: request.authority.port) })
        case .refused(let cause): refuse(cause.refusal, request)
        }
    }

    private func connect(_ request: PlainRequest, to addresses: [SocketAddress]) {
        let settings = worker.snapshot.policy.proxy
        let total = addresses.count == 1 ? settings.connectTimeout : settings.connectTotalTimeout
        stage = .awaitingHead
        let connector = Connector(loop: worker.loop, addresses: addresses, perAddress: settings.connectTimeout, total: total) { [weak self] outcome in
            guard let self else { return }
            withExtendedLifetime(self) { connected(request, outcome) }
        }
        if case .awaitingHead = stage { stage = .connecting(request, connector) }
    }

    private func connected(_ request: PlainRequest, _ outcome: Connector.Outcome) {
        switch outcome {
        case .failed(let refusal):
            refuse(refusal, request)
        case .connected(let fd, let address):
            guard let side = BufferEvent(loop: worker.loop, socket: fd) else { return refuse(.internalError("bufferevent_socket_new failed"), request) }
            setNoDelay(fd)
            let server = Server(side: side, authority: request.authority, address: address, parent: worker.snapshot.policy.proxy.upstreamProxy)
            self.server = server
            begin(request, on: server, reused: false)
        }
    }

    private func begin(_ request: PlainRequest, on server: Server, reused: Bool) {
        let settings = worker.snapshot.policy.proxy
        let head = request.upstreamHead(viaParent: settings.upstreamProxy).bytes
        evbuffer_add(server.side.output, head, head.count)
        let idle = settings.idleTimeout
        var timeout = timeval(tv_sec: Int(idle), tv_usec: Int((idle - idle.rounded(.down)) * 1_000_000))
        bufferevent_set_timeouts(server.side.ref, &timeout, &timeout)
        server.side.setWatermark(EV_READ, low: 0, high: Self.highWater)
        server.side.setWatermark(EV_WRITE, low: Self.highWater / 4, high: 0)
        Self.widen(server.side)
        server.side.route(to: self, read: plainServerReadCB, write: plainServerWriteCB, event: plainServerEventCB)
        server.side.enable(EV_READ | EV_WRITE)
        stage = .exchanging(Exchange(request: request, address: server.address, requestBody: BodyMeter(request.body),
                                     closeClient: request.clientCloses, reused: reused))
        client.enable(EV_READ)
        pumpRequest()
    }

    // MARK: moving bytes

    /// Moves the request body from the client to the server, up to the high-water mark.
    private func pumpRequest() {
        guard case .exchanging(var exchange) = stage, let server else { return }
        defer { if case .exchanging = stage { stage = .exchanging(exchange) } }
        switch move(from: client, to: server.side, meter: &exchange.requestBody, count: &exchange.bytesUp) {
        case .moved:
            if exchange.requestBody.isDone { client.disable(EV_READ) }  // a pipelined request waits for its turn
        case .blocked:
            client.disable(EV_READ)
        case .malformed(let why):
            stage = .exchanging(exchange)
            return abort(exchange, outcome: "bad_request_body", refusal: .badRequest("the request body: \(why)"))
        }
    }

    /// Reads the response head, then moves the body to the client, up to the high-water mark.
    private func pumpResponse() {
        guard case .exchanging(var exchange) = stage, let server else { return }
        let input = server.side.input
        while exchange.responseBody == nil {
            let available = evbuffer_get_length(input)
            let window = min(available, Self.maxResponseHead + 4)
            guard available > 0, let bytes = evbuffer_pullup(input, window) else { break }
            guard let length = ConnectRequest.headLength(in: UnsafeRawBufferPointer(start: bytes, count: window)) else {
                if available > Self.maxResponseHead { return abort(exchange, outcome: "bad_response", refusal: .network(.badUpstreamResponse, "the response head is over \(Self.maxResponseHead) bytes")) }
                stage = .exchanging(exchange)
                return
            }
            let raw = Array(UnsafeBufferPointer(start: bytes, count: length))
            evbuffer_drain(input, length)
            guard case .success(var head) = HTTPHead.parse(raw), head.start.0 == "HTTP/1.1" || head.start.0 == "HTTP/1.0",
                  let status = Int(head.start.1), (100...599).contains(status), status != 101 else {
                return abort(exchange, outcome: "bad_response", refusal: .network(.badUpstreamResponse, "the server's answer is not an HTTP/1.x response pinproxy forwards"))
            }
            let body: BodyLength
            switch head.bodyLength(isResponse: true, requestMethod: exchange.request.method) {
            case .success(let b): body = b
            case .failure(let why): return abort(exchange, outcome: "bad_response", refusal: .network(.badUpstreamResponse, "the response: \(why)"))
            }
            let serverCloses = head.tokens("Connection").contains("close") || head.start.0 == "HTTP/1.0" && !head.tokens("Connection").contains("keep-alive")
            head.removeHopByHop()
            head.fields.append(("Via", "\(head.start.0 == "HTTP/1.0" ? "1.0" : "1.1") pinproxy"))
            if (100..<200).contains(status) {
                // 100 Continue and friends: passed on (not to an HTTP/1.0 client, RFC 9110 §15.2);
                // the final response follows. Bounded in number, and read no faster than the client takes them.
                exchange.interim += 1
                guard exchange.interim <= Self.maxInterimResponses else {
                    return abort(exchange, outcome: "bad_response", refusal: .network(.badUpstreamResponse, "the server sent more than \(Self.maxInterimResponses) interim (1xx) responses"))
                }
                if exchange.request.head.start.2 == "HTTP/1.1" {
                    let bytes = HTTPHead(start: (exchange.request.head.start.2, head.start.1, head.start.2), fields: head.fields).bytes
                    evbuffer_add(client.output, bytes, bytes.count)
                }
                if evbuffer_get_length(client.output) >= Self.highWater {
                    server.side.disable(EV_READ)
                    stage = .exchanging(exchange)
                    return
                }
                continue
            }
            // A shutdown under way: this is the connection's last exchange.
            if body == .untilClose || worker.stopping { exchange.closeClient = true }
            if serverCloses || body == .untilClose { exchange.serverReusable = false }
            head.fields.append(("Connection", exchange.closeClient ? "close" : "keep-alive"))
            let out = HTTPHead(start: (exchange.request.head.start.2, head.start.1, head.start.2), fields: head.fields).bytes
            evbuffer_add(client.output, out, out.count)
            exchange.status = status
            exchange.responseBody = BodyMeter(body)
        }
        guard exchange.responseBody != nil else { stage = .exchanging(exchange); return }
        switch move(from: server.side, to: client, meter: &exchange.responseBody!, count: &exchange.bytesDown) {
        case .moved: break
        case .blocked: server.side.disable(EV_READ)
        case .malformed(let why):
            return abort(exchange, outcome: "bad_response", refusal: .network(.badUpstreamResponse, "the response body: \(why)"))
        }
        stage = .exchanging(exchange)
        if exchange.responseBody!.isDone { finishExchange(exchange) }
    }

    private enum Moved { case moved, blocked, malformed(String) }

    /// Moves what belongs to the body from one side's input to the other's output, in slices,
    /// until the input is empty, the body ends, or the output holds `highWater` bytes.
    private func move(from source: BufferEvent, to sink: BufferEvent, meter: inout BodyMeter, count: inout Int) -> Moved {
        let input = source.input
        var rounds = 0
        while !meter.isDone && rounds < 1024 {
            rounds += 1
            guard evbuffer_get_length(sink.output) < Self.highWater else { return .blocked }
            let available = evbuffer_get_length(input)
            guard available > 0 else { return .moved }
            let slice = min(available, 64 * 1024)
            let taken: Int
            switch meter.state {
            case .remaining(let n): taken = min(n, slice); _ = meter.consume(count: taken)
            case .untilClose: taken = slice
            default:
                guard let bytes = evbuffer_pullup(input, slice) else { return .moved }
                switch meter.consume(UnsafeRawBufferPointer(start: bytes, count: slice)) {
                case .consumed(let n): taken = n
                case .malformed(let why): return .malformed(why)
                }
            }
            evbuffer_remove_buffer(input, sink.output, taken)
            count += taken
        }
        return .moved
    }

    /// Both bodies are through: log it, then wait for the next request or close.
    private func finishExchange(_ exchange: Exchange) {
        // A response that ended before its request body did leaves the connection out of step.
        var exchange = exchange
        if !exchange.requestBody.isDone {
            exchange.closeClient = true
            exchange.serverReusable = false
        }
        log(exchange, outcome: "complete")
        if let server, evbuffer_get_length(server.side.input) > 0 { exchange.serverReusable = false }  // unsolicited bytes
        if !exchange.serverReusable { server = nil }
        if exchange.closeClient || worker.stopping { return close() }
        stage = .awaitingHead
        headTimer = Timer(loop: worker.loop, after: worker.snapshot.policy.proxy.headerTimeout) { [weak self] in
            guard let self, case .awaitingHead = stage else { return }
            withExtendedLifetime(self) { close() }
        }
        client.enable(EV_READ)
        onClientReadable()  // a pipelined request may already wait
    }

    /// The exchange cannot go on. Before the response head the client is answered with the refusal;
    /// after it, the connection closes once what it is owed is flushed (it sees a cut body).
    private func abort(_ exchange: Exchange, outcome: String, refusal: Refusal? = nil) {
        server = nil
        if exchange.responseBody == nil, let refusal {
            log(exchange, outcome: outcome)
            stage = .over
            worker.logger.emit(rejectedLine(refusal, exchange.request))
            worker.tally.withLock { $0.counters.rejected += 1 }
            return onEnd(.refused(refusal))
        }
        log(exchange, outcome: outcome)
        close()
    }

    /// Flushes the client's output, then ends.
    private func close() {
        server = nil
        stage = .closing
        client.disable(EV_READ)
        if evbuffer_get_length(client.output) == 0 { end() }
    }

    private func end() {
        if case .over = stage { return }
        stage = .over
        onEnd(.finished)
    }

    /// A refusal of this request: logged, then the session answers it and closes.
    private func refuse(_ refusal: Refusal, _ request: PlainRequest) {
        if case .over = stage { return }
        cancelPending()
        stage = .over
        server = nil
        worker.logger.emit(rejectedLine(refusal, request))
        worker.tally.withLock { $0.counters.rejected += 1 }
        onEnd(.refused(refusal))
    }

    // MARK: events

    fileprivate func onClientReadable() {
        switch stage {
        case .exchanging: return pumpRequest()
        case .awaitingHead: break
        default: return
        }
        let input = client.input
        let available = evbuffer_get_length(input)
        guard available > 0 else { return }
        let limit = worker.snapshot.policy.proxy.maxRequestBytes
        let window = min(available, limit + 4)
        guard let bytes = evbuffer_pullup(input, window) else { return }
        guard let headLength = ConnectRequest.headLength(in: UnsafeRawBufferPointer(start: bytes, count: window)) else {
            if available > limit { rejectHead(.tooLarge("the request head is over max_request_bytes (\(limit) bytes)")) }
            return
        }
        guard headLength <= limit else { return rejectHead(.tooLarge("the request head is \(headLength) bytes, over max_request_bytes (\(limit))")) }
        let head = Array(UnsafeBufferPointer(start: bytes, count: headLength))
        evbuffer_drain(input, headLength)
        received(head)
    }

    /// A request head, read by the session (the first) or by the forwarder (those kept alive after it).
    func received(_ head: [UInt8]) {
        headTimer = nil
        switch PlainRequest.parse(head: head) {
        case .success(let request):
            if worker.snapshot.policy.proxy.plainHTTP == .refuse { return refuse(AdmissionCause.plainHTTPRefused.refusal, request) }
            client.disable(EV_READ)  // the body is read once the server is reached
            handle(request)
        case .failure(let problem):
            rejectHead(problem.refusal)
        }
    }

    private func rejectHead(_ refusal: Refusal) {
        stage = .over
        server = nil
        worker.logger.emit(PlainLog.rejected(refusal, conn: conn, client: clientAddress, request: nil))
        worker.tally.withLock { $0.counters.rejected += 1 }
        onEnd(.refused(refusal))
    }

    fileprivate func onClientWritable() {
        switch stage {
        case .exchanging:
            server?.side.enable(EV_READ)
            pumpResponse()
        case .closing:
            if evbuffer_get_length(client.output) == 0 { end() }
        default:
            break
        }
    }

    fileprivate func onClientEvent(_ what: Int16) {
        switch stage {
        case .exchanging(let exchange):
            let outcome = what & Int16(BEV_EVENT_TIMEOUT) != 0 ? "idle_timeout" : what & Int16(BEV_EVENT_EOF) != 0 ? "client_closed" : "client_error"
            log(exchange, outcome: outcome)
        default:
            break
        }
        cancelPending()  // a lookup or connect under way must not call back into a forwarder that is gone
        server = nil
        stage = .over
        onEnd(.finished)
    }

    fileprivate func onServerReadable() { pumpResponse() }

    fileprivate func onServerWritable() {
        guard case .exchanging = stage else { return }
        client.enable(EV_READ)
        pumpRequest()
    }

    fileprivate func onServerEvent(_ what: Int16, errno savedErrno: Int32) {
        guard case .exchanging(var exchange) = stage else {
            server = nil  // a kept connection the server closed between requests
            return
        }
        pumpResponse()  // what arrived before the end
        guard case .exchanging(let current) = stage else { return }
        exchange = current
        let eof = what & Int16(BEV_EVENT_EOF) != 0
        // A kept connection the server closed just as the request went out (the keep-alive race):
        // an idempotent request of which no body byte was sent and no answer came goes again, once,
        // on a fresh connection.
        if exchange.reused, exchange.responseBody == nil, exchange.bytesUp == 0, let server, evbuffer_get_length(server.side.input) == 0,
           ["GET", "HEAD", "OPTIONS", "PUT", "DELETE"].contains(exchange.request.method) {
            self.server = nil
            stage = .awaitingHead
            // Admitted again under the policy in force now: a reload may have pinned or denied it meanwhile.
            let policy = worker.snapshot.policy
            if let refusal = AdmissionGate.admit(exchange.request.authority, client: clientAddress.ip, policy: policy, kind: .plain).refusal {
                log(exchange, outcome: "policy_reload")
                return refuse(refusal, exchange.request)
            }
            return reach(exchange.request, policy: policy)
        }
        if eof, exchange.responseBody?.state == .untilClose {
            exchange.responseBody = BodyMeter(.none)
            exchange.serverReusable = false
            server = nil
            return finishExchange(exchange)
        }
        let timedOut = what & Int16(BEV_EVENT_TIMEOUT) != 0
        let reset = !eof && !timedOut && (savedErrno == ECONNRESET || savedErrno == EPIPE)
        let outcome = timedOut ? "upstream_timeout" : eof ? "upstream_closed" : reset ? "upstream_reset" : "upstream_error"
        let refusal: Refusal = timedOut ? .network(.connectionTimeout, "the server did not answer within idle_timeout")
            : .network(.badUpstreamResponse, "the server \(eof ? "closed" : "reset") the connection before its response was complete")
        abort(exchange, outcome: outcome, refusal: refusal)
    }

    // MARK: logs

    private func log(_ exchange: Exchange, outcome: String) {
        worker.tally.withLock { $0.counters.bytesUp += exchange.bytesUp }
        worker.tally.withLock { $0.counters.bytesDown += exchange.bytesDown }
        worker.logger.emit(PlainLog.forwarded(conn: conn, client: clientAddress, request: exchange.request, address: exchange.address,
                                             status: exchange.status, bytesUp: exchange.bytesUp, bytesDown: exchange.bytesDown,
                                             duration: ContinuousClock.now - exchange.startedAt, outcome: outcome))
    }

    private func rejectedLine(_ refusal: Refusal, _ request: PlainRequest) -> LogRecord {
        PlainLog.rejected(refusal, conn: conn, client: clientAddress, request: request)
    }
}

/// The log lines of plain-HTTP forwarding.
enum PlainLog {
    static let hint = "use https:// for this host: pinproxy never reaches a pinned host over plain HTTP"

    static func forwarded(conn: Int, client: SocketAddress, request: PlainRequest, address: SocketAddress, status: Int, bytesUp: Int,
                          bytesDown: Int, duration: Duration, outcome: String) -> LogRecord {
        LogRecord(outcome == "complete" ? .info : .warning, "http_forwarded", [
            ("conn", .int(conn)), ("client", .string(client.description)), ("method", .string(request.method)),
            ("host", .string(request.authority.target.description)), ("port", .int(Int(request.authority.port))),
            ("address", .string(address.description)), ("status", .int(status)), ("bytes_up", .int(bytesUp)),
            ("bytes_down", .int(bytesDown)), ("duration_ms", .int(Int(duration.seconds * 1000))), ("outcome", .string(outcome)),
        ])
    }

    static func rejected(_ refusal: Refusal, conn: Int, client: SocketAddress, request: PlainRequest?) -> LogRecord {
        var r = LogRecord(.warning, "request_rejected", [
            ("conn", .int(conn)), ("client", .string(client.description)), ("status", .int(refusal.status)),
            ("reason", .string(refusal.reason)), ("detail", .string(refusal.detail)),
        ])
        if let request {
            r["method"] = .string(request.method)
            r["host"] = .string(request.authority.target.description)
            r["port"] = .int(Int(request.authority.port))
        }
        r["hint"] = .string(hint(for: refusal, conn: conn, client: client))
        return r
    }

    static func hint(for refusal: Refusal, conn: Int = 0, client: SocketAddress? = nil) -> String {
        switch refusal.code {
        case .network(.plainHTTPToPinnedHost): return hint
        case .network(.plainHTTPRefused): return "proxy.plain_http is refuse: use https:// URLs, or set plain_http: forward"
        case .network(.plainPortNotAllowed): return "add the port to proxy.allowed_plain_ports if plain HTTP to it is intended"
        case .network(.badRequest): return "point http_proxy at pinproxy (http://HOST:PORT) and request http:// URLs through it; HTTPS goes through CONNECT"
        case .network(.methodNotAllowed): return "pinproxy forwards \(PlainRequest.methods.sorted().joined(separator: ", ")) over plain HTTP"
        case .network(.badUpstreamResponse): return "the server's answer could not be forwarded; the detail says why"
        default:
            guard let client else { return "the request was not forwarded: \(refusal.reason)" }
            return SessionLog.hint(refusal.code, DecisionRecord(conn: conn, client: client))
        }
    }
}

// The C trampolines, as the session's: the callback may drop the last reference, so it stays alive until they return.
private func forwarder(_ ctx: UnsafeMutableRawPointer?) -> PlainForwarder {
    guard let ctx else { preconditionFailure("bufferevent callback without its forwarder") }
    return Unmanaged<PlainForwarder>.fromOpaque(ctx).takeUnretainedValue()
}

private let plainClientReadCB: bufferevent_data_cb = { _, ctx in let f = forwarder(ctx); withExtendedLifetime(f) { f.onClientReadable() } }
private let plainClientWriteCB: bufferevent_data_cb = { _, ctx in let f = forwarder(ctx); withExtendedLifetime(f) { f.onClientWritable() } }
private let plainClientEventCB: bufferevent_event_cb = { _, what, ctx in let f = forwarder(ctx); withExtendedLifetime(f) { f.onClientEvent(what) } }
private let plainServerReadCB: bufferevent_data_cb = { _, ctx in let f = forwarder(ctx); withExtendedLifetime(f) { f.onServerReadable() } }
private let plainServerWriteCB: bufferevent_data_cb = { _, ctx in let f = forwarder(ctx); withExtendedLifetime(f) { f.onServerWritable() } }
private let plainServerEventCB: bufferevent_event_cb = { _, what, ctx in
    let savedErrno = errno  // first thing: later calls overwrite it
    let f = forwarder(ctx)
    withExtendedLifetime(f) { f.onServerEvent(what, errno: savedErrno) }
}
