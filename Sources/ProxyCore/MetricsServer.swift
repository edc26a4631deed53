import CLibevent
import Foundation
import PinPolicy

/// `proxy.metrics_listen`: `GET /metrics` over HTTP/1.1 on a loopback address, answered on the
/// proxy's own loop with what `render` returns (Prometheus text format). libevent's evhttp parses
/// the requests: it is part of the libevent pinproxy already links, maintained with it, and bounds
/// what a client may send (header size, body size, a timeout on every read and write), so there is
/// no second HTTP parser to write and fuzz for one endpoint.
///
/// Owns the evhttp (and through it the listener and every connection it accepted). Bound to the
/// thread of the loop it was made on.
final class MetricsServer {
    /// Request heads over this are refused (evhttp answers and closes); a scrape's is ~200 bytes.
    static let maxHeaderBytes = 8192
    /// A scrape has no body.
    static let maxBodyBytes = 1024
    /// Seconds a connection may take to send its request or to read the answer: a client that never
    /// sends, or never reads, is closed after this and holds nothing of the proxy's.
    static let timeoutSeconds: Int32 = 5

    private let http: OpaquePointer
    private let render: () -> String
    /// The address it listens on (the port the kernel chose for port 0).
    let boundAddress: SocketAddress

    enum StartError: Error, CustomStringConvertible {
        case cannotListen(SocketAddress, String)
        var description: String {
            switch self {
            case .cannotListen(let address, let why): return "cannot listen for metrics on \(address): \(why)"
            }
        }
    }

    init(loop: EventLoop, address: SocketAddress, render: @escaping () -> String) throws {
        var flags = UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE | LEV_OPT_CLOSE_ON_EXEC)
        if !address.ip.isIPv4 { flags |= UInt32(LEV_OPT_BIND_IPV6ONLY) }
        let listener = address.withSockaddr { sa, length in evconnlistener_new_bind(loop.base, nil, nil, flags, 16, sa, length) }
        guard let listener else { throw StartError.cannotListen(address, errnoText(errno)) }
        guard let http = evhttp_new(loop.base) else {
            evconnlistener_free(listener)
            throw StartError.cannotListen(address, "evhttp_new failed")
        }
        // evhttp takes the listener: evhttp_free frees it, and with it the socket.
        guard evhttp_bind_listener(http, listener) != nil else {
            evconnlistener_free(listener)
            evhttp_free(http)
            throw StartError.cannotListen(address, "evhttp_bind_listener failed")
        }
        // Out of file descriptors, a listener without an error callback would be called again at
        // once, forever: pause it for a second instead, as the proxy's own listeners do.
        evconnlistener_set_error_cb(listener, metricsAcceptFailedCB)
        self.http = http
        self.render = render
        self.boundAddress = SocketAddress.local(of: evconnlistener_get_fd(listener)) ?? address
        evhttp_set_max_headers_size(http, Self.maxHeaderBytes)
        evhttp_set_max_body_size(http, Self.maxBodyBytes)
        evhttp_set_timeout(http, Self.timeoutSeconds)
        // Every method evhttp knows reaches `handle`, which answers 405 for all but GET (evhttp's own
        // answer to a method it was told to refuse is a 501).
        let every = [EVHTTP_REQ_GET, EVHTTP_REQ_POST, EVHTTP_REQ_HEAD, EVHTTP_REQ_PUT, EVHTTP_REQ_DELETE, EVHTTP_REQ_OPTIONS,
                     EVHTTP_REQ_TRACE, EVHTTP_REQ_CONNECT, EVHTTP_REQ_PATCH].reduce(UInt16(0)) { $0 | UInt16($1.rawValue) }
        evhttp_set_allowed_methods(http, every)
        evhttp_set_gencb(http, metricsRequestCB, Unmanaged.passUnretained(self).toOpaque())
    }

    deinit { evhttp_free(http) }

    fileprivate func handle(_ request: OpaquePointer) {
        let path = evhttp_request_get_evhttp_uri(request).flatMap { evhttp_uri_get_path($0) }.map { String(cString: $0) }
        guard path == "/metrics" else {
            return reply(request, 404, "Not Found", "pinproxy serves only /metrics here\n")
        }
        guard evhttp_request_get_command(request) == EVHTTP_REQ_GET else {
            evhttp_add_header(evhttp_request_get_output_headers(request), "Allow", "GET")
            return reply(request, 405, "Method Not Allowed", "only GET /metrics\n")
        }
        reply(request, 200, "OK", render(), contentType: MetricsText.contentType)
    }

    private func reply(_ request: OpaquePointer, _ status: Int32, _ phrase: String, _ body: String,
                       contentType: String = "text/plain; charset=utf-8") {
        let headers = evhttp_request_get_output_headers(request)
        evhttp_add_header(headers, "Content-Type", contentType)
        // One request per connection: evhttp would answer pipelined requests while earlier answers
        // wait for a client that does not read, so a few KiB sent could pile up megabytes here.
        // Closed after each answer, a connection holds at most one (and a scraper just reconnects).
        evhttp_add_header(headers, "Connection", "close")
        let buffer = evbuffer_new()
        defer { evbuffer_free(buffer) }
        let bytes = Array(body.utf8)
        evbuffer_add(buffer, bytes, bytes.count)
        evhttp_send_reply(request, status, phrase, buffer)
    }
}

/// Not through the server object: evhttp made itself the listener's context. The one-second timer
/// is the base's; the listener outlives it, since the server is freed only after its loop has stopped.
private let metricsAcceptFailedCB: evconnlistener_errorcb = { listener, _ in
    guard let listener else { return }
    evconnlistener_disable(listener)
    var second = timeval(tv_sec: 1, tv_usec: 0)
    event_base_once(evconnlistener_get_base(listener), -1, Int16(EV_TIMEOUT), { _, _, arg in
        guard let arg else { return }
        evconnlistener_enable(OpaquePointer(arg))
    }, UnsafeMutableRawPointer(listener), &second)
}

private let metricsRequestCB: @convention(c) (OpaquePointer?, UnsafeMutableRawPointer?) -> Void = { request, ctx in
    guard let request, let ctx else { return }
    let server = Unmanaged<MetricsServer>.fromOpaque(ctx).takeUnretainedValue()
    withExtendedLifetime(server) { server.handle(request) }
}
