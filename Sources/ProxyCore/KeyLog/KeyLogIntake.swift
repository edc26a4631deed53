import CLibevent
import CShims
import Foundation
import Logging
import PinPolicy

/// `proxy.keylog`: follows the key-log file on a thread and loop of its own and hands each pending
/// TLS 1.3 tunnel the server secrets its client wrote for its ClientHello's random. Made at start;
/// sessions on every worker reach it through their worker's `WorkerKeyLog`. A reload cannot move it
/// (path and mode need a restart); `wait` follows the policy in force.
///
/// Its own thread because anyone may append to the file (mode 0622): a writer flooding it must cost
/// the loops that accept and relay nothing. The intake keeps up or skips ahead (`KeyLogFlood`), keeps
/// the file's blocks (RAM) bounded, and puts its own regular file back when the path is swapped for
/// something else (a FIFO would hang every writer in open()).
///
/// Threads: the file, the notifier and the flood gauge belong to the intake's thread; the book (and
/// which file is followed, for a new watch's start) is shared with the workers under `lock`
/// (recursive: a delivery made while reading may cancel its own watch).
final class KeyLogIntake: @unchecked Sendable {
    private let lock = NSRecursiveLock()
    let settings: KeyLogSettings
    private let logger: Logger
    let loop = EventLoop()
    private let mailbox: Mailbox
    /// Swapped (under `lock`) only on the intake's thread, when the path no longer names it.
    private var file: KeyLogFile
    private let notifier: KeyLogNotifier
    private let book: KeyLogBook
    private var flood = KeyLogFlood()
    /// The watch on the notifier; nil once stopping.
    private var notified: LoopEvent?
    /// Whether `notified` is armed; off while a flood paces the reads.
    private var armed = false
    /// The next turn while a flood paces the reads (one every `pace`).
    private var paced: Timer?
    private static let pace = 0.01
    /// FIFOs found at the path: held open (read and discarded) for a second, so a writer that was
    /// already on its way into open() is released too.
    private var fifos: [Int32] = []
    private var fifoTimer: Timer?
    private var replacedLog = LogThrottle(interval: .seconds(1))
    /// Where bytes are read to; wiped after each chunk is parsed.
    private let buffer: UnsafeMutableRawBufferPointer
    private var thread: pthread_t?
    private let exited = DispatchSemaphore(value: 0)
    private var waitValue: TimeInterval
    private var truncationCount = 0

    init(settings: KeyLogSettings, maxWatches: Int, logger: Logger) throws(KeyLogFile.OpenError) {
        self.settings = settings
        self.logger = logger
        waitValue = settings.wait
        file = try KeyLogFile(path: settings.path, mode: settings.mode)
        notifier = try KeyLogNotifier(path: settings.path)
        try notifier.follow(file)
        // Allocated only once nothing can throw: a failed init runs no deinit to free it.
        buffer = .allocate(byteCount: 64 << 10, alignment: 16)
        book = KeyLogBook(capacity: maxWatches)
        mailbox = Mailbox(loop: loop)
        let watch = LoopEvent(loop: loop, fd: notifier.fd, what: Int16(EV_READ | EV_PERSIST)) { [weak self] _ in self?.turn() }
        notified = watch
        watch.add()
        armed = true
    }

    deinit {
        notified = nil  // before the notifier it watches
        for fd in fifos { close(fd) }
        wipe(buffer.count)
        buffer.deallocate()
    }

    /// How long a pinned TLS 1.3 tunnel waits for its client's key line, in seconds (the policy in
    /// force; bytes older than this are worthless in a flood).
    var wait: TimeInterval {
        get { lock.withLock { waitValue } }
        set { lock.withLock { waitValue = newValue } }
    }

    // MARK: the thread

    /// Starts the intake's thread; what clients wrote before waits in the file.
    func start() {
        thread = LoopThread.start { [self] in
            turn()  // what was written before the loop ran
            loop.run()
            for job in mailbox.shut() { job() }  // a tunnel waiting on `readNow` still gets its answer
            exited.signal()
        }
    }

    /// On a clean stop: the thread ends, and nothing stays in the file.
    func stop() {
        if let thread {
            mailbox.post { [self] in
                notified?.cancel()
                notified = nil
                paced = nil
                fifoTimer = nil
                closeFIFOs()
                loop.stop()
            }
            if exited.wait(timeout: .now() + 5) == .success { pthread_join(thread, nil) }
            self.thread = nil
        }
        lock.withLock {
            file.truncate()
            book.discardPartialLine()
        }
    }

    // MARK: for the workers

    /// Interest in one client random (32 bytes) until the returned watch is cancelled or released.
    /// A full table (more watches than `max_tunnels`) gives an inert watch: the tunnel then sees no
    /// line, as if the client wrote none. `deliver` runs on the intake's thread (see `WorkerKeyLog`,
    /// which hands it to its worker), with the intake's lock held.
    func watch(clientRandom: [UInt8], _ deliver: @escaping (KeyLogDelivery) -> Void) -> KeyLogWatch {
        let id = lock.withLock { book.watch(clientRandom: clientRandom, now: .now, from: file.size, deliver) }
        return KeyLogWatch(intake: self, id: id, clientRandom: clientRandom)
    }

    func cancel(id: Int, clientRandom: [UInt8]) {
        lock.withLock { book.cancel(id: id, clientRandom: clientRandom) }
    }

    /// Reads what the file holds now on the intake's thread (bounded, as every turn is), then runs
    /// `done` there: a tunnel whose `wait` ran out asks before it gives up, and its deliveries are
    /// handed over before `done`.
    func readNow(then done: @escaping () -> Void) {
        if !mailbox.post({ [weak self] in
            self?.turn(upTo: 8)
            done()
        }) { done() }
    }

    var counters: KeyLogBook.Counters { lock.withLock { book.counters } }
    var watchCount: Int { lock.withLock { book.watchCount } }
    /// Times the file was found truncated under us (by the unit or a client opening it with O_TRUNC).
    var truncations: Int { lock.withLock { truncationCount } }
    /// False when the file system refused to punch holes and the intake truncates instead.
    var punchesHoles: Bool { lock.withLock { file.punching } }

    // MARK: on the intake's thread

    /// One turn: what inotify said, the path put right, then a bounded read (`reads` of them when a
    /// tunnel asks for everything there is before it gives up; 2 MiB, past which a flood is skipped).
    private func turn(upTo reads: Int = 1) {
        let notice = notifier.drain()
        if notice.contains(.pathChanged) {
            read()  // what the file we follow holds before it is let go
            heal()
        }
        var busy = true
        for _ in 0..<reads where busy { busy = read() }
        pace(busy: busy)
    }

    /// In a flood, one turn every `pace` instead of one per write (inotify would wake us for each).
    private func pace(busy: Bool) {
        guard let notified else { return }  // stopping
        if busy {
            if armed { notified.remove() }
            armed = false
            if paced == nil {
                paced = Timer(loop: loop, after: Self.pace) { [weak self] in
                    guard let self else { return }
                    paced = nil
                    turn()
                }
            }
        } else if !armed {
            notified.add()
            armed = true
        }
    }

    /// Reads (or, in a flood, skips and scans) what was appended. True when more is waiting.
    @discardableResult
    private func read() -> Bool {
        let now = ContinuousClock.now
        if file.noticeTruncation() {
            lock.withLock {
                truncationCount += 1
                book.discardPartialLine()
                book.rebase()
            }
            flood.restart()
        }
        let size = file.size
        flood.observe(size: size, at: now)
        if size - file.offset > KeyLogFlood.threshold {
            skipAndScan(until: size, now: now)
            return true
        }
        // 256 KiB a turn: the blocks read are given back after each turn, so a turn must be short.
        let result = file.readAppended(into: buffer, maxChunks: 4) { bytes in
            // The lock in 8 KiB slices: a worker making or cancelling a watch waits for one slice at most.
            for start in stride(from: 0, to: bytes.count, by: 8192) {
                let slice = UnsafeRawBufferPointer(rebasing: bytes[start..<min(bytes.count, start + 8192)])
                lock.withLock { book.consume(slice, now: now) }
            }
        }
        return result == .more
    }

    /// A backlog too large to parse: what no waiting tunnel can need is passed over unread (all of it
    /// when none waits, and the file emptied), the rest scanned for the randoms tunnels wait for.
    private func skipAndScan(until size: Int64, now: ContinuousClock.Instant) {
        let (floor, watches): (Int64?, Int) = lock.withLock {
            book.discardPartialLine()
            guard let oldest = book.oldestStart else {
                let final = file.size
                flood.observe(size: final, at: now)  // what was written up to the truncation counts in the rate
                let skipped = max(0, final - file.offset)
                book.noteSkipped(skipped)
                flood.skipped(skipped)
                file.truncate()  // under the lock: no watch can begin meanwhile
                return (nil, 0)
            }
            return (max(oldest, flood.size(before: now - .seconds(waitValue)) ?? 0), book.watchCount)
        }
        if let floor {
            let skipped = min(floor, size) - file.offset
            if skipped > 0 {
                lock.withLock { book.noteSkipped(skipped) }
                flood.skipped(skipped)
                file.skip(skipped)
            }
            scan(until: size, now: now)
        } else {
            flood.restart()
        }
        if let record = flood.report(at: now, watches: watches, path: settings.path) { logger.emit(record) }
    }

    /// Looks for the watched randoms (memmem, as clients write them: lower or upper case hex) in up
    /// to 16 MiB of whole lines, and parses only the lines that hold one.
    private func scan(until end: Int64, now: ContinuousClock.Instant) {
        for _ in 0..<256 {
            guard file.offset < end else { return }
            let n = min(file.peek(into: buffer), Int(end - file.offset))
            guard n > 0 else { return }
            let bytes = UnsafeRawBufferPointer(rebasing: buffer[0..<n])
            // Whole lines only; a chunk without a newline is one line too long to keep.
            let usable = bytes.baseAddress.flatMap { start in pp_memrchr(start, 0x0a, UInt(n)).map { start.distance(to: $0) + 1 } } ?? n
            var parsed = 0
            lock.withLock {
                var lines: [Range<Int>] = []
                for hex in book.watchedHex { lines += Self.lines(holding: hex, in: UnsafeRawBufferPointer(rebasing: bytes[0..<usable])) }
                for line in Set(lines).sorted(by: { $0.lowerBound < $1.lowerBound }) {
                    book.consume(UnsafeRawBufferPointer(rebasing: bytes[line]), now: now)
                    parsed += line.count
                }
                book.noteSkipped(Int64(usable - parsed))
            }
            flood.skipped(Int64(usable - parsed))
            wipe(n)
            file.skip(Int64(usable))
        }
    }

    /// The whole lines (newline included) in which `needle` stands right after the label.
    private static func lines(holding needle: [UInt8], in bytes: UnsafeRawBufferPointer) -> [Range<Int>] {
        guard let base = bytes.baseAddress else { return [] }
        var found: [Range<Int>] = []
        var from = 0
        while from < bytes.count, found.count < 64 {
            guard let hit = needle.withUnsafeBytes({ pp_memmem(base + from, UInt(bytes.count - from), $0.baseAddress, UInt($0.count)) }) else { break }
            let at = base.distance(to: hit)
            let lookBack = max(0, at - KeyLogBook.maxLineBytes)
            let start = pp_memrchr(base + lookBack, 0x0a, UInt(at - lookBack)).map { base.distance(to: $0) + 1 } ?? (lookBack == 0 ? 0 : -1)
            guard let newline = memchr(base + at, 0x0a, bytes.count - at) else { break }
            let end = base.distance(to: newline) + 1
            if start >= 0, end - start <= KeyLogBook.maxLineBytes + 1 { found.append(start..<end) }
            from = end
        }
        return found
    }

    // MARK: the path

    /// The path no longer names our file: whatever is there goes (a FIFO drained first, releasing
    /// writers blocked in open()), and a fresh file of ours with the configured mode takes its place.
    private func heal() {
        for _ in 0..<3 {
            guard let found = file.inspectPath() else { return }
            if found == .fifo { holdFIFO() }
            if found != .missing, unlink(settings.path) != 0, errno != ENOENT {
                return replaceFailed(found, errnoText(errno))
            }
            let fresh: KeyLogFile
            do {
                fresh = try KeyLogFile.fresh(path: settings.path, mode: settings.mode)
                try notifier.follow(fresh)
            } catch {
                if case .cannotOpen(_, let why) = error, why == errnoText(EEXIST) { continue }  // raced to the name again
                return replaceFailed(found, error.description)
            }
            let unread = lock.withLock { () -> Int64 in
                let unread = file.backlog
                file = fresh
                book.discardPartialLine()
                book.rebase()
                return unread
            }
            flood.restart()
            if let suppressed = replacedLog.note(at: .now) {
                logger.emit(LogRecord(.warning, "keylog_replaced", [
                    ("keylog", .string(settings.path)), ("found", .string(found.text)), ("suppressed", .int(suppressed)),
                    ("detail", .string(Self.why(found) + "; pinproxy created its own file again (mode \(settings.modeText)); \(unread) bytes of the old file were left unread")),
                ]))
            }
        }
    }

    private static func why(_ found: KeyLogFile.Finding) -> String {
        switch found {
        case .missing: return "the key log was unlinked or renamed"
        case .fifo: return "the key log was replaced by a FIFO, which blocks every writer in open(); its writers were released and what they wrote discarded"
        case .symlink: return "the key log was replaced by a symbolic link; it was removed, never followed"
        case .foreignOwner(let uid): return "the key log was replaced by a file of uid \(uid), who could read every secret written to it; it was removed unread"
        case .otherFile: return "the key log was replaced by another file; it was removed unread"
        case .notRegular: return "the key log was replaced by something that is not a regular file; it was removed"
        }
    }

    private func replaceFailed(_ found: KeyLogFile.Finding, _ why: String) {
        guard let suppressed = replacedLog.note(at: .now) else { return }
        logger.emit(LogRecord(.error, "keylog_replace_failed", [
            ("keylog", .string(settings.path)), ("found", .string(found.text)), ("suppressed", .int(suppressed)),
            ("detail", .string(Self.why(found) + ", and pinproxy could not put its own file back: \(why); clients' lines are not read until it can (the next change in the directory, or a restart)")),
        ]))
    }

    /// Opens the FIFO for reading: every writer blocked in open() on it returns. Held (and read) for
    /// a second, so a writer already on its way in is released too; then closed (its writers get EPIPE).
    private func holdFIFO() {
        let fd = open(settings.path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC)
        guard fd >= 0 else { return }
        fifos.append(fd)
        drainFIFOs()
        if fifoTimer == nil {
            fifoTimer = Timer(loop: loop, after: 1) { [weak self] in
                guard let self else { return }
                fifoTimer = nil
                closeFIFOs()
            }
        }
    }

    private func drainFIFOs() {
        for fd in fifos {
            for _ in 0..<64 where Glibc.read(fd, buffer.baseAddress, buffer.count) > 0 {}
        }
        wipe(buffer.count)
    }

    /// Zeroes the first `count` bytes of the read buffer (they may hold secrets).
    private func wipe(_ count: Int) {
        guard let start = buffer.baseAddress else { return }
        explicit_bzero(start, count)
    }

    private func closeFIFOs() {
        drainFIFOs()
        for fd in fifos { close(fd) }
        fifos = []
    }
}
