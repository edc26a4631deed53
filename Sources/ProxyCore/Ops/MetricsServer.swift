import CLibevent
import Foundation
import PinPolicy

/// `proxy.metrics_listen`: `GET /metrics` over HTTP/1.x on a loopback address, answered on the
/// supervisor's loop with what `render` returns (Prometheus text format).
///
/// Why not evhttp, which served this before: libevent 2.1's evhttp has no connection limit and
/// its timeout restarts with every byte read, so a client sending its head one byte every 1.5 s
/// stayed connected for good, and two processes trickling thousands of such connections held the
/// proxy at its descriptor limit. A scrape needs very little of HTTP — one request line, a bounded
/// head, one answer, close — so this server is small enough to hold to hard bounds:
/// - at most `maxConnections` at once; one more is answered 503 and closed at once;
/// - `deadlineSeconds` from accept to the end of the answer, whatever the client sends or reads;
/// - a head of at most `maxHeaderBytes` (431 past it), parsed by `HTTPHead` (the strict parser the
///   plain-HTTP forwarder uses, fuzzed there);
/// - one answer per connection, always `Connection: close`, so a client that pipelines and never
///   reads holds one answer at most.
///
/// Owns its listener and its connections. Bound to the thread of the loop it was made on.
final class MetricsServer: LoopAcceptor {
    static let maxHeaderBytes = 8192
    /// Seconds a connection may live, from accept to the last byte of its answer.
    static let deadlineSeconds = 5.0
    /// A handful of scrapers at once is plenty; more is a client looping or an attack.
    static let maxConnections = 8

    private let loop: EventLoop
    private let listener: OpaquePointer
    private let render: () -> String
    /// Oldest first.
    private var connections: [OneAnswerConnection] = []
    private var acceptPause: Timer?
    /// The address it listens on (the port the kernel chose for port 0).
    let boundAddress: SocketAddress
    /// Connections answered 503 because `maxConnections` were open.
    private(set) var refusedConnections = 0

    enum StartError: Error, CustomStringConvertible {
        case cannotListen(SocketAddress, String)
        var description: String {
            switch self {
            case .cannotListen(let address, let why): return "cannot listen for metrics on \(address): \(why)"
            }
        }
    }

    init(loop: EventLoop, address: SocketAddress, render: @escaping () -> String) throws {
        self.loop = loop
        self.render = render
        var flags = UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC)
        if !address.ip.isIPv4 { flags |= UInt32(LEV_OPT_BIND_IPV6ONLY) }
        // Made disabled, with no context yet: `self` is not complete until every property is set.
        let made = address.withSockaddr { sa, length in
            evconnlistener_new_bind(loop.base, nil, nil, flags | UInt32(LEV_OPT_DISABLED), 16, sa, length)
        }
        guard let made else { throw StartError.cannotListen(address, errnoText(errno)) }
        listener = made
        boundAddress = SocketAddress.local(of: evconnlistener_get_fd(made)) ?? address
        // Unretained: `deinit` frees the listener, so no callback can run once the server is gone.
        let context = Unmanaged.passUnretained(self).toOpaque()
        evconnlistener_set_cb(made, loopAcceptCB, context)
        evconnlistener_set_error_cb(made, loopAcceptFailedCB)
        evconnlistener_enable(made)
    }

    deinit {
        connections.removeAll()
        evconnlistener_free(listener)
    }

    func accept(_ fd: Int32) {
        // Full: the oldest connection that has not sent its request yet makes room (a real scrape
        // sends it at once and is answered within a turn of the loop, so it never holds a slot
        // for long); only when all are being answered is the newcomer refused.
        if connections.count >= Self.maxConnections, let idle = connections.first(where: { !$0.answered }) {
            idle.close()
        }
        guard connections.count < Self.maxConnections else {
            refusedConnections += 1
            answerAndClose(fd, Self.answer(503, "Service Unavailable", "too many metrics connections at once; retry shortly\n",
                                           extra: "Retry-After: 1\r\n"))
            return
        }
        guard let side = BufferEvent(loop: loop, socket: fd) else { return }
        // One request head, bounded.
        connections.append(OneAnswerConnection(loop: loop, side: side, readLimit: Self.maxHeaderBytes + 1, deadline: Self.deadlineSeconds) { [weak self] received in
            guard let self else { return nil }
            let head = ConnectRequest.headLength(in: UnsafeRawBufferPointer(received))
            if let head, head <= Self.maxHeaderBytes { return answer(to: Array(received[..<head])) }
            guard head != nil || received.count > Self.maxHeaderBytes else { return nil }
            return Self.answer(431, "Request Header Fields Too Large", "the request head is over \(Self.maxHeaderBytes) bytes\n")
        } closed: { [weak self] connection in
            self?.connections.removeAll { $0 === connection }
        })
    }

    /// Out of descriptors: stop accepting for a second instead of spinning, as the proxy's own
    /// listeners do.
    func acceptFailed() { acceptPause = pauseAccepting(listener, on: loop) }

    /// The answer to one complete request head.
    private func answer(to head: [UInt8]) -> [UInt8] {
        guard case .success(let request) = HTTPHead.parse(head), request.start.2 == "HTTP/1.1" || request.start.2 == "HTTP/1.0" else {
            return Self.answer(400, "Bad Request", "not an HTTP/1.x request\n")
        }
        let (method, target, _) = request.start
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? target
        guard path == "/metrics" else { return Self.answer(404, "Not Found", "pinproxy serves only /metrics here\n") }
        guard method == "GET" else {
            // A HEAD answer has no content (RFC 9110 §9.3.2), only the length it would have.
            return Self.answer(405, "Method Not Allowed", "only GET /metrics\n", extra: "Allow: GET\r\n", withBody: method != "HEAD")
        }
        return Self.answer(200, "OK", render(), contentType: MetricsText.contentType)
    }

    static func answer(_ status: Int, _ phrase: String, _ body: String, contentType: String = "text/plain; charset=utf-8",
                       extra: String = "", withBody: Bool = true) -> [UInt8] {
        let bytes = Array(body.utf8)
        let head = "HTTP/1.1 \(status) \(phrase)\r\nContent-Type: \(contentType)\r\nContent-Length: \(bytes.count)\r\n\(extra)Connection: close\r\n\r\n"
        return Array(head.utf8) + (withBody ? bytes : [])
    }
}

@available(*, unavailable) extension MetricsServer: Sendable {}

/// Sends a short answer on a socket nobody else owns and closes it: half-close first and read what
/// the client already sent, so the close does not reset the answer away.
func answerAndClose(_ fd: Int32, _ answer: [UInt8]) {
    _ = answer.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
    shutdown(fd, Int32(SHUT_WR))
    var sink = [UInt8](repeating: 0, count: 4096)
    for _ in 0..<16 where recv(fd, &sink, sink.count, Int32(MSG_DONTWAIT)) > 0 {}
    close(fd)
}
