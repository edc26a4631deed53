import Foundation

/// A Unix datagram socket standing in for journald: decodes native-protocol entries (`KEY=value`
/// lines, and `KEY\n<64-bit LE length><bytes>\n` for values with a newline).
public final class JournalListener {
    public let fd: Int32
    private var received: [[String: String]] = []

    public init(path: String) throws {
        fd = try boundDatagramSocket(path: path, receiveTimeoutMicroseconds: 100_000)
    }

    public static func decode(_ bytes: [UInt8]) -> [String: String]? {
        var fields: [String: String] = [:]
        var i = 0
        while i < bytes.count {
            guard let end = bytes[i...].firstIndex(where: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "=") }) else { return nil }
            let name = String(decoding: bytes[i..<end], as: UTF8.self)
            if bytes[end] == UInt8(ascii: "=") {
                let stop = bytes[end...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
                fields[name] = String(decoding: bytes[(end + 1)..<stop], as: UTF8.self)
                i = stop + 1
            } else {
                guard end + 9 <= bytes.count else { return nil }
                let length = bytes[(end + 1)..<(end + 9)].reversed().reduce(0) { $0 << 8 | Int($1) }
                guard end + 9 + length < bytes.count, bytes[end + 9 + length] == UInt8(ascii: "\n") else { return nil }
                fields[name] = String(decoding: bytes[(end + 9)..<(end + 9 + length)], as: UTF8.self)
                i = end + 10 + length
            }
        }
        return fields
    }

    /// Entries received so far, reading for up to `waiting` seconds more.
    public func entries(waiting: Double) -> [[String: String]] {
        let deadline = Date().addingTimeInterval(waiting)
        var buffer = [UInt8](repeating: 0, count: 1 << 17)
        repeat {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0, let entry = Self.decode(Array(buffer[0..<n])) { received.append(entry) }
        } while Date() < deadline
        return received
    }

    /// The first entry that satisfies `matching`, reading for at most 10 s.
    public func entry(_ matching: ([String: String]) -> Bool) -> [String: String]? {
        let deadline = Date().addingTimeInterval(10)
        var buffer = [UInt8](repeating: 0, count: 1 << 17)
        while Date() < deadline {
            if let found = received.first(where: matching) { return found }
            let n = recv(fd, &buffer, buffer.count, 0)
            if n > 0, let entry = Self.decode(Array(buffer[0..<n])) { received.append(entry) }
        }
        return received.first(where: matching)
    }

    deinit { close(fd) }
}

/// A Unix datagram socket bound at `path`, whose reads give up after the timeout: a stand-in for
/// journald or systemd's notify socket.
public func boundDatagramSocket(path: String, receiveTimeoutMicroseconds: Int) throws -> Int32 {
    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: Array(path.utf8)) }
    let ok = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
    guard ok == 0 else {
        close(fd)
        throw HelperError(message: "bind \(path) failed")
    }
    var tv = timeval(tv_sec: 0, tv_usec: receiveTimeoutMicroseconds)
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    return fd
}
