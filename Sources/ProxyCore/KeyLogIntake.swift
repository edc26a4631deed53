import CLibevent
import Foundation
import PinPolicy

/// `proxy.keylog`: follows the key-log file on the proxy's loop and hands each pending TLS 1.3
/// tunnel the server secrets its client wrote for its ClientHello's random. Made at start; sessions
/// reach it through the proxy (`Proxy.keyLog`). A reload cannot move it (path and mode need a
/// restart); `wait` follows the policy in force.
final class KeyLogIntake {
    /// How long a pinned TLS 1.3 tunnel waits for its client's key line, in seconds.
    var wait: TimeInterval
    let settings: KeyLogSettings
    private let file: KeyLogFile
    private let book: KeyLogBook
    let loop: EventLoop
    private var event: OpaquePointer?
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
    func watch(clientRandom: [UInt8], _ deliver: @escaping (KeyLogDelivery) -> Void) -> KeyLogWatch {
        let id = book.watch(clientRandom: clientRandom, now: .now, deliver)
        return KeyLogWatch(book: book, id: id, clientRandom: clientRandom)
    }

    /// Reads whatever the file holds now (a tunnel whose `wait` ran out asks before it gives up).
    func readNow() {
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
        if result == .more, let event { event_active(event, EV_READ, 0) }
    }

    private func notified() {
        file.drainNotifications()
        readNow()
    }

    /// On a clean stop: nothing stays in the file.
    func stop() {
        if let event { event_free(event) }
        event = nil
        file.truncate()
        book.discardPartialLine()
    }

    var counters: KeyLogBook.Counters { book.counters }
    var watchCount: Int { book.watchCount }
    /// False when the file system refused to punch holes and the intake truncates instead.
    var punchesHoles: Bool { file.punching }
}

/// Interest in one client random's key lines; cancelled by `cancel()` or when released.
final class KeyLogWatch {
    private weak var book: KeyLogBook?
    private var id: Int?
    private let clientRandom: [UInt8]

    fileprivate init(book: KeyLogBook, id: Int?, clientRandom: [UInt8]) {
        self.book = book
        self.id = id
        self.clientRandom = clientRandom
    }

    /// Whether the watch was registered (false: the table was full, or the random not 32 bytes).
    var isActive: Bool { id != nil }

    func cancel() {
        guard let id else { return }
        self.id = nil
        book?.cancel(id: id, clientRandom: clientRandom)
    }

    deinit { cancel() }
}

@available(*, unavailable) extension KeyLogIntake: Sendable {}
@available(*, unavailable) extension KeyLogWatch: Sendable {}
