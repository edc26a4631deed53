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
/// What happens next is decided by an `ExchangeMachine`; this class is its I/O: it turns libevent
/// callbacks into the machine's events and carries out the actions it answers, and ends each
/// exchange in one place (`finish`). The session owns the client bufferevent; the forwarder routes
/// its callbacks while it runs and tells the session, through `onEnd`, when the connection is over
/// or must be answered with a refusal. Bound to its proxy's loop thread.
final class PlainForwarder {
    enum End {
        /// The client is done (or the connection broke): release it.
        case finished
        /// Answer this refusal and close (already logged).
        case refused(Refusal)
    }

    /// Bytes queued toward one side before reading from the other stops (never more: a move
    /// takes only what fits below it).
    static let highWater = 256 * 1024
    /// Bytes read from a server ahead of the client: with `highWater`, what one direction of an
    /// exchange holds (the request side's read-ahead is the client's, `max_request_bytes` + 1 KiB,
    /// at least 64 KiB).
    static let serverReadAhead = 64 * 1024
    /// How often a request in flight asks the client's socket whether the client is still there.
    static let hangUpCheckInterval = 0.5

    /// What the machine waits on while it resolves or connects; cancelled when it stops waiting,
    /// so nothing calls back into a forwarder that has moved on.
    private enum Pending {
        case lookup(ResolveRequest, deadline: Timer)
        case connect(Connector)

        func cancel() {
            switch self {
            case .lookup(let request, _): request.cancel()
            case .connect(let connector): connector.cancel()
            }
        }
    }

    private let worker: Worker
    private let conn: Int
    private let clientAddress: SocketAddress
    private let client: BufferEvent
    private let onEnd: (End) -> Void
    private var machine: ExchangeMachine
    private var pending: Pending?
    /// The socket of `machine.server`: held exactly while the machine has a server.
    private var serverSide: BufferEvent?
    /// While a request is in flight the forwarder does not read the client (what it sends next
    /// waits its turn), so a client that leaves would go unnoticed until the server answers or
    /// `idle_timeout`: this repeating check asks its socket instead (`clientHasLeft`).
    private var hangUpCheck: Timer?
    /// `header_timeout` for the next request on a kept-alive connection: a client that trickles a
    /// head byte by byte is closed as the first request's would be.
    private var headTimer: Timer?

    init(worker: Worker, conn: Int, client clientAddress: SocketAddress, side: BufferEvent, onEnd: @escaping (End) -> Void) {
        self.worker = worker
        self.conn = conn
        self.clientAddress = clientAddress
        self.client = side
        self.onEnd = onEnd
        machine = ExchangeMachine(client: clientAddress.ip) { [worker] in worker.isOwnAddress($0) }
        var timeout = Self.timeval(worker.snapshot.policy.proxy.idleTimeout)
        bufferevent_set_timeouts(side.ref, &timeout, &timeout)
        readAheadFromClient(under: worker.snapshot.policy)
        side.setWatermark(EV_WRITE, low: Self.highWater / 4, high: 0)
        BodyMover.widen(side)
        side.route(to: self, read: plainClientReadCB, write: plainClientWriteCB, event: plainClientEventCB)
        side.enable(EV_READ | EV_WRITE)
    }

    /// Waiting for the next request on a kept-alive connection, with nothing in flight.
    var isBetweenRequests: Bool { machine.isBetweenRequests }

    /// Stops without calling back: the session is leaving this stage. Hands the client side back untouched.
    func cancel() {
        step { $0.cancel() }
        bufferevent_set_timeouts(client.ref, nil, nil)
        client.setWatermark(EV_WRITE, low: 0, high: 0)
    }

    /// A reload: an exchange or a kept server connection the new policy would not allow ends now.
    func policyChanged(to policy: Policy) {
        readAheadFromClient(under: policy)
        step { $0.policyChanged(to: policy) }
        // A head already waiting is judged by the new limit now: a lower watermark pauses reading
        // without calling back, so a head over a lowered limit would wait for header_timeout
        // instead of its 431.
        if machine.isBetweenRequests { onClientReadable() }
    }

    /// Transparent mode: the connection was redirected here (its heads are in origin-form).
    var transparent: TransparentOrigin?

    /// A request head, read by the session (the first) or by the forwarder (those kept alive after it).
    func received(_ head: [UInt8]) {
        let head = transparent.map { TransparentPlainHead.absoluteForm(head, origin: $0) } ?? head
        let keptServerIdle = serverSide.map { evbuffer_get_length($0.input) == 0 } ?? false
        step { $0.headRead(head, policy: worker.snapshot.policy, keptServerIdle: keptServerIdle, at: .now) }
    }

    // MARK: the machine

    /// Feeds the machine one event, brings what the forwarder holds in line with its new stage,
    /// then carries out its action.
    private func step(_ event: (inout ExchangeMachine) -> ExchangeMachine.Action) {
        let waited = machine.isBetweenRequests
        let action = event(&machine)
        follow(waited: waited)
        perform(action)
    }

    /// The server socket, the lookup or connect under way, the timers and the worker's book of
    /// silent connections follow the machine's stage.
    private func follow(waited: Bool) {
        if machine.server == nil { serverSide = nil }
        switch machine.state {
        case .resolving, .connecting: break
        default:
            if let waiting = pending {
                pending = nil
                waiting.cancel()
            }
        }
        if !machine.isBetweenRequests { headTimer = nil }
        if !machine.hasRequestInFlight {
            hangUpCheck = nil
        } else if hangUpCheck == nil {
            hangUpCheck = Timer(loop: worker.loop, after: Self.hangUpCheckInterval, repeating: true) { [weak self] in
                guard let self, let end = clientHasLeft(fd: client.fd) else { return }
                withExtendedLifetime(self) { step { $0.clientLeft(end) } }
            }
        }
        // A kept connection waiting for its next request is as silent as a new one that has not
        // spoken: it goes back into the worker's book of silent connections (which may close it in
        // a flood, the idlest first) until its next head arrives.
        if machine.isBetweenRequests && !waited {
            worker.silentAgain(conn, client: clientAddress)
        } else if !machine.isBetweenRequests && waited {
            worker.spoke(conn)
        }
    }

    private func perform(_ action: ExchangeMachine.Action) {
        switch action {
        case .none:
            break
        case .refuse(let refusal, let request):
            worker.log(.refused(refusal, request), conn: conn, client: clientAddress, original: transparent?.original)
            onEnd(.refused(refusal))
        case .lookUp(let name):
            client.disable(EV_READ)  // the body is read once the server is reached
            lookUp(name)
        case .connect(let addresses, let perAddress, let total):
            client.disable(EV_READ)
            connect(addresses, perAddress: perAddress, total: total)
        case .send(let head):
            send(head)
        case .pauseClient:
            client.disable(EV_READ)
        case .pauseServer:
            serverSide?.disable(EV_READ)
        case .interim(let bytes):
            if let bytes { evbuffer_add(client.output, bytes, bytes.count) }
        case .responseHead(let bytes):
            evbuffer_add(client.output, bytes, bytes.count)
        case .finish(let outcome, let exchange, let after):
            finish(outcome, exchange, then: after)
        case .close:
            closeClient()
        case .release:
            onEnd(.finished)
        }
    }

    /// The one end of an exchange: counted and logged once, from its outcome (with the refusal's
    /// line when the client is answered with one), then what the machine said comes after.
    private func finish(_ outcome: PlainOutcome, _ exchange: PlainExchange, then after: ExchangeMachine.After) {
        var answered: Refusal?
        if case .answer(let refusal) = after { answered = refusal }
        worker.log(.exchange(exchange, outcome, answered: answered), conn: conn, client: clientAddress, original: transparent?.original)
        switch after {
        case .answer(let refusal): onEnd(.refused(refusal))
        case .close: closeClient()
        case .release: onEnd(.finished)
        case .awaitHead: awaitNextHead()
        case .handBack: break
        }
    }

    // MARK: reaching the server

    private func lookUp(_ name: String) {
        let deadline = Timer(loop: worker.loop, after: worker.snapshot.policy.proxy.dnsTimeout) { [weak self] in
            guard let self else { return }
            withExtendedLifetime(self) { step { $0.lookupTimedOut() } }
        }
        // The answer may come inside `resolve` (a cached or failed lookup), before `pending` is set.
        let lookup = worker.resolver.resolve(name) { [weak self] result in
            guard let self else { return }
            withExtendedLifetime(self) {
                let answered = pending  // done: let go without cancelling, once this callback returns
                pending = nil
                withExtendedLifetime(answered) { step { $0.resolved(result, policy: worker.snapshot.policy) } }
            }
        }
        if case .resolving = machine.state, pending == nil { pending = .lookup(lookup, deadline: deadline) }
    }

    private func connect(_ addresses: [SocketAddress], perAddress: Double, total: Double) {
        let connector = Connector(loop: worker.loop, addresses: addresses, perAddress: perAddress, total: total) { [weak self] outcome in
            guard let self else { return }
            withExtendedLifetime(self) {
                let answered = pending
                pending = nil
                withExtendedLifetime(answered) { connected(outcome) }
            }
        }
        if case .connecting = machine.state, pending == nil { pending = .connect(connector) }
    }

    private func connected(_ outcome: Connector.Outcome) {
        switch outcome {
        case .failed(let refusal):
            step { $0.connectFailed(refusal) }
        case .connected(let fd, let address):
            guard let side = BufferEvent(loop: worker.loop, socket: fd) else {
                return step { $0.connectFailed(.internalError("bufferevent_socket_new failed")) }
            }
            setNoDelay(fd)
            serverSide = side
            step { $0.connected(to: address, policy: worker.snapshot.policy, at: .now) }
        }
    }

    /// Sends the request head on the server connection (fresh or kept), then the body as it comes.
    private func send(_ head: [UInt8]) {
        guard let server = serverSide else { preconditionFailure("a request to send without a server connection") }
        evbuffer_add(server.output, head, head.count)
        var timeout = Self.timeval(worker.snapshot.policy.proxy.idleTimeout)
        bufferevent_set_timeouts(server.ref, &timeout, &timeout)
        server.setWatermark(EV_READ, low: 0, high: Self.serverReadAhead)
        server.setWatermark(EV_WRITE, low: Self.highWater / 4, high: 0)
        BodyMover.widen(server)
        server.route(to: self, read: plainServerReadCB, write: plainServerWriteCB, event: plainServerEventCB)
        server.enable(EV_READ | EV_WRITE)
        client.enable(EV_READ)
        pumpRequest()
    }

    // MARK: moving bytes

    /// Moves the request body from the client to the server, up to the high-water mark.
    private func pumpRequest() {
        guard case .exchanging(let exchange, _) = machine.state, let server = serverSide else { return }
        var meter = exchange.requestBody
        let (moved, bytes) = BodyMover.move(from: client, to: server, meter: &meter, highWater: Self.highWater)
        step { $0.requestBodyMoved(meter, bytes: bytes, moved) }
    }

    /// Reads the response heads (1xx ones, then the final one), then moves the body to the client,
    /// up to the high-water mark.
    private func pumpResponse() {
        while case .exchanging(let exchange, _) = machine.state, !exchange.responseStarted, let server = serverSide {
            let input = server.input
            let available = evbuffer_get_length(input)
            let window = min(available, ExchangeMachine.maxResponseHead + 4)
            guard available > 0, let bytes = evbuffer_pullup(input, window) else { return }
            guard let length = ConnectRequest.headLength(in: UnsafeRawBufferPointer(start: bytes, count: window)) else {
                // `>=`: the server is read at most `serverReadAhead` (64 KiB) ahead, so a longer head never arrives whole.
                if available >= ExchangeMachine.maxResponseHead { step { $0.responseHeadTooLong() } }
                return
            }
            let raw = Array(UnsafeBufferPointer(start: bytes, count: length))
            evbuffer_drain(input, length)
            step { $0.responseHead(raw, stopping: worker.stopping) }
            // After a 1xx response: read the next no faster than the client takes them.
            if case .exchanging(let now, _) = machine.state, !now.responseStarted, evbuffer_get_length(client.output) >= Self.highWater {
                server.disable(EV_READ)
                return
            }
        }
        guard case .exchanging(let exchange, _) = machine.state, case .body(_, var meter, let dechunk) = exchange.response,
              let server = serverSide else { return }
        let (moved, bytes) = BodyMover.move(from: server, to: client, meter: &meter, dechunk: dechunk, highWater: Self.highWater)
        let serverIdle = evbuffer_get_length(server.input) == 0
        step { $0.responseBodyMoved(meter, bytes: bytes, moved, serverIdle: serverIdle, stopping: worker.stopping) }
    }

    // MARK: the client's side

    /// Flushes the client's output, then ends.
    private func closeClient() {
        client.disable(EV_READ)
        if evbuffer_get_length(client.output) == 0 { step { $0.clientDrained() } }
    }

    /// Waits for the next request on this connection, within `header_timeout`.
    private func awaitNextHead() {
        guard machine.isBetweenRequests else { return }  // a flood of silent connections may have closed this one meanwhile
        headTimer = Timer(loop: worker.loop, after: worker.snapshot.policy.proxy.headerTimeout) { [weak self] in
            guard let self, machine.isBetweenRequests else { return }
            withExtendedLifetime(self) { step { $0.headTimedOut() } }
        }
        client.enable(EV_READ)
        onClientReadable()  // a pipelined request may already wait
    }

    /// Enough for the largest head `max_request_bytes` allows (a reload may raise it); a body waits
    /// in at most this much. Never less than the largest head: a head that has not ended stays in
    /// the input, and at the read watermark with reading on, libevent calls the read callback again
    /// every loop turn.
    private func readAheadFromClient(under policy: Policy) {
        client.setWatermark(EV_READ, low: 0, high: max(64 * 1024, policy.proxy.maxRequestBytes + 1024))
    }

    // MARK: events

    fileprivate func onClientReadable() {
        if machine.isExchanging { return pumpRequest() }
        guard machine.isBetweenRequests else { return }
        let input = client.input
        let available = evbuffer_get_length(input)
        guard available > 0 else { return }
        let limit = worker.snapshot.policy.proxy.maxRequestBytes
        let window = min(available, limit + 4)
        guard let bytes = evbuffer_pullup(input, window) else { return }
        guard let headLength = ConnectRequest.headLength(in: UnsafeRawBufferPointer(start: bytes, count: window)) else {
            if available > limit { step { $0.headRejected(.tooLarge("the request head is over max_request_bytes (\(limit) bytes)")) } }
            return
        }
        guard headLength <= limit else {
            return step { $0.headRejected(.tooLarge("the request head is \(headLength) bytes, over max_request_bytes (\(limit))")) }
        }
        let head = Array(UnsafeBufferPointer(start: bytes, count: headLength))
        evbuffer_drain(input, headLength)
        received(head)
    }

    fileprivate func onClientWritable() {
        if machine.isExchanging {
            serverSide?.enable(EV_READ)
            pumpResponse()
        } else if machine.isClosing, evbuffer_get_length(client.output) == 0 {
            step { $0.clientDrained() }
        }
    }

    fileprivate func onClientEvent(_ what: Int16) {
        let end: ExchangeMachine.ClientEnd = what & Int16(BEV_EVENT_TIMEOUT) != 0 ? .idle : what & Int16(BEV_EVENT_EOF) != 0 ? .closed : .failed
        step { $0.clientLeft(end) }
    }

    fileprivate func onServerReadable() {
        // A kept server that speaks before it is asked cannot be used again (what it sent would be
        // read as the next response), so it goes now. Left with its bytes and reading on, it made
        // the worker spin once they reached the read watermark: libevent calls a read callback
        // again every loop turn while the input sits there.
        guard machine.isExchanging else { return step { $0.serverLeft() } }
        pumpResponse()
    }

    fileprivate func onServerWritable() {
        guard machine.isExchanging else { return }
        client.enable(EV_READ)
        pumpRequest()
    }

    fileprivate func onServerEvent(_ what: Int16, errno savedErrno: Int32) {
        guard machine.isExchanging else { return step { $0.serverLeft() } }  // a kept connection the server closed between requests
        pumpResponse()  // what arrived before the end
        guard machine.isExchanging, let server = serverSide else { return }
        let end: ExchangeMachine.ServerEnd
        if what & Int16(BEV_EVENT_TIMEOUT) != 0 {
            end = .timedOut
        } else if what & Int16(BEV_EVENT_EOF) != 0 {
            end = .closed
        } else {
            end = savedErrno == ECONNRESET || savedErrno == EPIPE ? .reset : .failed
        }
        let serverIdle = evbuffer_get_length(server.input) == 0
        step { $0.serverEnded(end, serverIdle: serverIdle, policy: worker.snapshot.policy, stopping: worker.stopping) }
    }

    private static func timeval(_ seconds: Double) -> timeval {
        Glibc.timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
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
