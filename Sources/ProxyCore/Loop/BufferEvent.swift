import CLibevent
import Foundation

/// A socket bufferevent, owned: `deinit` frees it (and, `BEV_OPT_CLOSE_ON_FREE`, closes its socket),
/// so it lives exactly as long as whoever holds it.
final class BufferEvent {
    let ref: OpaquePointer
    /// Kept so the base outlives the bufferevent.
    private let loop: EventLoop

    /// Takes the socket; closes it when no bufferevent can be made.
    ///
    /// Callbacks are not deferred (no `BEV_OPT_DEFER_CALLBACKS`): libevent calls them last in its own
    /// read and write handlers, never from inside a call of ours, so nothing re-enters. Deferred, an
    /// event waited a loop turn: a read that met EOF kept the chain libevent allocated for it until
    /// then, and one epoll turn hands over up to 4,096 sockets, so when thousands of tunnels' peers
    /// hung up together their chains piled up above what the tunnels held (the teardown peak).
    /// One callback is deferred whatever the options: a read callback that leaves the input at the
    /// read watermark with reading on is called again, and again, without end (see
    /// `Session.onReadable`).
    init?(loop: EventLoop, socket fd: Int32) {
        let options = Int32(BEV_OPT_CLOSE_ON_FREE.rawValue)
        guard let ref = bufferevent_socket_new(loop.base, fd, options) else {
            close(fd)
            return nil
        }
        self.ref = ref
        self.loop = loop
    }

    deinit {
        bufferevent_setcb(ref, nil, nil, nil, nil)
        bufferevent_free(ref)
    }

    var input: OpaquePointer { bufferevent_get_input(ref) }
    var output: OpaquePointer { bufferevent_get_output(ref) }
    var fd: Int32 { bufferevent_getfd(ref) }

    /// The close that frees this socket sends a reset (`setAbortiveClose`).
    func abortOnClose() { setAbortiveClose(fd) }

    /// Who the callbacks go to, if anyone.
    private var target: ObjectIdentifier?

    /// Routes this bufferevent's callbacks to `target` (read, write, event), with `target` as an
    /// unretained context. Safe while `target` holds this bufferevent alone (its `deinit` frees the
    /// callbacks with it); a target that shares it calls `unroute(from:)` in its `deinit`.
    func route(to target: AnyObject, read: bufferevent_data_cb?, write: bufferevent_data_cb?, event: bufferevent_event_cb?) {
        self.target = ObjectIdentifier(target)
        bufferevent_setcb(ref, read, write, event, Unmanaged.passUnretained(target).toOpaque())
    }

    /// Clears the callbacks if they still go to `target` (which is going away); a later `route`
    /// to someone else is left alone.
    func unroute(from target: AnyObject) {
        guard self.target == ObjectIdentifier(target) else { return }
        self.target = nil
        bufferevent_setcb(ref, nil, nil, nil, nil)
    }

    func enable(_ what: Int32) { bufferevent_enable(ref, Int16(what)) }
    func disable(_ what: Int32) { bufferevent_disable(ref, Int16(what)) }
    func setWatermark(_ what: Int32, low: Int, high: Int) { bufferevent_setwatermark(ref, Int16(what), low, high) }
    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Hands the socket over: no more callbacks or events, and the bufferevent forgets the socket
    /// (`bufferevent_setfd(-1)`), so freeing it no longer closes it. The caller now owns the fd.
    func takeSocket() -> Int32 {
        let fd = self.fd
        target = nil
        bufferevent_setcb(ref, nil, nil, nil, nil)
        bufferevent_disable(ref, Int16(EV_READ | EV_WRITE))
        bufferevent_setfd(ref, -1)
        return fd
    }

    /// Takes what waits in the output buffer, once the socket is taken: the bufferevent keeps the
    /// start of its output frozen (only it may drain it), so it is thawed first.
    func takeOutput() -> PendingBytes {
        evbuffer_unfreeze(output, 1)
        return PendingBytes(draining: output)
    }
}
