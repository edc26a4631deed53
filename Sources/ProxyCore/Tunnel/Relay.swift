import CLibevent
import Foundation
import PinPolicy

/// Relays bytes both ways in two stages. While the stream check looks at either side, through the
/// bufferevents, after le-proxy: a read callback that moves bytes to the other side and applies
/// backpressure, a write callback that lifts it, and an event callback that half-closes on EOF and
/// ends the tunnel on any error; `move(from:)` is the one place bytes cross. Once the check is done
/// with both sides (its answers, not the TLS version, decide), the sockets — and what the
/// bufferevents still hold — go to a `FastRelay` (`proxy.relay`: copy or splice) for the rest.
final class Relay {
    /// One side's bufferevent and what the stream check has seen of it; the counts and flags of
    /// the relay itself live in `book`.
    struct Side {
        let bev: BufferEvent
        /// The stream check still looks at what this side sends.
        var inspected: Bool
        /// How many of the bytes waiting in this side's input the check has seen.
        var shown = 0
    }

    /// The bufferevent stage's two sides; nil once the fast relay has the sockets.
    private var sides: (client: Side, upstream: Side)?
    private var book = RelayBook()
    private var checkedActivity = ContinuousClock.now
    private let method: RelayMethod
    /// The second stage, once it has begun.
    private var fast: FastRelay?
    private let idleTimeout: Double
    /// One timer event for the tunnel's life, armed again while bytes move (an event, not a `Timer`
    /// remade at each re-arm: a held tunnel carries one, ~100 bytes lighter).
    private var idleTimer: LoopEvent?
    /// A pinned tunnel's client has `helloTimeout` after the `200` to complete its ClientHello.
    private let helloTimeout: Double?
    private var helloTimer: Timer?
    private let loop: EventLoop
    private var onEnd: ((RelayEnd) -> Void)?
    /// The one hook where bytes move: the stream check sees each side's first flights. Once it is
    /// done with both sides it is let go (its readers, hellos and held bytes with it), and only
    /// what it found stays, in `summary`.
    private(set) var check: StreamCheck?
    private var foundByCheck: StreamSummary?
    /// The server closed while the check held its TLS 1.3 flight for a verdict (a key-log line, the
    /// mirrors): its close waits behind its bytes until the check speaks.
    private var upstreamClosedWhileHeld = false

    /// What the stream check found (nil: the tunnel had none): for the close line and a reload.
    var summary: StreamSummary? { check?.summary ?? foundByCheck }

    /// Bytes from the client to the upstream, and back.
    var bytesUp: Int { (fast?.book ?? book).client.bytes }
    var bytesDown: Int { (fast?.book ?? book).upstream.bytes }
    /// Which relay carried the tunnel at its end: the `relay` key of its close line.
    var stage: RelayStage { fast == nil ? .bufferevent : method == .splice ? .splice : .copy }
    private var lastActivity: ContinuousClock.Instant { fast?.lastActivity ?? checkedActivity }

    init(loop: EventLoop, client: BufferEvent, upstream: BufferEvent, idleTimeout: Double, helloTimeout: Double? = nil,
         check: StreamCheck?, method: RelayMethod = .copy, onEnd: @escaping (RelayEnd) -> Void) {
        self.loop = loop
        self.helloTimeout = helloTimeout
        self.check = check
        self.method = RelayStage.testOverride ?? method
        sides = (Side(bev: client, inspected: check != nil), Side(bev: upstream, inspected: check != nil))
        self.idleTimeout = idleTimeout
        self.onEnd = onEnd
        // The check may decide later than the bytes arrived (a TLS 1.3 key-log line, its wait).
        check?.decide = { [weak self] side, inspection in self?.decided(side, inspection) }
    }

    /// The bufferevents may outlive the relay for a moment (a callback in flight): none may reach us then.
    deinit {
        sides?.client.bev.unroute(from: self)
        sides?.upstream.bev.unroute(from: self)
    }

    /// Takes over both bufferevents (the relay owns them from now on, and frees them when the fast
    /// relay takes the sockets) and passes on what the client already sent.
    func start() {
        checkedActivity = .now
        self[.client].bev.setWatermark(EV_READ, low: 0, high: 0)
        for side in [TunnelSide.client, .upstream] {
            self[side].bev.route(to: self, read: relayReadCB, write: relayWriteCB, event: relayEventCB)
            self[side].bev.enable(EV_READ | EV_WRITE)
        }
        armIdleTimer()
        if let helloTimeout, check?.awaitsClientHello == true {
            helloTimer = Timer(loop: loop, after: helloTimeout) { [weak self] in
                guard let self else { return }
                helloTimer = nil
                if check?.awaitsClientHello == true { end(.noClientHello) }
            }
        }
        move(from: .client)  // bytes the client sent right after its CONNECT
        goFastIfReady()
    }

    /// What the client does while its tunnel waits for its ClientHello, for the book of silent
    /// connections: bytes in the kernel are arriving; else, a hello or part of one held or not, it
    /// awaits its hello.
    var clientActivity: SilentConnections.Activity {
        guard let sides else { return .idle }
        var byte: UInt8 = 0
        if recv(sides.client.bev.fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0 { return .arriving }
        // Part of a hello held is no reason to spare a tunnel: a flood would send each of its
        // tunnels one byte to be shed after real clients' tunnels in their moment before the hello.
        return .awaitingHello
    }

    /// The check refused on `side`'s bytes. A server that answers a client already gone (its close
    /// passed on) with an alert or a cut flight is the client's doing: said as such, not as an attack.
    private func refused(_ refusal: StreamRefusal) {
        if book.client.sentEOF, refusal.reason == .malformedTLS || refusal.reason == .notTLS, let stage = check?.heldStage {
            return end(.clientLeft(stage))
        }
        if refusal.alertClient { alertClient() }
        end(.refused(refusal))
    }

    /// Makes the coming close a reset on both sockets: whatever is still queued towards either peer,
    /// in the kernel or here, is dropped instead of delivered. For a tunnel the policy no longer
    /// allows (a reload), so that nothing it held reaches the client afterwards.
    func abortOnClose() {
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        for fd in fast?.sockets ?? [self[.client].bev.fd, self[.upstream].bev.fd] {
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
    }

    /// Stops without calling back: the session is ending for another reason.
    func cancel() {
        check?.stop()
        onEnd = nil
        idleTimer = nil
        helloTimer = nil
        fast?.cancel()
    }

    /// A side of the bufferevent stage (only its callbacks and steps use it, and they stop with it).
    private subscript(side: TunnelSide) -> Side {
        get {
            guard let sides else { preconditionFailure("the bufferevent stage is over") }
            return side == .client ? sides.client : sides.upstream
        }
        set { if side == .client { sides?.client = newValue } else { sides?.upstream = newValue } }
    }

    fileprivate func side(of bev: OpaquePointer) -> TunnelSide { bev == self[.client].bev.ref ? .client : .upstream }

    /// Hands the sockets to the fast relay once the check is done with both sides and neither has
    /// ended or failed (libevent stops a bufferevent on EOF or error before its event callback
    /// runs, so a side must still be enabled as the book says). What libevent read but did
    /// not pass on yet is moved first; what waits in the output buffers goes with the fast relay,
    /// to be written before anything else.
    private func goFastIfReady() {
        retireCheckIfDone()
        guard fast == nil, onEnd != nil, let sides, !sides.client.inspected, !sides.upstream.inspected, book.isOpenBothWays else { return }
        for side in [TunnelSide.client, .upstream] {
            let enabled = Int32(bufferevent_get_enabled(self[side].bev.ref))
            guard enabled & EV_WRITE != 0, book[side].readPaused || enabled & EV_READ != 0 else { return }
        }
        move(from: .client)
        move(from: .upstream)
        guard onEnd != nil, book.isOpenBothWays else { return }
        let clientFD = sides.client.bev.takeSocket(), upstreamFD = sides.upstream.bev.takeSocket()
        let carried = (fromClient: sides.upstream.bev.takeOutput(), fromUpstream: sides.client.bev.takeOutput())
        self.sides = nil  // frees both bufferevents and their buffers
        let relay = FastRelay(loop: loop, method: method, client: clientFD, upstream: upstreamFD, book: book, carried: carried) { [weak self] how in
            guard let self else { return }
            end(how)
        }
        fast = relay
        relay.start()
    }

    /// The check has nothing left to read on either side: keep what it found and let it go.
    private func retireCheckIfDone() {
        guard let check, let sides, !sides.client.inspected, !sides.upstream.inspected else { return }
        check.stop()
        foundByCheck = check.lasting
        self.check = nil
    }

    /// Moves what `from` sent to the other side; when the other side has too much queued, stops
    /// reading `from` until it drains. While the stream check looks at a side, its new bytes are
    /// shown to the check first, and stay in the input buffer while it holds them (its reader's
    /// limit bounds how much).
    private func move(from: TunnelSide) {
        let source = self[from].bev, sink = self[from.other].bev
        let count = evbuffer_get_length(source.input)
        guard count > 0 else { return }
        if self[from].inspected, let check {
            // Held bytes move only on the check's word: with nothing new to show, nothing moves.
            guard count > self[from].shown, let bytes = evbuffer_pullup(source.input, count) else { return }
            let fresh = UnsafeRawBufferPointer(start: bytes + self[from].shown, count: count - self[from].shown)
            self[from].shown = count
            let answer = check.inspect(from, fresh)
            if helloTimer != nil && !check.awaitsClientHello { helloTimer = nil }  // the hello came: a held tunnel carries no timer
            switch answer {
            case .hold:
                checkedActivity = .now
                return
            case .pass(let count):
                checkedActivity = .now
                return forward(count, from: from)
            case .release:
                break
            case .done:
                self[from].inspected = false
            case .refuse(let refusal):
                return refused(refusal)
            }
        }
        self[from].shown = 0
        checkedActivity = .now
        Self.pass(count, from: source.input, to: sink)
        take(book.moved(count, from: from, queuedAtOther: evbuffer_get_length(sink.output)))
    }

    /// Passes on the first `count` held bytes of `from`; the rest stays held.
    private func forward(_ count: Int, from: TunnelSide) {
        let sink = self[from.other].bev
        let moved = min(count, evbuffer_get_length(self[from].bev.input))
        Self.pass(moved, from: self[from].bev.input, to: sink)
        self[from].shown -= moved
        take(book.moved(moved, from: from, queuedAtOther: evbuffer_get_length(sink.output)))
    }

    /// Moves the first `count` bytes of `input` to `sink`: straight to its socket while nothing
    /// waits in its output, so a flight leaves in this call rather than on the loop's next turn
    /// (the write event's), which every flight of a handshake would otherwise wait for on its way
    /// to the first byte; what the socket does not take (or a failed send, which libevent's own
    /// write then meets and reports) goes through the output buffer, behind nothing. A failed send
    /// takes the socket's pending error, so libevent's write meets EPIPE after it: the close line
    /// says `reset` where a timed-out or unreachable peer would have said `failed` (as the fast
    /// relay's own writes do).
    private static func pass(_ count: Int, from input: OpaquePointer, to sink: BufferEvent) {
        guard count > 0 else { return }
        var sent = 0
        if evbuffer_get_length(sink.output) == 0 {
            var extents = Self.extents(of: input, count)
            var message = msghdr()
            sent = extents.withUnsafeMutableBufferPointer { extents in
                message.msg_iov = extents.baseAddress
                message.msg_iovlen = extents.count
                return max(0, sendmsg(sink.fd, &message, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)))
            }
            evbuffer_drain(input, sent)
        }
        copy(count - sent, from: input, to: sink.output)
    }

    /// The check's word on `side`'s held bytes, given after they arrived.
    private func decided(_ side: TunnelSide, _ inspection: Inspection) {
        guard onEnd != nil, sides != nil, self[side].inspected else { return }  // the fast stage needs no word
        switch inspection {
        case .hold:
            return
        case .pass(let count):
            forward(count, from: side)
        case .release, .done:
            if inspection == .done { self[side].inspected = false }
            forward(self[side].shown, from: side)
            move(from: side)  // what arrived since, shown to the check if it still looks
            if side == .upstream && upstreamClosedWhileHeld && onEnd != nil {
                upstreamClosedWhileHeld = false
                return event(on: .upstream, Int16(BEV_EVENT_EOF), errno: 0)  // the close, behind the bytes
            }
            goFastIfReady()
        case .refuse(let refusal):
            refused(refusal)
        }
    }

    /// Carries out what the book decided.
    private func take(_ steps: [RelayBook.Step]) {
        for step in steps {
            switch step {
            case .pauseReading(let side):
                // The write callback fires again once the other side has drained half of it.
                self[side.other].bev.setWatermark(EV_WRITE, low: RelayBook.maxQueued / 2, high: RelayBook.maxQueued)
                self[side].bev.disable(EV_READ)
            case .resumeReading(let side):
                self[side.other].bev.setWatermark(EV_WRITE, low: 0, high: 0)
                self[side].bev.enable(EV_READ)
            case .shutDownWrite(let side):
                self[side].bev.shutdownWrite()
            case .finished:
                end(.finished)
            }
        }
    }

    /// Copies rather than moves (`evbuffer_add_buffer`): libevent 2.1 reads 4 KiB at a time, each
    /// into a fresh 8 KiB chain, and moving those chains would keep each read in its own
    /// allocation — a stalled tunnel's 512 KiB would cost 1 MiB. Copied, the output packs densely.
    private static func copy(_ count: Int, from input: OpaquePointer, to output: OpaquePointer) {
        guard count > 0 else { return }
        let extents = extents(of: input, count)
        guard extents.reduce(0, { $0 + $1.iov_len }) == count else {  // rare: many small chains; moving them is still correct
            evbuffer_remove_buffer(input, output, count)
            return
        }
        for extent in extents { evbuffer_add(output, extent.iov_base, extent.iov_len) }
        evbuffer_drain(input, count)
    }

    /// Where the first `count` bytes of `input` lie, in at most 8 pieces (the last one cut at
    /// `count`); fewer bytes than `count` when they are spread over more chains than that.
    private static func extents(of input: OpaquePointer, _ count: Int) -> [iovec] {
        var extents = [iovec](repeating: iovec(), count: 8)  // evbuffer_iovec is a #define for iovec
        let needed = Int(evbuffer_peek(input, count, nil, &extents, Int32(extents.count)))
        extents.removeLast(extents.count - min(needed, extents.count))
        var left = count
        for index in extents.indices {
            extents[index].iov_len = min(extents[index].iov_len, left)
            left -= extents[index].iov_len
        }
        return extents
    }

    /// The side `to` has drained: lift the backpressure on the other side, and half-close when done.
    fileprivate func written(to side: TunnelSide) {
        take(book.drained(side, queued: evbuffer_get_length(self[side].bev.output)))
        goFastIfReady()
    }

    fileprivate func readable(_ side: TunnelSide) {
        move(from: side)
        goFastIfReady()
    }

    fileprivate func event(on side: TunnelSide, _ what: Int16, errno savedErrno: Int32) {
        // An error on either side ends the tunnel, whatever else is set: a write side that has
        // failed will never drain, so waiting for it would hold the tunnel until idle_timeout.
        if what & Int16(BEV_EVENT_ERROR) != 0 {
            return end(savedErrno == ECONNRESET || savedErrno == EPIPE ? .reset(side) : .failed(side))
        }
        if what & Int16(BEV_EVENT_EOF) != 0 {
            move(from: side)  // anything still buffered goes first
            if self[side].inspected && evbuffer_get_length(self[side].bev.input) > 0 {
                // A server that answered 0-RTT early data may send its whole flight, its response
                // and its close before the mirror has spoken: the close waits for the verdict.
                if side == .upstream, check?.holdsForAVerdict == true {
                    upstreamClosedWhileHeld = true
                    return
                }
                // The client left (before its hello was complete, or before the server, told of it,
                // closed): its own doing, said as such.
                if side == .client || book.client.sentEOF, let stage = check?.heldStage { return end(.clientLeft(stage)) }
                // The server hung up in the middle of a flight the check still holds: that never passes.
                return end(.refused(StreamRefusal(reason: .malformedTLS, detail: "the \(side.rawValue) closed before its first flight was complete")))
            }
            releaseEmptyInput(of: side)
            take(book.sentEOF(side, queuedAtOther: evbuffer_get_length(self[side.other].bev.output)))
        }
    }

    /// The read that met EOF left an empty chain in the side's input (libevent 2.1 reads up to 4 KiB
    /// into a chain of 8 KiB allocated before it knows the read returns 0), and the tunnel may wait
    /// long, half-closed, for its other side: 9,000 idle tunnels whose clients hung up at once held
    /// 36 MiB of these. Nothing reads this side again (libevent stopped reading at EOF), so the chain
    /// goes now. libevent frees chains only when a drain empties a buffer that is not empty, and keeps
    /// the input's end frozen between its own reads: one byte is added and drained under a thaw.
    private func releaseEmptyInput(of side: TunnelSide) {
        let input = self[side].bev.input
        guard evbuffer_get_length(input) == 0 else { return }
        var byte: UInt8 = 0
        evbuffer_unfreeze(input, 0)
        if evbuffer_add(input, &byte, 1) == 0 { evbuffer_drain(input, 1) }
        evbuffer_freeze(input, 0)
    }

    /// A timer that rearms itself until nothing moved for `idle_timeout`.
    private func armIdleTimer() {
        let remaining = idleTimeout - (ContinuousClock.now - lastActivity).seconds
        if idleTimer == nil {
            idleTimer = LoopEvent(loop: loop, fd: -1, what: 0) { [weak self] _ in
                guard let self else { return }
                if (ContinuousClock.now - lastActivity).seconds >= idleTimeout { end(.idle) } else { armIdleTimer() }
            }
        }
        idleTimer?.add(timeout: max(0.05, remaining))
    }

    /// A fatal `bad_certificate` alert in clear (RFC 5246 §7.2), written now: the client learns its
    /// handshake failed instead of seeing a bare close. The held server bytes never reach it.
    /// Straight to the socket: a bufferevent freezes the start of its output buffer, so nothing but
    /// the bufferevent may drain it, and the session frees it right after this. The output is empty
    /// here (the client has sent its hello, so it read our 200); if it is not, the alert is skipped.
    private func alertClient() {
        let alert: [UInt8] = [21, 3, 3, 0, 2, 2, 42]  // alert, TLS 1.2 record, length 2, fatal, bad_certificate
        let client = self[.client].bev
        guard evbuffer_get_length(client.output) == 0 else { return }
        _ = alert.withUnsafeBytes { send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    private func end(_ how: RelayEnd) {
        idleTimer = nil
        helloTimer = nil
        check?.stop()
        fast?.cancel()
        let done = onEnd
        onEnd = nil
        done?(how)
    }
}

// The C trampolines: non-capturing, they find the relay and hand the event over. The callback may
// drop the last reference to the relay (the session ends), so it stays alive until they return.
private func relay(_ ctx: UnsafeMutableRawPointer?, _ bev: OpaquePointer?) -> (Relay, OpaquePointer) {
    guard let ctx, let bev else { preconditionFailure("bufferevent callback without its relay or bufferevent") }
    return (Unmanaged<Relay>.fromOpaque(ctx).takeUnretainedValue(), bev)
}

private let relayReadCB: bufferevent_data_cb = { bev, ctx in
    let (r, bev) = relay(ctx, bev)
    withExtendedLifetime(r) { r.readable(r.side(of: bev)) }
}
private let relayWriteCB: bufferevent_data_cb = { bev, ctx in
    let (r, bev) = relay(ctx, bev)
    withExtendedLifetime(r) { r.written(to: r.side(of: bev)) }
}
private let relayEventCB: bufferevent_event_cb = { bev, what, ctx in
    let savedErrno = errno  // first thing: later calls overwrite it
    let (r, bev) = relay(ctx, bev)
    withExtendedLifetime(r) { r.event(on: r.side(of: bev), what, errno: savedErrno) }
}
