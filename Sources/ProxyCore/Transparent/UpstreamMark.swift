import Foundation

/// `proxy.transparent_mark`: the `SO_MARK` put on every socket pinproxy opens upstream (probe,
/// mirror, confirming look, tunnel, plain forwarding — all made by `Connector`), so that the
/// operator's redirect rules can exempt them (`meta mark != MARK`) and they never loop back into the
/// transparent listener. Set once at start, before any worker runs; a restart changes it.
enum UpstreamMark {
    private static let current = Locked<UInt32?>(nil)

    static func set(_ mark: UInt32?) { current.withLock { $0 = mark } }

    /// Marks `fd` when a mark is configured: 0, or the errno of the failed `setsockopt` (EPERM
    /// without CAP_NET_ADMIN, which the start check has ruled out).
    static func apply(to fd: Int32) -> Int32 {
        guard var mark = current.withLock({ $0 }) else { return 0 }
        return setsockopt(fd, SOL_SOCKET, SO_MARK, &mark, socklen_t(MemoryLayout<UInt32>.size)) == 0 ? 0 : errno
    }
}
