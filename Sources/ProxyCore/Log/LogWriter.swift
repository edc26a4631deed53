import Foundation

/// Writes log lines to a file descriptor (or entries to the journal's socket) from a thread of its
/// own, so that a log reader that stalls (a full stderr pipe, a busy journald) never blocks the
/// event loop.
///
/// The loop thread renders a line and calls `enqueue`, which never blocks: it holds a mutex for a
/// few assignments and signals a semaphore. The writer thread does the blocking `write(2)`, one line
/// at a time and only from that thread, so lines never interleave. The queue is bounded in bytes; a
/// line that does not fit is dropped and counted, and the count takes the dropped lines' place in
/// the stream as one `log_lines_dropped` line (level warning, key `dropped`), written once the
/// writer gets there, i.e. once the reader has drained what was queued before the drops.
///
/// A writer lives as long as the process: its thread parks on a semaphore when there is nothing to
/// write. Call `flush(timeout:)` before the process exits.
final class LogWriter: Sendable {
    /// 4 MiB is what a stalled reader may cost us in memory. Lines are 200 bytes to a few KiB, so that
    /// is thousands of lines, minutes of a busy proxy: enough to ride out a reader's hiccup (journald
    /// restarting, a paused pager) without losing a line. Beyond it we would rather drop lines than
    /// grow without bound.
    static let defaultCapacity = 4 << 20

    /// What the writer works through: a rendered line, or the place where `count` lines were dropped.
    private enum Entry {
        case line([UInt8])
        case gap(count: Int)
    }

    private struct State {
        var entries: [Entry] = []
        /// Bytes of the lines queued or being written: what counts against `capacity`.
        var queuedBytes = 0
        /// Lines dropped since the last entry; they become a `.gap` before the next entry.
        var droppedSinceLastEntry = 0
        /// Lines dropped so far: full queue, or a failed write.
        var droppedTotal = 0
        /// Entries ever appended, and ever handled by the writer: `flush` waits for the second to
        /// reach what the first was when it was called.
        var appended = 0
        var handled = 0
        var flushWaiters = 0
        /// Whether the writer has found the queue empty and is about to wait (or waits) for `wake`:
        /// only then does an enqueue signal it. A writer still busy takes the new line with its next
        /// batch, so a burst of lines costs one wake-up, not one context switch per line.
        var writerIdle = true

        /// Puts the lines dropped since the last entry in their place as a gap.
        mutating func closeGap() {
            guard droppedSinceLastEntry > 0 else { return }
            entries.append(.gap(count: droppedSinceLastEntry))
            appended += 1
            droppedSinceLastEntry = 0
        }

        mutating func append(_ entry: Entry) {
            closeGap()
            entries.append(entry)
            appended += 1
        }
    }

    let destination: LogDestination
    /// The journal's socket once more, as a plain reference: inside `LogDestination`, a
    /// multi-payload enum, Swift keeps the case's tag in the reference's spare bits, where
    /// LeakSanitizer does not recognise a pointer and reported the live socket as leaked.
    private let journalSocket: JournalSocket?
    let capacity: Int
    private let state = Locked(State())
    /// Signalled on every enqueue; the writer drains the whole queue per wake, so extra signals only
    /// cost it a look at an empty queue.
    private let wake = DispatchSemaphore(value: 0)
    /// Signalled after each entry while someone waits in `flush`.
    private let progress = DispatchSemaphore(value: 0)

    convenience init(fd: Int32, format: LogFormatChoice, capacity: Int = LogWriter.defaultCapacity) {
        self.init(destination: .stream(fd: fd, format: format), capacity: capacity)
    }

    init(destination: LogDestination, capacity: Int = LogWriter.defaultCapacity) {
        precondition(capacity > 0, "a log queue needs room for at least one byte")
        self.destination = destination
        if case .journal(let socket) = destination { journalSocket = socket } else { journalSocket = nil }
        self.capacity = capacity
        let thread = Thread { [self] in writeLoop() }
        thread.name = "pinproxy-log"
        thread.start()
    }

    /// Queues one rendered line (ending in a newline), or drops and counts it when it does not fit.
    /// Never blocks beyond a short mutex hold; safe from any thread.
    func enqueue(_ line: [UInt8]) {
        let idle = state.withLock { s in
            if s.queuedBytes + line.count > capacity {
                s.droppedSinceLastEntry += 1
                s.droppedTotal += 1
            } else {
                s.queuedBytes += line.count
                s.append(.line(line))
            }
            defer { s.writerIdle = false }
            return s.writerIdle
        }
        // Also after a drop: if the writer is idle (a single line larger than the whole queue) it
        // reports the drop now rather than with the next line.
        if idle { wake.signal() }
    }

    /// Waits until every line queued before this call has been written or dropped (and any drops
    /// reported), for at most `timeout` seconds, so that a reader that never reads cannot hang the
    /// process's exit. Returns whether everything got out.
    @discardableResult
    func flush(timeout: Double) -> Bool {
        let target = state.withLock { s in
            s.closeGap()
            s.flushWaiters += 1
            return s.appended
        }
        defer { state.withLock { $0.flushWaiters -= 1 } }
        wake.signal()
        let deadline = DispatchTime.now() + timeout
        while state.withLock({ $0.handled < target }) {
            if progress.wait(timeout: deadline) == .timedOut { return state.withLock { $0.handled >= target } }
        }
        return true
    }

    /// Lines dropped so far and bytes still queued (for tests).
    var counts: (dropped: Int, queuedBytes: Int) {
        state.withLock { ($0.droppedTotal, $0.queuedBytes) }
    }

    // MARK: the writer thread

    private func writeLoop() {
        // We write to a pipe whose reader may be gone. The proxy ignores SIGPIPE, but a line can be
        // logged before it does (a policy that fails to load); blocking the signal on this thread
        // alone turns it into EPIPE here without changing the process's disposition.
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        pthread_sigmask(SIG_BLOCK, &pipeSignal, nil)

        // Only this thread touches these. Drops are reported just before the next line, or once the
        // queue is empty, so gaps that meet (drops while the writer took a batch, then more) make one
        // report; the gap entries count as handled only once their report has been tried, so a
        // `flush` waits for it.
        var unreported = 0
        var gapsAwaitingReport = 0
        func report() {
            guard unreported > 0 else { return }
            if writeLine(droppedLine(unreported)) { unreported = 0 }
            finished(entries: gapsAwaitingReport, releasing: 0, dropped: false)
            gapsAwaitingReport = 0
        }
        while true {
            wake.wait()
            while let batch = takeBatch() {
                for entry in batch {
                    switch entry {
                    case .gap(let count):
                        unreported += count
                        gapsAwaitingReport += 1
                    case .line(let bytes):
                        report()
                        let written = writeLine(bytes)
                        if !written { unreported += 1 }
                        finished(entries: 1, releasing: bytes.count, dropped: !written)
                    }
                }
            }
            report()
        }
    }

    /// Everything queued, with drops at the end turned into a gap; nil when there is nothing to do.
    private func takeBatch() -> [Entry]? {
        state.withLock { s in
            s.closeGap()
            guard !s.entries.isEmpty else {
                s.writerIdle = true
                return nil
            }
            defer { s.entries = [] }
            return s.entries
        }
    }

    /// Entries handled: their bytes leave the queue's budget, a failed write counts as a drop.
    private func finished(entries: Int, releasing bytes: Int, dropped: Bool) {
        let waiting = state.withLock { s in
            s.queuedBytes -= bytes
            if dropped { s.droppedTotal += 1 }
            s.handled += entries
            return s.flushWaiters > 0
        }
        if waiting { progress.signal() }
    }

    private func droppedLine(_ count: Int) -> [UInt8] {
        destination.render(LogRecord(.warning, "log_lines_dropped", [("dropped", .int(count))]), at: Date())
    }

    /// One rendered record to its destination; false when it could not be delivered.
    private func writeLine(_ bytes: [UInt8]) -> Bool {
        switch destination {
        case .stream(let fd, _): return write(bytes, to: fd)
        case .journal(let socket): return socket.send(bytes)
        }
    }

    /// One line with blocking `write(2)`: EINTR retried, a short write continued, EAGAIN (a reader
    /// that handed us a non-blocking pipe) waited out with poll. False when the line could not be
    /// written: the reader is gone (EPIPE), stderr is closed (EBADF; dropping is all a logger can
    /// do about that), or the descriptor failed otherwise.
    private func write(_ bytes: [UInt8], to fd: Int32) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n >= 0 {
                offset += n
                continue
            }
            switch errno {
            case EINTR:
                continue
            case EAGAIN, EWOULDBLOCK:
                var ready = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
                _ = poll(&ready, 1, -1)
            default:
                return false
            }
        }
        return true
    }
}

/// Where a writer's thread delivers records: a byte stream (stderr) as text or JSON lines, or the
/// journal's socket as native-protocol datagrams (when stderr is the journal).
enum LogDestination: Sendable {
    case stream(fd: Int32, format: LogFormatChoice)
    case journal(JournalSocket)

    /// The bytes one record becomes at this destination.
    func render(_ record: LogRecord, at time: Date) -> [UInt8] {
        switch self {
        case .stream(_, let format): return record.line(format, at: time)
        case .journal: return record.journalDatagram()
        }
    }
}

extension LogRecord {
    /// The record as one line of bytes in the chosen format, newline included.
    func line(_ format: LogFormatChoice, at time: Date) -> [UInt8] {
        var encoder = LineEncoder()
        if format == .json { encoder.json(self, at: time) } else { encoder.text(self, at: time) }
        encoder.newline()
        return encoder.bytes
    }
}
