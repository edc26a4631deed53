import Foundation
import PinPolicy

/// What transparent mode checks before pinproxy serves: that it can mark its upstream sockets when
/// `proxy.transparent_mark` says so, and that its own upstream connections are not redirected back
/// into it (the loop the redirect rules must exempt pinproxy from, by uid or by mark).
///
/// The loop check is a canary: one connection, made exactly as an upstream one is (the mark set),
/// to a TEST-NET address on port 443 (RFC 5737 192.0.2.1, RFC 3849 2001:db8::1), which no network
/// routes. Unredirected, it fails or goes unanswered; redirected, a local socket accepts it at once.
/// As far as pinproxy can tell from inside: a rule that catches only some ports or destinations is
/// not seen, and the runtime loop refusal (an original destination that is pinproxy's own) stays.
enum TransparentStart {
    /// How long the canary waits for an answer that only a local redirect gives this fast.
    static let canaryWait: Int32 = 200  // ms

    static func check(_ settings: TransparentSettings) throws(Proxy.StartError) {
        guard settings.isOn else { return }
        UpstreamMark.set(settings.mark)
        if let mark = settings.mark {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            defer { if fd >= 0 { close(fd) } }
            if fd >= 0, case let code = UpstreamMark.apply(to: fd), code != 0 {
                throw .transparent("proxy.transparent_mark \(mark) cannot be set on pinproxy's upstream sockets: \(errnoText(code)); SO_MARK needs CAP_NET_ADMIN (give the unit AmbientCapabilities=CAP_NET_ADMIN, or exempt pinproxy by its uid with 'meta skuid' and leave transparent_mark out)")
            }
        }
        var families: [Bool] = []  // isIPv4
        for address in settings.listen where !families.contains(address.ip.isIPv4) { families.append(address.ip.isIPv4) }
        for isIPv4 in families {
            let canary = SocketAddress(ip: IPAddress(isIPv4 ? "192.0.2.1" : "2001:db8::1")!, port: 443)
            if redirected(canary) {
                throw .transparent("a connection pinproxy makes to \(canary) (a TEST-NET address no network routes) was accepted at once: the redirect rules send pinproxy's own upstream connections back to it, a loop; exempt them with 'meta skuid != pinproxy' or with proxy.transparent_mark and 'meta mark != MARK' (see /usr/share/pinproxy/transparent-host.nft)")
            }
        }
    }

    /// Whether a marked connection to `canary` completes within `canaryWait`.
    private static func redirected(_ canary: SocketAddress) -> Bool {
        let fd = socket(canary.ip.isIPv4 ? AF_INET : AF_INET6, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        guard UpstreamMark.apply(to: fd) == 0 else { return false }
        let rc = canary.withSockaddr { connect(fd, $0, socklen_t($1)) }
        if rc == 0 { return true }
        guard errno == EINPROGRESS else { return false }  // ENETUNREACH and kin: not redirected
        var waiting = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
        guard poll(&waiting, 1, canaryWait) == 1 else { return false }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        return error == 0
    }
}
