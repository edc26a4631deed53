import Foundation

/// A connected pair of Unix stream sockets, both non-blocking, closed in `deinit`: a stand-in for a
/// tunnel's client or upstream socket (`near` is the relay's end, `far` the peer's).
public final class SocketPair {
    /// -1 once handed over to a relay, which closes it.
    public private(set) var near: Int32
    public let far: Int32

    public init() {
        var fds: [Int32] = [0, 0]
        precondition(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds) == 0, "socketpair: \(errno)")
        near = fds[0]
        far = fds[1]
        for fd in fds { _ = fcntl(fd, F_SETFL, O_NONBLOCK) }
    }

    deinit {
        if near >= 0 { close(near) }
        close(far)
    }

    /// Gives the relay's end to an owner that closes it.
    public func handOver() -> Int32 {
        defer { near = -1 }
        return near
    }

    /// The peer writes as much of `bytes` as the socket takes; returns how much.
    @discardableResult
    public func peerSends(_ bytes: [UInt8]) -> Int {
        var put = 0
        while put < bytes.count {
            let n = bytes[put...].withUnsafeBytes { send(far, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { break }
            put += n
        }
        return put
    }

    /// Everything the peer can read now (without waiting).
    public func peerReceives() -> [UInt8] {
        var out: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = recv(far, &buffer, buffer.count, 0)
            guard n > 0 else { return out }
            out += buffer[0..<n]
        }
    }

    /// Makes the relay's end take little at a time, so a write soon finds it full.
    public func shrinkBuffers() {
        var size: Int32 = 4096
        setsockopt(near, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        setsockopt(far, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
    }
}

/// Runs `body` with SIGPIPE blocked on this thread and then takes the SIGPIPE it raised:
/// splice(2) into a socket whose peer is gone raises one (the proxy ignores SIGPIPE for the whole
/// process; a test must not change that for every other test).
public func withoutSIGPIPE<T>(_ body: () -> T) -> T {
    var pipeSignal = sigset_t(), saved = sigset_t()
    sigemptyset(&pipeSignal)
    sigaddset(&pipeSignal, SIGPIPE)
    pthread_sigmask(SIG_BLOCK, &pipeSignal, &saved)
    defer {
        var now = timespec(tv_sec: 0, tv_nsec: 0)
        while sigtimedwait(&pipeSignal, nil, &now) == SIGPIPE {}
        pthread_sigmask(SIG_SETMASK, &saved, nil)
    }
    return body()
}
