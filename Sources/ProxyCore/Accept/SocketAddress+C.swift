import CLibevent
import Foundation
import PinPolicy

extension SocketAddress {
    /// Calls `body` with this address as a `sockaddr`.
    func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, Int32) -> T) -> T {
        var storage = sockaddr_storage()
        let length: Int
        if ip.isIPv4 {
            var sin = sockaddr_in()
            sin.sin_family = sa_family_t(AF_INET)
            sin.sin_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin.sin_addr) { $0.copyBytes(from: ip.bytes) }
            withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: sin) { dst.copyMemory(from: $0) } }
            length = MemoryLayout<sockaddr_in>.size
        } else {
            var sin6 = sockaddr_in6()
            sin6.sin6_family = sa_family_t(AF_INET6)
            sin6.sin6_port = port.bigEndian
            withUnsafeMutableBytes(of: &sin6.sin6_addr) { $0.copyBytes(from: ip.bytes) }
            withUnsafeMutableBytes(of: &storage) { dst in withUnsafeBytes(of: sin6) { dst.copyMemory(from: $0) } }
            length = MemoryLayout<sockaddr_in6>.size
        }
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, Int32(length)) }
        }
    }

    /// The address in a `sockaddr` (IPv4 or IPv6), or nil.
    init?(_ address: UnsafePointer<sockaddr>) {
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            let sin = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in.self)
            let bytes = withUnsafeBytes(of: sin.sin_addr) { Array($0) }
            self.init(ip: IPAddress(bytes: bytes)!, port: UInt16(bigEndian: sin.sin_port))
        case AF_INET6:
            let sin6 = UnsafeRawPointer(address).loadUnaligned(as: sockaddr_in6.self)
            let bytes = withUnsafeBytes(of: sin6.sin6_addr) { Array($0) }
            self.init(ip: IPAddress(bytes: bytes)!, port: UInt16(bigEndian: sin6.sin6_port))
        default:
            return nil
        }
    }

    /// The local address a socket is bound to.
    static func local(of fd: Int32) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard ok == 0 else { return nil }
        return withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0) } }
    }
}

/// Sets TCP_NODELAY: tunnels carry TLS records whose latency matters more than segment count.
func setNoDelay(_ fd: Int32) {
    var one: Int32 = 1
    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
}

/// Makes the socket's close send a reset (SO_LINGER of 0): no FIN to wait for, no orphaned socket
/// left behind. For a connection shed in a flood, never one with data still to deliver.
func setAbortiveClose(_ fd: Int32) {
    var abort = linger(l_onoff: 1, l_linger: 0)
    _ = setsockopt(fd, SOL_SOCKET, SO_LINGER, &abort, socklen_t(MemoryLayout<linger>.size))
}

/// Whether the peer has already closed or reset a socket that holds no byte from it (a connection
/// that leaves without a word). One non-blocking peek: bytes waiting, or nothing yet, say no.
func peerLeftWithoutAByte(_ fd: Int32) -> Bool {
    var byte: UInt8 = 0
    let got = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
    return got == 0 || (got < 0 && errno == ECONNRESET)
}

func errnoText(_ code: Int32) -> String { String(cString: strerror(code)) }
