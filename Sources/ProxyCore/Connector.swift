import CLibevent
import Foundation
import PinPolicy

/// Opens a TCP connection to the first address that accepts, in order, with a per-address and a
/// total deadline. Only a *connect* failure moves on to the next address; running out of file
/// descriptors ends the attempt at once, because the next address would need one too.
final class Connector {
    enum Outcome {
        case connected(fd: Int32, address: SocketAddress)
        /// Every address failed; the refusal says how (refused or timed out, per address).
        case failed(Refusal)
    }

    private let loop: EventLoop
    private var remaining: [SocketAddress]
    private let perAddress: Double
    private let deadline: Date
    private var completion: ((Outcome) -> Void)?
    private var fd: Int32 = -1
    private var current: SocketAddress?
    private var event: OpaquePointer?
    /// How each address failed, in order.
    private var failures: [(address: SocketAddress, failure: Failure)] = []

    private enum Failure {
        case timedOut
        case refused(errno: Int32)
        case injected

        var text: String {
            switch self {
            case .timedOut: return "no answer within the connect timeout"
            case .refused(let code): return errnoText(code)
            case .injected: return TestFault.detail
            }
        }
    }

    init(loop: EventLoop, addresses: [SocketAddress], perAddress: Double, total: Double, completion: @escaping (Outcome) -> Void) {
        self.loop = loop
        self.remaining = addresses
        self.perAddress = perAddress
        self.deadline = Date().addingTimeInterval(total)
        self.completion = completion
        tryNext()
    }

    /// Stops without calling back (the session went away); closes any half-open socket.
    func cancel() {
        completion = nil
        clear(closing: true)
    }

    deinit { clear(closing: true) }

    private func clear(closing: Bool) {
        if let event { event_free(event) }
        event = nil
        if closing && fd >= 0 { close(fd) }
        fd = -1
    }

    private func tryNext() {
        let left = deadline.timeIntervalSinceNow
        guard let address = remaining.first, left > 0 else { return fail() }
        remaining.removeFirst()
        current = address
        if TestFault.connect.isInjected {
            failures.append((address, .injected))
            return tryNext()
        }
        fd = socket(address.ip.isIPv4 ? AF_INET : AF_INET6, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else {
            let code = errno
            if code == EMFILE || code == ENFILE {
                let which = code == EMFILE ? "pinproxy's limit (EMFILE)" : "the system's limit (ENFILE)"
                return fail(.outOfFileDescriptors("no socket for \(address): \(errnoText(code)), \(which); retry when tunnels have closed"))
            }
            failures.append((address, .refused(errno: code)))
            return tryNext()
        }
        let rc = address.withSockaddr { connect(fd, $0, socklen_t($1)) }
        if rc != 0 && errno != EINPROGRESS {
            failures.append((address, .refused(errno: errno)))
            clear(closing: true)
            return tryNext()
        }
        event = event_new(loop.base, fd, Int16(EV_WRITE), { _, what, ctx in
            // The callback may drop the last reference to us; stay alive until it returns.
            let connector = Unmanaged<Connector>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(connector) { connector.onWritable(timedOut: what & Int16(EV_TIMEOUT) != 0) }
        }, Unmanaged.passUnretained(self).toOpaque())
        var tv = min(perAddress, left).timeval
        event_add(event, &tv)
    }

    private func onWritable(timedOut: Bool) {
        guard let address = current else { return }
        if timedOut {
            failures.append((address, .timedOut))
            clear(closing: true)
            return tryNext()
        }
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length)
        if error != 0 {
            failures.append((address, .refused(errno: error)))
            clear(closing: true)
            return tryNext()
        }
        let connected = fd
        fd = -1
        clear(closing: false)
        setNoDelay(connected)
        let done = completion
        completion = nil
        done?(.connected(fd: connected, address: address))
    }

    /// Calls back with `refusal`, or with how the addresses failed (refused or timed out).
    private func fail(_ refusal: Refusal? = nil) {
        let detail = failures.isEmpty ? "no address to connect to" : failures.map { "\($0.address): \($0.failure.text)" }.joined(separator: "; ")
        let allTimedOut = !failures.isEmpty && failures.allSatisfy { if case .timedOut = $0.failure { true } else { false } }
        let refusal: Refusal = refusal ?? (allTimedOut ? .connectionTimeout(detail) : .connectionRefused(detail))
        let done = completion
        completion = nil
        done?(.failed(refusal))
    }
}
