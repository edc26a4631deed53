import Foundation

/// A filesystem Unix socket address (`sockaddr_un`), for the control socket's server and client.
struct UnixSocketAddress {
    private var address = sockaddr_un()
    private let length: socklen_t

    /// nil when `path` is empty or does not fit `sun_path` with its terminating NUL.
    init?(path: String) {
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path), !bytes.contains(0) else { return nil }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count + 1)
    }

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var copy = address
        return withUnsafePointer(to: &copy) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) } }
    }
}

/// A new AF_UNIX stream socket, close-on-exec (and non-blocking when asked); -1 with errno set.
func unixStreamSocket(nonBlocking: Bool) -> Int32 {
    socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | (nonBlocking ? Int32(SOCK_NONBLOCK.rawValue) : 0), 0)
}
