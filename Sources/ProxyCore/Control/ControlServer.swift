import CLibevent
import Foundation

/// `proxy.control_socket`: a Unix stream socket on the supervisor's loop where an operator lists
/// and lifts quarantines (`pinproxy quarantine`). One request line, one answer, close — held to
/// bounds like `MetricsServer`, so that a client can never stall the loop or hold it open:
/// - at most `maxConnections` at once; one more is answered `error busy` and closed at once;
/// - `deadlineSeconds` from accept to the end of the answer, whatever the client does;
/// - a request line of at most `maxLineBytes` (its newline included); a longer one is answered
///   `error` without being read further.
///
/// Owns its listener, its connections and the socket file (removed when the server goes). Bound to
/// the thread of the loop it was made on.
final class ControlServer {
    /// The longest request is `quarantine lift ` and a host:port: a DNS name is 253 bytes at most.
    static let maxLineBytes = 512
    static let deadlineSeconds = 5.0
    /// One operator at a time is the use; a few allow a script and a person together.
    static let maxConnections = 4

    private let loop: EventLoop
    private let listener: OpaquePointer
    private let file: ControlSocketFile
    private let answer: (String) -> String
    /// Oldest first.
    private var connections: [ControlConnection] = []
    private var acceptPause: Timer?

    var path: String { file.path }

    enum StartError: Error, CustomStringConvertible {
        case inUse(String)
        case notASocket(String)
        case cannot(String, String)
        var description: String {
            switch self {
            case .inUse(let path):
                return "the control socket \(path) is in use: another process (another pinproxy?) accepts connections on it; stop it, or give this one another proxy.control_socket"
            case .notASocket(let path):
                return "proxy.control_socket \(path) exists and is not a socket; pinproxy replaces only a stale socket: remove the file or choose another path"
            case .cannot(let path, let why):
                return "cannot create the control socket \(path): \(why)"
            }
        }
    }

    init(loop: EventLoop, path: String, answer: @escaping (String) -> String) throws(StartError) {
        self.loop = loop
        self.answer = answer
        let (file, fd) = try ControlSocketFile.bind(at: path)
        let flags = UInt32(LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC | LEV_OPT_DISABLED)
        guard let made = evconnlistener_new(loop.base, nil, nil, flags, -1, fd) else {
            let why = errnoText(errno)
            close(fd)
            file.remove()
            throw .cannot(path, why)
        }
        self.file = file
        listener = made
        // Unretained: `deinit` frees the listener, so no callback can run once the server is gone.
        evconnlistener_set_cb(made, controlAcceptCB, Unmanaged.passUnretained(self).toOpaque())
        evconnlistener_set_error_cb(made, controlAcceptFailedCB)
        evconnlistener_enable(made)
    }

    deinit {
        connections.removeAll()
        evconnlistener_free(listener)
        file.remove()
    }

    fileprivate func accept(_ fd: Int32) {
        guard connections.count < Self.maxConnections else {
            answerAndClose(fd, Array("error busy: \(Self.maxConnections) control connections are open; retry shortly\n".utf8))
            return
        }
        guard let side = BufferEvent(loop: loop, socket: fd) else { return }
        let connection = ControlConnection(loop: loop, side: side, server: self)
        connections.append(connection)
        connection.start(deadline: Self.deadlineSeconds)
    }

    /// Out of descriptors: stop accepting for a second instead of spinning.
    fileprivate func acceptFailed() {
        evconnlistener_disable(listener)
        acceptPause = Timer(loop: loop, after: 1) { [weak self] in
            guard let self else { return }
            evconnlistener_enable(listener)
        }
    }

    fileprivate func closed(_ connection: ControlConnection) {
        connections.removeAll { $0 === connection }
    }

    /// The answer to one request line (without its newline).
    fileprivate func answer(to line: [UInt8]) -> [UInt8] {
        Array(answer(String(decoding: line, as: UTF8.self)).utf8)
    }
}

@available(*, unavailable) extension ControlServer: Sendable {}

/// One control client: read a line (bounded), answer once, close once the answer is out — all
/// before the server's deadline.
private final class ControlConnection {
    private let loop: EventLoop
    private let side: BufferEvent
    private weak var server: ControlServer?
    private var deadline: Timer?
    private var answered = false

    init(loop: EventLoop, side: BufferEvent, server: ControlServer) {
        self.loop = loop
        self.side = side
        self.server = server
    }

    func start(deadline seconds: Double) {
        deadline = Timer(loop: loop, after: seconds) { [weak self] in self?.close() }
        side.route(to: self, read: controlReadCB, write: controlWrittenCB, event: controlEventCB)
        side.setWatermark(EV_READ, low: 0, high: ControlServer.maxLineBytes + 1)
        side.enable(EV_READ)
    }

    fileprivate func readable() {
        guard !answered, let server else { return }
        let input = side.input
        let available = evbuffer_get_length(input)
        guard let bytes = evbuffer_pullup(input, available) else { return }
        let received = UnsafeBufferPointer(start: bytes, count: available)
        if let newline = received.firstIndex(of: 0x0a), newline < ControlServer.maxLineBytes {
            respond(server.answer(to: Array(received[..<newline])))
        } else if available >= ControlServer.maxLineBytes {
            respond(Array("error the request line is over \(ControlServer.maxLineBytes) bytes\n".utf8))
        }
    }

    private func respond(_ bytes: [UInt8]) {
        answered = true
        side.disable(EV_READ)  // one answer per connection: what else the client sends is not read
        evbuffer_drain(side.input, evbuffer_get_length(side.input))
        guard !bytes.isEmpty else { return written() }  // an empty list: nothing to wait for
        evbuffer_add(side.output, bytes, bytes.count)
    }

    /// The answer is out: half-close, read what the client sent after its line (bounded), then
    /// close — a close with unread bytes would reset the connection and could cut the answer.
    fileprivate func written() {
        guard answered else { return }
        side.shutdownWrite()
        var sink = [UInt8](repeating: 0, count: 4096)
        for _ in 0..<16 where recv(side.fd, &sink, sink.count, Int32(MSG_DONTWAIT)) > 0 {}
        close()
    }

    func close() {
        deadline = nil
        server?.closed(self)  // the last reference: the bufferevent is freed with this object
    }
}

private let controlAcceptCB: evconnlistener_cb = { _, fd, _, _, ctx in
    guard let ctx else { preconditionFailure("a control listener without its server") }
    let server = Unmanaged<ControlServer>.fromOpaque(ctx).takeUnretainedValue()
    withExtendedLifetime(server) { server.accept(fd) }
}

private let controlAcceptFailedCB: evconnlistener_errorcb = { _, ctx in
    guard let ctx else { preconditionFailure("a control listener without its server") }
    Unmanaged<ControlServer>.fromOpaque(ctx).takeUnretainedValue().acceptFailed()
}

private let controlReadCB: bufferevent_data_cb = { _, ctx in
    guard let ctx else { preconditionFailure("a control connection without its context") }
    let connection = Unmanaged<ControlConnection>.fromOpaque(ctx).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.readable() }
}

private let controlWrittenCB: bufferevent_data_cb = { _, ctx in
    guard let ctx else { preconditionFailure("a control connection without its context") }
    let connection = Unmanaged<ControlConnection>.fromOpaque(ctx).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.written() }
}

private let controlEventCB: bufferevent_event_cb = { _, _, ctx in
    guard let ctx else { preconditionFailure("a control connection without its context") }
    let connection = Unmanaged<ControlConnection>.fromOpaque(ctx).takeUnretainedValue()
    withExtendedLifetime(connection) { connection.close() }
}
