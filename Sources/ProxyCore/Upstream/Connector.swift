import CLibevent
import Foundation
import PinPolicy

/// Opens a TCP connection to the first address that accepts, in order, with a per-address and a
/// total deadline. Only a *connect* failure moves on to the next address; running out of file
/// descriptors ends the attempt at once, because the next address would need one too.
///
/// With a `ParentHop`, the one address is the parent proxy's: once connected, the Connector sends
/// the hop's CONNECT and hands over the socket only when the parent answers 2xx (within the total
/// deadline), so what the caller gets is a byte stream to the target either way.
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
    /// The watch on `fd`: writable (connected or failed), then readable (the parent's answer).
    private var event: LoopEvent?
    /// How each address failed, in order.
    private var failures: [(address: SocketAddress, failure: Failure)] = []
    private let hop: ParentHop?
    /// The start of the parent's answer head, taken off the socket while the rest was awaited.
    private var answerSoFar: [UInt8] = []

    /// How one address failed.
    enum Failure: Equatable {
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

    init(loop: EventLoop, addresses: [SocketAddress], perAddress: Double, total: Double, through hop: ParentHop? = nil,
         completion: @escaping (Outcome) -> Void) {
        self.hop = hop
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
        event?.cancel()  // before the close: we may be inside its callback, where dropping it frees it later
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
        // Transparent mode: pinproxy's own connections carry proxy.transparent_mark (UpstreamMark).
        if case let code = UpstreamMark.apply(to: fd), code != 0 {
            failures.append((address, .refused(errno: code)))
            clear(closing: true)
            return tryNext()
        }
        let rc = address.withSockaddr { connect(fd, $0, socklen_t($1)) }
        if rc != 0 && errno != EINPROGRESS {
            failures.append((address, .refused(errno: errno)))
            clear(closing: true)
            return tryNext()
        }
        // The completion may drop the last reference to us: `guard let self` keeps us until it returns.
        let writable = LoopEvent(loop: loop, fd: fd, what: Int16(EV_WRITE)) { [weak self] what in
            guard let self else { return }
            onWritable(timedOut: what & Int16(EV_TIMEOUT) != 0)
        }
        event = writable
        writable.add(timeout: min(perAddress, left))
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
        if let hop { return askParent(hop, address: address) }
        handOver(address)
    }

    private func handOver(_ address: SocketAddress) {
        let connected = fd
        fd = -1
        clear(closing: false)
        setNoDelay(connected)
        let done = completion
        completion = nil
        done?(.connected(fd: connected, address: address))
    }

    /// Sends the CONNECT to the parent, then waits for its answer head.
    private func askParent(_ hop: ParentHop, address: SocketAddress) {
        event?.cancel()
        event = nil
        let request = hop.request
        let sent = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard sent == request.count else {  // a fresh socket's buffer takes a few hundred bytes whole
            let code = errno
            clear(closing: true)
            return fail(hop.failure(sent < 0 ? errnoText(code) : "it did not take the request"))
        }
        let answer = LoopEvent(loop: loop, fd: fd, what: Int16(EV_READ | EV_PERSIST)) { [weak self] what in
            guard let self else { return }
            onParentAnswer(timedOut: what & Int16(EV_TIMEOUT) != 0)
        }
        event = answer
        answer.add(timeout: max(0.001, deadline.timeIntervalSinceNow))
    }

    /// Reads the parent's answer head without taking a byte past it (peek, then consume exactly
    /// the head): whatever follows belongs to the tunnel.
    private func onParentAnswer(timedOut: Bool) {
        guard let hop, let address = current else { return }
        func failed(_ refusal: Refusal) {
            clear(closing: true)
            fail(refusal)
        }
        if timedOut { return failed(hop.failure("no answer within connect_total_timeout")) }
        var peeked = [UInt8](repeating: 0, count: ParentHop.maxAnswerBytes - answerSoFar.count)
        let n = peeked.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, Int32(MSG_PEEK)) }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
        if n < 0 { return failed(hop.failure(errnoText(errno))) }
        if n == 0 { return failed(hop.failure("it closed the connection without an answer")) }
        let seen = answerSoFar + peeked[0..<n]
        guard let length = seen.withUnsafeBytes({ ConnectRequest.headLength(in: $0) }) else {
            if seen.count == ParentHop.maxAnswerBytes { return failed(hop.failure("its answer head is over \(ParentHop.maxAnswerBytes) bytes")) }
            // More to come. What came is taken off the socket (the head's end is not in it, so none
            // of it is the tunnel's): left there, the socket stayed readable and the loop called
            // back at once, every turn, a core spinning until the parent sent the rest.
            _ = peeked.withUnsafeMutableBytes { recv(fd, $0.baseAddress, n, 0) }
            answerSoFar = seen
            // libevent restarts a persistent event's timeout whenever it fires: a parent sending
            // its head a piece at a time would push connect_total_timeout back with each piece.
            event?.add(timeout: max(0.001, deadline.timeIntervalSinceNow))
            return
        }
        let head = Array(seen[0..<length])
        _ = peeked.withUnsafeMutableBytes { recv(fd, $0.baseAddress, length - answerSoFar.count, 0) }
        switch ParentHop.parse(answer: head) {
        case .established: handOver(address)
        case .refused(let status, let phrase): failed(hop.refusal(status: status, phrase: phrase))
        case .malformed(let why): failed(hop.failure(why))
        }
    }

    /// Calls back with `refusal`, or with how the addresses failed (refused or timed out).
    private func fail(_ refusal: Refusal? = nil) {
        let done = completion
        completion = nil
        done?(.failed(refusal ?? Self.refusal(after: failures)))
    }

    /// What every address failing says: a timeout when each timed out, else a refused connection
    /// (`nothingListens` when each refused with ECONNREFUSED), naming each address and how it failed.
    static func refusal(after failures: [(address: SocketAddress, failure: Failure)]) -> Refusal {
        let detail = failures.isEmpty ? "no address to connect to" : failures.map { "\($0.address): \($0.failure.text)" }.joined(separator: "; ")
        let allTimedOut = !failures.isEmpty && failures.allSatisfy { $0.failure == .timedOut }
        guard !allTimedOut else { return .connectionTimeout(detail) }
        var refusal = Refusal.connectionRefused(detail)
        refusal.nothingListens = !failures.isEmpty && failures.allSatisfy { $0.failure == .refused(errno: ECONNREFUSED) }
        return refusal
    }
}
