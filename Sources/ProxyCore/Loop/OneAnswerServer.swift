import CLibevent

/// The owner of a small server's listener on a loop (the control socket, `/metrics`): what its
/// listener's callbacks call.
protocol LoopAcceptor: AnyObject {
    func accept(_ fd: Int32)
    func acceptFailed()
}

/// One connection of such a server: what its bufferevent's callbacks call.
protocol LoopConversation: AnyObject {
    func readable()
    func written()
    func close()
}

// The C trampolines, shared by every such server: non-capturing, they find the object and hand the
// event over. The callback may drop the last reference to it, so it stays alive until they return.
private func object<T>(_ ctx: UnsafeMutableRawPointer?, as type: T.Type) -> T {
    guard let ctx, let object = Unmanaged<AnyObject>.fromOpaque(ctx).takeUnretainedValue() as? T else {
        preconditionFailure("a loop callback without its \(type)")
    }
    return object
}

let loopAcceptCB: evconnlistener_cb = { _, fd, _, _, ctx in
    let server = object(ctx, as: LoopAcceptor.self)
    withExtendedLifetime(server) { server.accept(fd) }
}

let loopAcceptFailedCB: evconnlistener_errorcb = { _, ctx in
    object(ctx, as: LoopAcceptor.self).acceptFailed()
}

let conversationReadCB: bufferevent_data_cb = { _, ctx in
    let connection = object(ctx, as: LoopConversation.self)
    withExtendedLifetime(connection) { connection.readable() }
}

let conversationWrittenCB: bufferevent_data_cb = { _, ctx in
    let connection = object(ctx, as: LoopConversation.self)
    withExtendedLifetime(connection) { connection.written() }
}

let conversationEventCB: bufferevent_event_cb = { _, _, ctx in
    let connection = object(ctx, as: LoopConversation.self)
    withExtendedLifetime(connection) { connection.close() }
}

/// Out of descriptors: a small server stops accepting for a second instead of spinning, as the
/// proxy's own listeners do. Keep the timer for as long as the listener.
func pauseAccepting(_ listener: OpaquePointer, on loop: EventLoop) -> Timer {
    evconnlistener_disable(listener)
    return Timer(loop: loop, after: 1) { evconnlistener_enable(listener) }
}

/// One connection of a small server: read a request (bounded by the read watermark), answer it
/// once, close once the answer is out — all before a deadline.
final class OneAnswerConnection: LoopConversation {
    private let side: BufferEvent
    private var deadline: Timer?
    private(set) var answered = false
    /// The answer to what has arrived so far; nil while more is needed.
    private let answer: (UnsafeBufferPointer<UInt8>) -> [UInt8]?
    private let closed: (OneAnswerConnection) -> Void

    init(loop: EventLoop, side: BufferEvent, readLimit: Int, deadline seconds: Double,
         answer: @escaping (UnsafeBufferPointer<UInt8>) -> [UInt8]?, closed: @escaping (OneAnswerConnection) -> Void) {
        self.side = side
        self.answer = answer
        self.closed = closed
        deadline = Timer(loop: loop, after: seconds) { [weak self] in self?.close() }
        side.route(to: self, read: conversationReadCB, write: conversationWrittenCB, event: conversationEventCB)
        side.setWatermark(EV_READ, low: 0, high: readLimit)
        side.enable(EV_READ)
    }

    func readable() {
        guard !answered else { return }
        let input = side.input
        let available = evbuffer_get_length(input)
        guard let bytes = evbuffer_pullup(input, available), let answer = answer(UnsafeBufferPointer(start: bytes, count: available)) else { return }
        answered = true
        side.disable(EV_READ)  // one answer per connection: what else the client sends is not read
        evbuffer_drain(side.input, evbuffer_get_length(side.input))
        guard !answer.isEmpty else { return written() }  // nothing to wait for
        evbuffer_add(side.output, answer, answer.count)
    }

    /// The answer is out: half-close, read what the client sent after its request (bounded), then
    /// close — a close with unread bytes would reset the connection and could cut the answer.
    func written() {
        guard answered else { return }
        side.shutdownWrite()
        var sink = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<16 where recv(side.fd, &sink, sink.count, Int32(MSG_DONTWAIT)) > 0 {}
        close()
    }

    func close() {
        deadline = nil
        closed(self)  // the last reference: the bufferevent is freed with this object
    }
}

@available(*, unavailable) extension OneAnswerConnection: Sendable {}
