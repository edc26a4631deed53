import PinPolicy

extension Proxy {
    /// Why the proxy could not start.
    public enum StartError: Error, CustomStringConvertible {
        case cannotListen(SocketAddress, String)
        case openProxy(SocketAddress)
        case notAListeningSocket(Int32)
        case keyLog(String)
        /// Transparent mode cannot run safely (TransparentStart).
        case transparent(String)
        public var description: String {
            switch self {
            case .keyLog(let why), .transparent(let why): return why
            case .notAListeningSocket(let fd): return "fd \(fd) from socket activation is not an IP socket"
            case .cannotListen(let a, let why): return "cannot listen on \(a): \(why)"
            case .openProxy(let a):
                return "refusing to listen on \(a) (beyond loopback) without an explicit proxy.allow_clients list: pinproxy is never an open proxy by accident"
            }
        }
    }
}
