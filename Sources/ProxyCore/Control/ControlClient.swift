import Foundation

/// The CLI's side of the control socket: sends one request line and reads the answer to the end
/// (the server closes after one). Blocking, with a timeout on every read and write, and a cap on
/// what it keeps of an answer.
public enum ControlClient {
    /// Longer than the server's own deadline, so the server's answer (or close) comes first.
    public static let timeoutSeconds = 10
    /// Far more than a list of every quarantine of a busy proxy.
    public static let maxAnswerBytes = 4 << 20

    public enum Failure: Error, CustomStringConvertible {
        /// No socket file, or nobody accepts on it.
        case notRunning(path: String, why: String)
        /// The socket's mode keeps this user out.
        case refused(path: String, why: String)
        case failed(path: String, why: String)

        public var description: String {
            switch self {
            case .notRunning(let path, let why):
                return "cannot reach the control socket \(path): \(why); is pinproxy running with proxy.control_socket: \(path)?"
            case .refused(let path, let why):
                return "cannot connect to the control socket \(path): \(why); it is mode 0600, for pinproxy's user and root only: run this as root (sudo)"
            case .failed(let path, let why):
                return "control socket \(path): \(why)"
            }
        }
    }

    /// The answer to `request` (one line, without its newline) from the server at `path`.
    public static func ask(_ request: String, socket path: String) throws(Failure) -> String {
        guard let address = UnixSocketAddress(path: path) else { throw .failed(path: path, why: "the path does not fit a Unix socket address") }
        let fd = unixStreamSocket(nonBlocking: false)
        guard fd >= 0 else { throw .failed(path: path, why: "socket: \(errnoText(errno))") }
        defer { close(fd) }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard address.withSockaddr({ connect(fd, $0, $1) }) == 0 else {
            let code = errno
            switch code {
            case ENOENT, ECONNREFUSED, ENOTDIR: throw .notRunning(path: path, why: errnoText(code))
            case EACCES, EPERM: throw .refused(path: path, why: errnoText(code))
            default: throw .failed(path: path, why: "connect: \(errnoText(code))")
            }
        }
        let line = Array((request + "\n").utf8)
        // A stop and continue (^Z, fg) interrupts a call with a timeout (EINTR); a few are retried.
        var interruptions = 0
        var sent = 0
        while sent < line.count && interruptions < maxInterruptions {
            let n = line[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 && errno == EINTR {
                interruptions += 1
                continue
            }
            guard n > 0 else { throw .failed(path: path, why: "send: \(errnoText(errno))") }
            sent += n
        }
        var answer: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while answer.count <= maxAnswerBytes && interruptions < maxInterruptions {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n < 0 && errno == EINTR {
                interruptions += 1
                continue
            }
            if n == 0 { return String(decoding: answer, as: UTF8.self) }
            guard n > 0 else {
                let code = errno
                throw .failed(path: path, why: code == EAGAIN ? "no answer within \(timeoutSeconds) s" : "recv: \(errnoText(code))")
            }
            answer += buffer[..<n]
        }
        throw .failed(path: path, why: interruptions < maxInterruptions ? "the answer is over \(maxAnswerBytes) bytes" : "interrupted \(maxInterruptions) times")
    }

    private static let maxInterruptions = 16
}
