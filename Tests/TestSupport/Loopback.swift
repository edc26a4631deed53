import Foundation

/// Sockets on 127.0.0.1 for the tests that play a client, a taken port or a silent server by hand.
/// One copy of each, here, so every test reaches loopback the same way.

/// A socket of `type` bound to an ephemeral port on 127.0.0.1, and that port. The caller owns the
/// descriptor (closes it, or `listen`s on it to hold the port).
public func boundLoopbackSocket(type: Int32 = Int32(SOCK_STREAM.rawValue)) throws -> (fd: Int32, port: UInt16) {
    let fd = socket(AF_INET, type, 0)
    guard fd >= 0 else { throw HelperError(message: "socket failed") }
    var address = loopbackAddress(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else {
        close(fd)
        throw HelperError(message: "bind to 127.0.0.1 failed")
    }
    return (fd, UInt16(bigEndian: address.sin_port))
}

/// A port nothing listens on (bound, read, and released).
public func freePort() throws -> UInt16 {
    let (fd, port) = try boundLoopbackSocket()
    close(fd)
    return port
}

/// A blocking TCP socket connected to 127.0.0.1:port.
public func connectedSocket(port: UInt16) throws -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw HelperError(message: "socket failed") }
    var address = loopbackAddress(port: port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else {
        close(fd)
        throw HelperError(message: "connect to 127.0.0.1:\(port) failed")
    }
    return fd
}

/// What a blocking connect to 127.0.0.1:port ends with: 0 (connected, and closed again) or its
/// errno (`ECONNREFUSED` when nothing listens there).
public func connectOutcome(port: UInt16) -> Int32 {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return errno }
    defer { close(fd) }
    var address = loopbackAddress(port: port)
    let connected = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    return connected == 0 ? 0 : errno
}

/// Whether the peer closed (FIN or reset) within `seconds`, without reading a byte: a client that
/// never reads stays one.
public func closedByPeer(_ fd: Int32, within seconds: Double) -> Bool {
    let peerHangUp = Int16(0x2000)  // POLLRDHUP, which Swift's Glibc does not export
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        var ready = pollfd(fd: fd, events: peerHangUp, revents: 0)
        guard poll(&ready, 1, 100) > 0 else { continue }
        if ready.revents & (peerHangUp | Int16(POLLHUP) | Int16(POLLERR)) != 0 { return true }
    }
    return false
}

/// A client connection kept open by the test until `close()`.
public final class OpenConnection {
    public let fd: Int32

    /// Connects to 127.0.0.1:port and sends `text`.
    public init(port: UInt16, send text: String) throws {
        fd = try connectedSocket(port: port)
        sendText(text)
    }

    public func sendText(_ text: String) {
        _ = Array(text.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// What the proxy sends until the text ends with `suffix` (without one: until it closes), the
    /// connection ends or fails, or `timeout` passes; 1 MiB at most.
    public func receive(timeout: Double, until suffix: String? = nil) -> String {
        var tv = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(timeout)
        while received.count < 1 << 20 && Date() < deadline {
            if let suffix, String(decoding: received, as: UTF8.self).hasSuffix(suffix) { break }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0 { received += buffer[0..<n]; continue }
            if n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { break }
        }
        return String(decoding: received, as: UTF8.self)
    }

    public func close() { Glibc.close(fd) }
}

private func loopbackAddress(port: UInt16) -> sockaddr_in {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = port.bigEndian
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    return address
}
