import Foundation
import PinPolicy

/// Where a connection that the kernel redirected to a transparent listener was going: its original
/// destination, read once at accept from the socket's conntrack entry (`SO_ORIGINAL_DST` for IPv4,
/// `IP6T_SO_ORIGINAL_DST` for IPv6; nftables `redirect` and `dnat` both record it). A transparent
/// session treats it as the CONNECT its client never wrote: this address and port are the upstream,
/// never a DNS answer for the ClientHello's name.
struct TransparentOrigin: Equatable {
    /// The client's destination before the redirect.
    let original: SocketAddress
    /// The transparent listener it arrived on.
    let listener: SocketAddress

    /// `SO_ORIGINAL_DST` (linux/netfilter_ipv4.h) at level `SOL_IP`; `IP6T_SO_ORIGINAL_DST`
    /// (linux/netfilter_ipv6/ip6_tables.h) has the same number, at level `SOL_IPV6`.
    static let optionName: Int32 = 80

    /// The origin of a connection accepted on `fd`, or nil when it did not arrive on one of the
    /// transparent listeners (it came to a proxy port). A connection to a transparent port that no
    /// rule redirected has no conntrack NAT entry (or one naming the listener itself): its original
    /// destination is then the listener, which the session refuses as a loop.
    static func of(_ fd: Int32, listeners: [SocketAddress]) -> TransparentOrigin? {
        guard !listeners.isEmpty, let local = SocketAddress.local(of: fd) else { return nil }
        let listener = listeners.first { bound in
            bound.port == local.port && (bound.ip == local.ip || bound.ip.bytes.allSatisfy { $0 == 0 })
        }
        guard let listener else { return nil }
        return TransparentOrigin(original: originalDestination(fd, ipv6: !local.ip.isIPv4) ?? local, listener: listener)
    }

    /// The conntrack entry's original destination, or nil when the kernel has none for this socket.
    static func originalDestination(_ fd: Int32, ipv6: Bool) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let level = ipv6 ? Int32(IPPROTO_IPV6) : Int32(IPPROTO_IP)
        let rc = withUnsafeMutablePointer(to: &storage) { getsockopt(fd, level, optionName, $0, &length) }
        guard rc == 0 else { return nil }
        return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) } }.map {
            SocketAddress(ip: $0.ip.unmapped, port: $0.port)
        }
    }
}
