import CLibevent
import Foundation
import PinPolicy

/// One listening socket: its `evconnlistener`, owned here and freed in `deinit`, so no accept or
/// error callback can run once the `Listener` is gone (its context is the `Listener` itself, kept
/// alive while a callback runs). Loop-bound: made, paused and freed on the supervisor's loop.
///
/// Accepting pauses for two reasons that may overlap: the workers are behind (the supervisor holds
/// and releases that one) and an accept failed (a one-second hold of its own, as httpd and NIO back
/// off). The socket accepts again only when neither holds.
final class Listener {
    enum Hold: Hashable {
        /// The workers have too many connections they have not taken yet.
        case workersBehind
        /// `accept` failed (out of descriptors, say): a second's pause instead of spinning.
        case acceptFailed
    }

    private let handle: OpaquePointer
    private let loop: EventLoop
    /// Where the socket is bound (port 0 resolved); nil only if `getsockname` failed.
    let boundAddress: SocketAddress?
    /// A connection taken off the backlog, with its peer (nil when it could not be read).
    private let onAccept: (Int32, SocketAddress?) -> Void
    /// `accept` failed with this errno; the answer decides whether to pause (`pauseAfterFailure`).
    private let onError: (Listener, Int32) -> Void
    private var holds: Set<Hold> = []
    private var failurePause: Timer?

    /// Listens on `address`; an IPv6 address listens on IPv6 only (a `[::]` and a `0.0.0.0` side by side).
    convenience init(loop: EventLoop, address: SocketAddress, onAccept: @escaping (Int32, SocketAddress?) -> Void,
                     onError: @escaping (Listener, Int32) -> Void) throws(Proxy.StartError) {
        var flags = UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC)
        if !address.ip.isIPv4 { flags |= UInt32(LEV_OPT_BIND_IPV6ONLY) }
        let made = address.withSockaddr { sa, length in
            evconnlistener_new_bind(loop.base, nil, nil, flags, Self.backlog, sa, length)
        }
        guard let made else { throw .cannotListen(address, errnoText(errno)) }
        Self.tune(evconnlistener_get_fd(made))
        self.init(loop: loop, handle: made, onAccept: onAccept, onError: onError)
    }

    /// Takes a listening socket systemd made for us (socket activation); closed with the `Listener`.
    convenience init(loop: EventLoop, adopting fd: Int32, address: SocketAddress, onAccept: @escaping (Int32, SocketAddress?) -> Void,
                     onError: @escaping (Listener, Int32) -> Void) throws(Proxy.StartError) {
        evutil_make_socket_nonblocking(fd)
        let flags = UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC)
        guard let made = evconnlistener_new(loop.base, nil, nil, flags, Self.backlog, fd) else {
            throw .cannotListen(address, errnoText(errno))
        }
        Self.tune(fd)
        self.init(loop: loop, handle: made, onAccept: onAccept, onError: onError)
    }

    /// Owns `handle` from here on. It was made without a callback (so disabled): the callbacks are set
    /// once `self` exists to be their context, which enables it.
    private init(loop: EventLoop, handle: OpaquePointer, onAccept: @escaping (Int32, SocketAddress?) -> Void,
                 onError: @escaping (Listener, Int32) -> Void) {
        self.handle = handle
        self.loop = loop
        self.onAccept = onAccept
        self.onError = onError
        boundAddress = SocketAddress.local(of: evconnlistener_get_fd(handle))
        evconnlistener_set_cb(handle, listenerAcceptCB, Unmanaged.passUnretained(self).toOpaque())  // safe: `deinit` frees it first
        evconnlistener_set_error_cb(handle, listenerErrorCB)
    }

    deinit { evconnlistener_free(handle) }

    /// The accept queue asked for: more than any kernel grants, so it is `net.core.somaxconn`
    /// (4,096 by default). libevent's own default, 128, fills in a moment under a flood of
    /// connections, and the kernel then drops every SYN, a real client's too (it tries again only
    /// a second later). A socket systemd made gets the same (`listen` again raises its queue).
    static let backlog: Int32 = 65535

    /// How long the kernel holds a connection that has sent no byte before passing it to `accept`
    /// (`TCP_DEFER_ACCEPT`, in seconds; the kernel rounds it to SYN-ACK retransmissions). A client of
    /// a proxy always speaks first, so a real client is handed over with its request; up to the
    /// listen backlog, a flood of connections that never speak waits in the kernel's SYN queue
    /// instead of taking descriptors and the workers' time. Past the backlog the kernel answers with
    /// SYN cookies, and those connections (a real client's too) are accepted before they speak, as
    /// without it; after the deferral a silent connection is accepted and handled as before
    /// (`header_timeout`, reaped oldest-first when there are too many).
    static let deferAcceptSeconds: Int32 = 1

    /// What every accepted socket inherits, set once on the listener instead of once per
    /// connection: TCP_NODELAY (a request head or a TLS record goes out at once). And the deferral.
    private static func tune(_ fd: Int32) {
        setNoDelay(fd)
        var seconds = deferAcceptSeconds
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_DEFER_ACCEPT, &seconds, socklen_t(MemoryLayout<Int32>.size))
    }

    /// The listening socket, for `ReserveDescriptor` to take one waiting client off it.
    var fd: Int32 { evconnlistener_get_fd(handle) }

    func hold(_ reason: Hold) {
        if holds.isEmpty { evconnlistener_disable(handle) }
        holds.insert(reason)
    }

    func release(_ reason: Hold) {
        guard holds.remove(reason) != nil, holds.isEmpty else { return }
        evconnlistener_enable(handle)
    }

    /// Stops accepting for a second after a failed `accept` (the backlog would fail again at once).
    func pauseAfterFailure() {
        hold(.acceptFailed)
        failurePause = Timer(loop: loop, after: 1) { [weak self] in
            guard let self else { return }
            failurePause = nil
            release(.acceptFailed)
        }
    }

    fileprivate func accepted(fd: Int32, from client: SocketAddress?) { onAccept(fd, client) }

    fileprivate func failed(errno code: Int32) { onError(self, code) }
}

@available(*, unavailable) extension Listener: Sendable {}

private let listenerAcceptCB: evconnlistener_cb = { _, fd, sa, _, ctx in
    guard let ctx else { preconditionFailure("listener accept callback without its Listener") }
    let listener = Unmanaged<Listener>.fromOpaque(ctx).takeUnretainedValue()
    withExtendedLifetime(listener) { listener.accepted(fd: fd, from: sa.flatMap { SocketAddress($0) }) }
}

private let listenerErrorCB: evconnlistener_errorcb = { _, ctx in
    let code = errno  // before anything else can overwrite it
    guard let ctx else { preconditionFailure("listener error callback without its Listener") }
    let listener = Unmanaged<Listener>.fromOpaque(ctx).takeUnretainedValue()
    withExtendedLifetime(listener) { listener.failed(errno: code) }
}
