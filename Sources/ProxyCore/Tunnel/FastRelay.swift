import CLibevent
import Foundation
import PinPolicy

/// What one direction of a fast relay did.
enum Pumped: Equatable {
    /// Read `count` bytes (0: nothing was waiting) and passed on what the other side took; the
    /// rest is held (`Conduit.held`).
    case moved(Int)
    /// The sender closed its write half.
    case eof
    /// Reading the sender failed with this errno.
    case readFailed(Int32)
    /// Writing to the receiver failed with this errno.
    case writeFailed(Int32)
}

/// One direction of a fast relay: moves what one socket sent to the other and keeps only what the
/// receiver did not take at once. The relay reads the sender again only when nothing is held, so a
/// direction never holds more than one block (its backpressure bound). Two implementations:
/// `CopyConduit` (read/write) and `SpliceConduit` (splice through a pipe).
protocol Conduit: AnyObject {
    /// Bytes read from the sender and not yet written to the receiver.
    var held: Int { get }
    /// Reads what the sender has (a bounded number of blocks) and writes it to the receiver.
    func pump(from sender: Int32, to receiver: Int32) -> Pumped
    /// Writes what is held to the receiver; `.moved(0)` when it went out or must wait.
    func flush(to receiver: Int32) -> Pumped
}

/// At most this many blocks per readiness callback: enough to save epoll round trips on a bulk
/// stream, few enough that one tunnel cannot starve the loop's other tunnels.
private let blocksPerWakeup = 4

private func wouldBlock(_ code: Int32) -> Bool { code == EAGAIN || code == EWOULDBLOCK || code == EINTR }

/// Bytes read that wait for their receiver, in one allocation of exactly their size, owned:
/// `deinit` frees it.
final class PendingBytes {
    private let bytes: UnsafeMutableRawBufferPointer
    private var sent = 0

    init(copying source: UnsafeRawBufferPointer) {
        bytes = .allocate(byteCount: source.count, alignment: 1)
        bytes.copyMemory(from: source)
    }

    /// Takes everything out of an evbuffer.
    init(draining buffer: OpaquePointer) {
        bytes = .allocate(byteCount: evbuffer_get_length(buffer), alignment: 1)
        let taken = evbuffer_remove(buffer, bytes.baseAddress, bytes.count)
        precondition(bytes.count == 0 || taken == bytes.count, "an evbuffer with a frozen start")
    }

    deinit { bytes.deallocate() }

    var remaining: Int { bytes.count - sent }

    /// Sends what it can; `.moved(0)` when all went out or the receiver must drain first.
    func flush(to receiver: Int32) -> Pumped {
        guard let start = bytes.baseAddress else { return .moved(0) }  // nothing was held
        while sent < bytes.count {
            let n = send(receiver, start + sent, bytes.count - sent, Int32(MSG_NOSIGNAL))
            if n > 0 { sent += n; continue }
            if n < 0 && !wouldBlock(errno) { return .writeFailed(errno) }
            break
        }
        return .moved(0)
    }
}

/// Read/write through the loop's one scratch block; what the receiver does not take is copied into
/// a `PendingBytes`, freed once written. An idle direction owns no buffer.
final class CopyConduit: Conduit {
    private let shared: RelayShared
    private var pending: PendingBytes?

    init(shared: RelayShared) { self.shared = shared }

    var held: Int { pending?.remaining ?? 0 }

    func pump(from sender: Int32, to receiver: Int32) -> Pumped {
        let block = shared.scratch
        guard let start = block.baseAddress else { preconditionFailure("an empty scratch block") }
        var total = 0
        for _ in 0..<blocksPerWakeup {
            let got = read(sender, start, block.count)
            if got == 0 { return total > 0 ? .moved(total) : .eof }  // the EOF is read again next wakeup
            if got < 0 { return wouldBlock(errno) || total > 0 ? .moved(total) : .readFailed(errno) }
            total += got
            var put = 0
            while put < got {
                let n = send(receiver, start + put, got - put, Int32(MSG_NOSIGNAL))
                if n > 0 { put += n; continue }
                if n < 0 && !wouldBlock(errno) { return .writeFailed(errno) }
                break
            }
            if put < got {
                pending = PendingBytes(copying: UnsafeRawBufferPointer(rebasing: block[put..<got]))
                return .moved(total)
            }
            if got < block.count { break }  // the sender had no more for now
        }
        return .moved(total)
    }

    func flush(to receiver: Int32) -> Pumped {
        guard let pending else { return .moved(0) }
        let result = pending.flush(to: receiver)
        if pending.remaining == 0 { self.pending = nil }
        return result
    }
}

/// splice(2) from the sender into a pipe and from the pipe to the receiver: the bytes never enter
/// user space. The pipe comes from the loop's pool while bytes are in flight and goes back once it
/// is empty; a pipe that still holds bytes when the tunnel ends is closed with it.
final class SpliceConduit: Conduit {
    private let shared: RelayShared
    private var pipe: PipePair?
    private(set) var held = 0

    init(shared: RelayShared) {
        self.shared = shared
        shared.spliceConduits += 1
    }

    deinit {
        pipe = nil  // a pipe that still holds bytes closes with the tunnel
        shared.spliceConduits -= 1
    }

    func pump(from sender: Int32, to receiver: Int32) -> Pumped {
        guard let pipe = self.pipe ?? shared.takePipe() else { return .readFailed(errno) }  // out of descriptors
        self.pipe = pipe
        var total = 0
        defer { if held == 0 { shared.give(pipe); self.pipe = nil } }
        for _ in 0..<blocksPerWakeup {
            let got = pp_splice(sender, pipe.write, pipe.capacity)
            if got == 0 { return total > 0 ? .moved(total) : .eof }
            if got < 0 { return wouldBlock(errno) || total > 0 ? .moved(total) : .readFailed(errno) }
            total += got
            held += got
            if case .writeFailed(let code) = drain(pipe, to: receiver) { return .writeFailed(code) }
            if held > 0 || got < pipe.capacity { break }
        }
        return .moved(total)
    }

    func flush(to receiver: Int32) -> Pumped {
        guard let pipe else { return .moved(0) }
        let result = drain(pipe, to: receiver)
        if held == 0 {
            shared.give(pipe)
            self.pipe = nil
        }
        return result
    }

    private func drain(_ pipe: PipePair, to receiver: Int32) -> Pumped {
        while held > 0 {
            let n = pp_splice(pipe.read, receiver, held)
            if n > 0 { held -= n; continue }
            if n < 0 && !wouldBlock(errno) { return .writeFailed(errno) }
            break
        }
        return .moved(0)
    }
}

/// A pipe's two ends, owned: closed in `deinit`.
final class PipePair {
    let read: Int32
    let write: Int32
    /// How much the pipe holds (1 MiB when the system allows it, else the default 64 KiB).
    let capacity: Int

    static let wantedCapacity: Int32 = 1 << 20

    init?() {
        var fds: [Int32] = [0, 0]
        guard pipe(&fds) == 0 else { return nil }
        read = fds[0]
        write = fds[1]
        _ = fcntl(read, F_SETFL, O_NONBLOCK)
        _ = fcntl(write, F_SETFL, O_NONBLOCK)
        _ = fcntl(read, F_SETFD, FD_CLOEXEC)
        _ = fcntl(write, F_SETFD, FD_CLOEXEC)
        let size = pp_set_pipe_size(write, Self.wantedCapacity)
        capacity = size > 0 ? Int(size) : 64 * 1024
    }

    deinit {
        close(read)
        close(write)
    }
}

/// What the fast relays of one loop share: the copy relay's scratch block (the loop runs one
/// callback at a time, so one block serves every tunnel) and a few idle, empty pipes, kept only
/// while some splice tunnel is open (the last one to end closes them).
final class RelayShared {
    /// How much one read takes (the copy relay's block).
    static let blockSize = 256 * 1024
    /// Idle pipes kept for the next burst; more are closed when given back.
    static let maxIdlePipes = 16

    private var block: UnsafeMutableRawBufferPointer?
    private(set) var idlePipes: [PipePair] = []
    /// Open splice directions; at zero the idle pipes are closed.
    var spliceConduits = 0 {
        didSet { if spliceConduits == 0 { idlePipes.removeAll() } }
    }

    var scratch: UnsafeMutableRawBufferPointer {
        if let block { return block }
        let fresh = UnsafeMutableRawBufferPointer.allocate(byteCount: Self.blockSize, alignment: 64)
        block = fresh
        return fresh
    }

    func takePipe() -> PipePair? { idlePipes.popLast() ?? PipePair() }

    /// Takes back an empty pipe.
    func give(_ pipe: PipePair) {
        if idlePipes.count < Self.maxIdlePipes { idlePipes.append(pipe) }
    }

    deinit { block?.deallocate() }
}

/// The relay of a verified tunnel: once the stream check is done with both sides and the
/// bufferevents hold nothing, `Relay` hands it the two sockets. One `event` per socket and
/// direction of readiness; a side is read only while its conduit holds nothing, and while it
/// holds something the receiver's write event is armed instead (backpressure). Half-close, errors
/// and byte counts follow the same `RelayBook` as the bufferevent stage.
final class FastRelay {
    private struct Side {
        let fd: Int32
        let readEvent: LoopEvent
        /// Made the first time bytes for this side must wait for it to drain: most tunnels never
        /// meet backpressure, and an event costs a held tunnel about 200 bytes.
        var writeEvent: LoopEvent?
        /// What this side sent that waits for the other side.
        let outgoing: Conduit
        /// What this side sent during the bufferevent stage that had not reached the other side
        /// yet: it goes first.
        var carried: PendingBytes?

        /// Bytes from this side that wait for the other.
        var held: Int { (carried?.remaining ?? 0) + outgoing.held }
    }

    private var client: Side
    private var upstream: Side
    private let loop: EventLoop
    private(set) var book: RelayBook
    private(set) var lastActivity = ContinuousClock.now
    private var onEnd: ((RelayEnd) -> Void)?

    /// - Parameter carried: what each side sent that the bufferevents had not passed on yet.
    init(loop: EventLoop, method: RelayMethod, client clientFD: Int32, upstream upstreamFD: Int32, book: RelayBook,
         carried: (fromClient: PendingBytes?, fromUpstream: PendingBytes?), onEnd: @escaping (RelayEnd) -> Void) {
        self.book = book
        self.onEnd = onEnd
        self.loop = loop
        func side(_ fd: Int32, carrying: PendingBytes?) -> Side {
            let conduit: Conduit = method == .splice ? SpliceConduit(shared: loop.relayShared) : CopyConduit(shared: loop.relayShared)
            return Side(fd: fd,
                        readEvent: LoopEvent(loop: loop, fd: fd, what: Int16(EV_READ | EV_PERSIST)),
                        outgoing: conduit, carried: carrying.flatMap { $0.remaining > 0 ? $0 : nil })
        }
        client = side(clientFD, carrying: carried.fromClient)
        upstream = side(upstreamFD, carrying: carried.fromUpstream)
        // The actions need `self`, so they come once it is complete; no event is added before `start`.
        // An action may end the tunnel and drop the last reference to us: `guard let self` keeps us
        // until it returns.
        for side in [TunnelSide.client, .upstream] {
            self[side].readEvent.action = { [weak self] _ in
                guard let self else { return }
                readable(side)
            }
        }
    }

    /// Watches `side` for room to write, making its write event the first time.
    private func awaitWritable(_ side: TunnelSide) {
        if self[side].writeEvent == nil {
            let event = LoopEvent(loop: loop, fd: self[side].fd, what: Int16(EV_WRITE | EV_PERSIST))
            event.action = { [weak self] _ in
                guard let self else { return }
                writable(side)
            }
            self[side].writeEvent = event
        }
        self[side].writeEvent?.add()
    }

    /// Starts reading each side, or, when it has carried bytes, writing them to the other side first.
    func start() {
        for side in [TunnelSide.client, .upstream] {
            book[side].readPaused = self[side].carried != nil
            if self[side].carried != nil { awaitWritable(side.other) } else { self[side].readEvent.add() }
        }
    }

    /// The two sockets it carries (closed when it is freed).
    var sockets: [Int32] { [client.fd, upstream.fd] }

    /// Stops without calling back.
    func cancel() {
        onEnd = nil
        for side in [client, upstream] {
            side.readEvent.remove()
            side.writeEvent?.remove()
        }
    }

    deinit {
        for side in [client, upstream] {
            side.readEvent.cancel()  // the events go before the sockets they watch
            side.writeEvent?.cancel()
            close(side.fd)
        }
    }

    private subscript(side: TunnelSide) -> Side {
        get { side == .client ? client : upstream }
        set { if side == .client { client = newValue } else { upstream = newValue } }
    }

    /// `side` sent something (or hung up): pass it on.
    private func readable(_ side: TunnelSide) {
        let source = self[side], sink = self[side.other]
        switch source.outgoing.pump(from: source.fd, to: sink.fd) {
        case .moved(let count):
            guard count > 0 else { return }
            lastActivity = .now
            take(book.moved(count, from: side, queuedAtOther: source.held, limit: 1))
        case .eof:
            source.readEvent.remove()  // level-triggered: an EOF stays readable
            take(book.sentEOF(side, queuedAtOther: source.held))
        case .readFailed(let code):
            end(Self.failure(code, on: side))
        case .writeFailed(let code):
            end(Self.failure(code, on: side.other))
        }
    }

    /// `side` can take more of what the other side sent.
    private func writable(_ side: TunnelSide) {
        let sender = side.other
        if let carried = self[sender].carried {
            if case .writeFailed(let code) = carried.flush(to: self[side].fd) { return end(Self.failure(code, on: side)) }
            lastActivity = .now
            guard carried.remaining == 0 else { return }
            self[sender].carried = nil
        }
        if case .writeFailed(let code) = self[sender].outgoing.flush(to: self[side].fd) { return end(Self.failure(code, on: side)) }
        lastActivity = .now
        guard self[sender].held == 0 else { return }
        self[side].writeEvent?.remove()
        take(book.drained(side, queued: 0, limit: 1))
    }

    private func take(_ steps: [RelayBook.Step]) {
        for step in steps {
            switch step {
            case .pauseReading(let side):
                self[side].readEvent.remove()
                awaitWritable(side.other)
            case .resumeReading(let side):
                self[side].readEvent.add()
            case .shutDownWrite(let side):
                shutdown(self[side].fd, Int32(SHUT_WR))
            case .finished:
                end(.finished)
            }
        }
    }

    private static func failure(_ code: Int32, on side: TunnelSide) -> RelayEnd {
        code == ECONNRESET || code == EPIPE ? .reset(side) : .failed(side)
    }

    private func end(_ how: RelayEnd) {
        let done = onEnd
        cancel()
        done?(how)
    }
}
