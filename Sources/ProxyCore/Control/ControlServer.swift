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
final class ControlServer: LoopAcceptor {
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
    private var connections: [OneAnswerConnection] = []
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
        evconnlistener_set_cb(made, loopAcceptCB, Unmanaged.passUnretained(self).toOpaque())
        evconnlistener_set_error_cb(made, loopAcceptFailedCB)
        evconnlistener_enable(made)
    }

    deinit {
        connections.removeAll()
        evconnlistener_free(listener)
        file.remove()
    }

    func accept(_ fd: Int32) {
        guard connections.count < Self.maxConnections else {
            answerAndClose(fd, Array("error busy: \(Self.maxConnections) control connections are open; retry shortly\n".utf8))
            return
        }
        guard let side = BufferEvent(loop: loop, socket: fd) else { return }
        // One request line, bounded.
        connections.append(OneAnswerConnection(loop: loop, side: side, readLimit: Self.maxLineBytes + 1, deadline: Self.deadlineSeconds) { [weak self] received in
            guard let self else { return nil }
            if let newline = received.firstIndex(of: 0x0a), newline < Self.maxLineBytes { return answer(to: Array(received[..<newline])) }
            guard received.count >= Self.maxLineBytes else { return nil }
            return Array("error the request line is over \(Self.maxLineBytes) bytes\n".utf8)
        } closed: { [weak self] connection in
            self?.connections.removeAll { $0 === connection }
        })
    }

    /// Out of descriptors: stop accepting for a second instead of spinning.
    func acceptFailed() { acceptPause = pauseAccepting(listener, on: loop) }

    /// The answer to one request line (without its newline).
    private func answer(to line: [UInt8]) -> [UInt8] {
        Array(answer(String(decoding: line, as: UTF8.self)).utf8)
    }
}

@available(*, unavailable) extension ControlServer: Sendable {}
