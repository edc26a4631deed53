import CLibevent
import Foundation
import PinPolicy

/// `proxy.keylog`: follows the key-log file on the proxy's loop and hands each pending TLS 1.3
/// tunnel the server secrets its client wrote for its ClientHello's random. Made at start on the
/// supervisor's loop; sessions on every worker reach it through their worker's `WorkerKeyLog`. A
/// reload cannot move it (path and mode need a restart); `wait` follows the policy in force.
///
/// Thread-safe: the supervisor reads the file when inotify wakes it, a worker reads it before it
/// declares a line missing, and workers add and cancel watches; all of it under `lock` (recursive:
/// a delivery made while reading may cancel its own watch).
final class KeyLogIntake: @unchecked Sendable {
    private let lock = NSRecursiveLock()
    /// How long a pinned TLS 1.3 tunnel waits for its client's key line, in seconds.
    var wait: TimeInterval
    let settings: KeyLogSettings
    private let file: KeyLogFile
    private let book: KeyLogBook
    let loop: EventLoop
    private var event: OpaquePointer?
    /// Asks the intake's own loop to read on (a read that stopped at its bound).
    private let again: Mailbox
    /// Where bytes are read to; wiped after each chunk is parsed.
    private let buffer: UnsafeMutableRawBufferPointer
    private var reading = false
    /// Times the file was found truncated under us (by the unit or a client opening it with O_TRUNC).
    private(set) var truncations = 0

    init(loop: EventLoop, settings: KeyLogSettings, maxWatches: Int) throws(KeyLogFile.OpenError) {
        self.loop = loop
        self.settings = settings
        self.wait = settings.wait
        file = try KeyLogFile(path: settings.path, mode: settings.mode)
        // Allocated only once nothing can throw: a failed init runs no deinit to free it.
        buffer = .allocate(byteCount: 64 << 10, alignment: 16)
        book = KeyLogBook(capacity: maxWatches)
        again = Mailbox(loop: loop)
        event = event_new(loop.base, file.inotify, Int16(EV_READ | EV_PERSIST), { _, _, ctx in
            let intake = Unmanaged<KeyLogIntake>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(intake) { intake.notified() }
        }, Unmanaged.passUnretained(self).toOpaque())
        event_add(event, nil)
    }

    deinit {
        if let event { event_free(event) }
        explicit_bzero(buffer.baseAddress!, buffer.count)
        buffer.deallocate()
    }

    /// Interest in one client random (32 bytes) until the returned watch is cancelled or released.
    /// `deliver` runs on the loop for each kept line of that random. A full table (more watches than
    /// `max_tunnels`) gives an inert watch: the tunnel then sees no line, as if the client wrote none.
    /// `deliver` runs on the thread that reads the line (see `WorkerKeyLog`, which hands it to its
    /// worker), with the intake's lock held.
    func watch(clientRandom: [UInt8], _ deliver: @escaping (KeyLogDelivery) -> Void) -> KeyLogWatch {
        let id = lock.withLock { book.watch(clientRandom: clientRandom, now: .now, deliver) }
        return KeyLogWatch(intake: self, id: id, clientRandom: clientRandom)
    }

    fileprivate func cancel(id: Int, clientRandom: [UInt8]) {
        lock.withLock { book.cancel(id: id, clientRandom: clientRandom) }
    }

    /// Reads whatever the file holds now (a tunnel whose `wait` ran out asks before it gives up).
    func readNow() {
        lock.lock()
        defer { lock.unlock() }
        guard !reading else { return }  // a delivery asked from inside a read
        reading = true
        defer { reading = false }
        let (result, truncated) = file.readAppended(into: buffer, maxChunks: 64) { book.consume($0, now: .now) }
        if truncated {
            truncations += 1
            book.discardPartialLine()
        }
        // More than the bound was waiting: come back on the next turn of the loop instead of
        // starving the tunnels.
        // (Through a mailbox: a worker's read must not touch the supervisor's event base.)
        if result == .more, event != nil { again.post { [weak self] in self?.readNow() } }
    }

    private func notified() {
        lock.withLock {
            file.drainNotifications()
            readNow()
        }
    }

    /// On a clean stop: nothing stays in the file.
    func stop() {
        lock.lock()
        defer { lock.unlock() }
        if let event { event_free(event) }
        event = nil
        file.truncate()
        book.discardPartialLine()
    }

    var counters: KeyLogBook.Counters { lock.withLock { book.counters } }
    var watchCount: Int { lock.withLock { book.watchCount } }
    /// False when the file system refused to punch holes and the intake truncates instead.
    var punchesHoles: Bool { lock.withLock { file.punching } }
}

/// Interest in one client random's key lines; cancelled by `cancel()` or when released.
final class KeyLogWatch {
    private weak var intake: KeyLogIntake?
    private var id: Int?
    private let clientRandom: [UInt8]

    fileprivate init(intake: KeyLogIntake, id: Int?, clientRandom: [UInt8]) {
        self.intake = intake
        self.id = id
        self.clientRandom = clientRandom
    }

    /// Whether the watch was registered (false: the table was full, or the random not 32 bytes).
    var isActive: Bool { id != nil }

    func cancel() {
        guard let id else { return }
        self.id = nil
        intake?.cancel(id: id, clientRandom: clientRandom)
    }

    deinit { cancel() }
}

@available(*, unavailable) extension KeyLogWatch: Sendable {}

/// A worker's view of the key-log intake: the watches its tunnels make, their deliveries run on the
/// worker's own loop (the line may have been read on the supervisor's thread or another worker's),
/// its timers on its loop, and the `wait` of the snapshot the worker holds.
final class WorkerKeyLog: KeyLogSource, @unchecked Sendable {
    let intake: KeyLogIntake
    private let loop: EventLoop
    private let mailbox: Mailbox
    /// Deliveries read on another thread (or by `readNow`), waiting to run on this worker.
    private let pending = Locked([() -> Void]())
    /// Set by the worker from its snapshot (worker thread only).
    var waitSeconds: Double
    var path: String { intake.settings.path }

    init(intake: KeyLogIntake, loop: EventLoop, mailbox: Mailbox) {
        self.intake = intake
        self.loop = loop
        self.mailbox = mailbox
        waitSeconds = intake.settings.wait
    }

    func follow(clientRandom: [UInt8], _ deliver: @escaping (KeyLogDelivery) -> Void) -> AnyObject {
        let token = Following()
        let live = token.live
        token.watch = intake.watch(clientRandom: clientRandom) { [weak self] delivery in
            self?.handOver { if live.following { deliver(delivery) } }
        }
        return token
    }

    /// Reads the file on this thread, then runs what it (or an earlier read elsewhere) delivered
    /// here: the caller is about to declare a line missing and must see every line already read.
    func readNow() {
        intake.readNow()
        runPending()
    }

    func after(_ seconds: Double, _ action: @escaping () -> Void) -> AnyObject {
        Timer(loop: loop, after: seconds, action)
    }

    private func handOver(_ job: @escaping () -> Void) {
        let first = pending.withLock { queue -> Bool in
            queue.append(job)
            return queue.count == 1
        }
        if first { mailbox.post { [weak self] in self?.runPending() } }
    }

    private func runPending() {
        let jobs = pending.withLock { queue -> [() -> Void] in
            defer { queue = [] }
            return queue
        }
        for job in jobs { job() }
    }

    /// Whether the tunnel still follows (worker thread only): a delivery queued before it stopped is dropped.
    private final class Live { var following = true }

    private final class Following {
        let live = Live()
        var watch: KeyLogWatch?
        deinit {
            live.following = false
            watch?.cancel()
        }
    }
}
