import Foundation

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

    /// Gives the reserve up, accepts one connection from `listener` (a listening socket) into its
    /// place, sends it `answer`, closes it, and takes the reserve back. False when nothing was
    /// accepted (no reserve held, the backlog empty, or another thread took the freed number first).
    func answerOne(from listener: Int32, with answer: [UInt8]) -> Bool {
        guard fd >= 0 else { return false }
        close(fd)
        defer { fd = open("/dev/null", O_RDONLY | O_CLOEXEC) }
        let client = accept(listener, nil, nil)  // accept4 is behind _GNU_SOURCE, which Swift's Glibc lacks
        guard client >= 0 else { return false }
        _ = fcntl(client, F_SETFD, FD_CLOEXEC)
        _ = fcntl(client, F_SETFL, fcntl(client, F_GETFL) | O_NONBLOCK)
        answerAndClose(client, answer)
        return true
    }
}
