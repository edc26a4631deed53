import Foundation
import PinPolicy

/// One descriptor held back (/dev/null, opened at start) so that, out of descriptors, the proxy can
/// still take a waiting client off a listener's backlog and tell it so at once — a 503 — instead of
/// leaving it to its connect timeout while accepting is paused. The classic trick of servers that
/// must answer even at their limit.
///
/// Supervisor thread only.
final class ReserveDescriptor {
    private var fd: Int32

    init() { fd = open("/dev/null", O_RDONLY | O_CLOEXEC) }

    deinit { if fd >= 0 { close(fd) } }

    /// Whether the reserve is held (a worker may have taken its number between our close and our
    /// reopen; then every call tries again).
    var isHeld: Bool { fd >= 0 }

    /// Gives the reserve up, accepts one connection from `listener` (a listening socket) into its
    /// place, sends it `answer` (only if `allowed` says the client may hear from us: others are just
    /// closed), closes it, and takes the reserve back. False when nothing was accepted (no reserve to
    /// give, the backlog empty, or another thread took the freed number first).
    func answerOne(from listener: Int32, with answer: [UInt8], allowed: (SocketAddress) -> Bool) -> Bool {
        if fd < 0 { fd = open("/dev/null", O_RDONLY | O_CLOEXEC) }
        guard fd >= 0 else { return false }
        close(fd)
        defer { fd = open("/dev/null", O_RDONLY | O_CLOEXEC) }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        // accept4 is behind _GNU_SOURCE, which Swift's Glibc lacks
        let client = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { accept(listener, $0, &length) }
        }
        guard client >= 0 else { return false }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        let peer = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) } }
        if let peer, allowed(peer) {
            answerAndClose(client, answer)
        } else {
            close(client)
        }
        return true
    }
}
