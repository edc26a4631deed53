import CLibevent
import PinPolicy
import Foundation

/// The mirror check's own connection to a pinned tunnel's upstream: opened at the same moment as
/// the tunnel's (same addresses, same parent hop, connect calls in random order), so that an
/// interceptor sees two connections it cannot tell apart by when they came. It carries the mirror
/// of the client's hellos, written in random order with the client's own within one loop turn,
/// and reads the server's answer for the mirror check; it never carries a byte of the client's.
///
/// Bound to its worker's loop thread.
final class MirrorConnection {
    /// Where the connection stands.
    private enum State {
        case connecting(Connector)
        case open(BufferEvent)
        /// It could not be made, or ended: how, for the log.
        case ended(End)
    }

    /// How the connection ended.
    enum End: Equatable {
        /// It was never made: the addresses failed before anything was sent (an interceptor cannot
        /// yet tell it from the tunnel's own connection).
        case connectFailed(String)
        /// The server closed it, reset it or it failed after it was made.
        case closed(String)
        /// pinproxy closed it.
        case closedByPinproxy
    }

    /// When the mirror's first bytes go out, against the client's hello that the relay forwards.
    enum Order {
        /// Written now, before the relay's write of the client's hello (which waits for its socket's
        /// write event).
        case beforeClient
        /// Written after this loop turn's socket writes: a zero timer runs after the I/O events.
        case afterClient

        static func random() -> Order { Bool.random() ? .beforeClient : .afterClient }
    }

    private let loop: EventLoop
    private var state: State
    /// Bytes to write once connected (a hello that came before the connect completed).
    private var queued: [UInt8] = []
    /// Bytes to write after this loop turn's socket writes, in order.
    private var deferred: [UInt8] = []
    private var sendTimer: Timer?
    /// The server's bytes on the mirror connection.
    var onBytes: ((UnsafeRawBufferPointer) -> Void)?
    /// The connection failed or the server closed it: why.
    var onEnd: ((End) -> Void)?
    /// Called once when the connect has completed or failed.
    var onSettled: (() -> Void)?
    /// Its share of the worker's mirror budget, given back as the connection ends.
    var ticket: MirrorBudget.Ticket?

    /// The connect has completed or failed: nothing more to wait for before the tunnel opens.
    var settled: Bool {
        if case .connecting = state { return false }
        return true
    }

    /// Starts connecting now (the caller starts the tunnel's connector in the same turn, in random
    /// order with this one).
    init(loop: EventLoop, addresses: [SocketAddress], perAddress: Double, total: Double, through hop: ParentHop?) {
        self.loop = loop
        state = .ended(.closedByPinproxy)
        let connector = Connector(loop: loop, addresses: addresses, perAddress: perAddress, total: total, through: hop) { [weak self] outcome in
            self?.connected(outcome)
        }
        if case .ended(.closedByPinproxy) = state { state = .connecting(connector) }  // a synchronous failure already ended it
    }

    deinit { close() }

    /// How it ended, once the network ended it.
    var ended: End? {
        if case .ended(let end) = state, end != .closedByPinproxy { return end }
        return nil
    }

    private func connected(_ outcome: Connector.Outcome) {
        switch outcome {
        case .failed(let refusal):
            end(.connectFailed(refusal.detail))
        case .connected(let fd, _):
            guard let bev = BufferEvent(loop: loop, socket: fd) else { return end(.connectFailed("bufferevent_socket_new failed")) }
            setNoDelay(fd)
            bev.route(to: self, read: mirrorReadCB, write: nil, event: mirrorEventCB)
            bev.enable(EV_READ)
            state = .open(bev)
            if !queued.isEmpty {
                let bytes = queued
                queued = []
                write(bytes)
            }
        }
        let settledNow = onSettled
        onSettled = nil
        settledNow?()
    }

    /// Sends `bytes` in `order` with the client's hello; queued until the connect completes.
    /// Every write that mirrors one of the client's goes through here, in its own random order
    /// with the client's (the hellos, a ChangeCipherSpec, early data); bytes never overtake
    /// earlier ones still waiting for their turn.
    func send(_ bytes: [UInt8], order: Order) {
        if order == .beforeClient && sendTimer == nil { return write(bytes) }
        deferred += bytes
        guard sendTimer == nil else { return }
        sendTimer = Timer(loop: loop, after: 0) { [weak self] in
            guard let self else { return }
            sendTimer = nil
            let bytes = deferred
            deferred = []
            write(bytes)
        }
    }

    /// Writes straight to the socket while nothing is queued (the bytes leave in this call), the
    /// rest through the bufferevent.
    private func write(_ bytes: [UInt8]) {
        switch state {
        case .connecting:
            queued += bytes
        case .open(let bev):
            var offset = 0
            if evbuffer_get_length(bev.output) == 0 {
                let sent = bytes.withUnsafeBytes { Glibc.send(bev.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if sent > 0 { offset = sent }
            }
            if offset < bytes.count {
                _ = bytes[offset...].withUnsafeBytes { evbuffer_add(bev.output, $0.baseAddress, $0.count) }
                bev.enable(EV_WRITE)
            }
        case .ended:
            break
        }
    }

    /// Closes the connection (the check has what it needs; pinproxy never sends its Finished).
    func close() {
        sendTimer = nil
        queued = []
        deferred = []
        switch state {
        case .connecting(let connector): connector.cancel()
        case .open, .ended: break
        }
        if ended == nil { state = .ended(.closedByPinproxy) }
        ticket = nil
        onBytes = nil
        onEnd = nil
        onSettled = nil
    }

    private func end(_ how: End) {
        sendTimer = nil
        deferred = []
        state = .ended(how)
        ticket = nil
        let done = onEnd
        onBytes = nil
        onEnd = nil
        done?(how)
    }

    fileprivate func readable() {
        guard case .open(let bev) = state else { return }
        let input = bev.input
        let count = evbuffer_get_length(input)
        guard count > 0, let bytes = evbuffer_pullup(input, count) else { return }
        // Copied out first: the callback may close this connection (and free the buffer).
        let copy = Array(UnsafeBufferPointer(start: bytes, count: count))
        evbuffer_drain(input, count)
        copy.withUnsafeBytes { onBytes?($0) }
    }

    fileprivate func event(_ what: Int16, errno code: Int32) {
        if what & Int16(BEV_EVENT_EOF) != 0 { return end(.closed("the server closed the mirror connection")) }
        if what & Int16(BEV_EVENT_ERROR) != 0 { return end(.closed(errnoText(code))) }
    }
}

// The C trampolines: non-capturing, they find the connection and hand the event over. The callback
// may drop the last reference to it, so it stays alive until they return.
private func mirror(_ ctx: UnsafeMutableRawPointer?) -> MirrorConnection {
    guard let ctx else { preconditionFailure("bufferevent callback without its mirror connection") }
    return Unmanaged<MirrorConnection>.fromOpaque(ctx).takeUnretainedValue()
}

private let mirrorReadCB: bufferevent_data_cb = { _, ctx in
    let m = mirror(ctx)
    withExtendedLifetime(m) { m.readable() }
}
private let mirrorEventCB: bufferevent_event_cb = { _, what, ctx in
    let savedErrno = errno
    let m = mirror(ctx)
    withExtendedLifetime(m) { m.event(what, errno: savedErrno) }
}

@available(*, unavailable) extension MirrorConnection: Sendable {}
