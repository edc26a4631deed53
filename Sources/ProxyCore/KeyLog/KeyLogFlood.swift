import Foundation
import Logging

/// How a flooded key log is read: the writers' rate, what was passed over, and the sizes the file
/// had a moment ago (bytes older than `wait` are worthless). A value without I/O.
struct KeyLogFlood {
    /// A backlog larger than this is not parsed line by line.
    static let threshold: Int64 = 2 << 20

    private struct Sample {
        let at: ContinuousClock.Instant
        let size: Int64
    }

    /// Bytes writers appended since start (growth seen between reads; a truncation starts over).
    private(set) var appended: Int64 = 0
    private var lastSize: Int64 = 0
    /// One sample per 50 ms at most, the last 256 (12.8 s: longer than the longest `wait`).
    private var samples: [Sample] = []
    private var skippedSinceLine: Int64 = 0
    private var throttle = LogThrottle(interval: .seconds(10))
    /// Where the rate of the next `keylog_flooded` is measured from (the flood's first pass, then
    /// the previous line).
    private var window: (at: ContinuousClock.Instant, appended: Int64)?
    /// The previous flood pass: a second without one, and the next is a new flood.
    private var lastPass: ContinuousClock.Instant?

    mutating func observe(size: Int64, at now: ContinuousClock.Instant) {
        appended += max(0, size - lastSize)
        lastSize = size
        if let last = samples.last, now - last.at < .milliseconds(50) { return }
        if samples.count == 256 { samples.removeFirst() }
        samples.append(Sample(at: now, size: size))
    }

    /// The file was emptied or replaced: its old sizes mean nothing any more.
    mutating func restart() {
        lastSize = 0
        samples = samples.map { Sample(at: $0.at, size: 0) }
    }

    mutating func skipped(_ bytes: Int64) { skippedSinceLine += bytes }

    /// The file's size at the latest sample taken at or before `instant`.
    func size(before instant: ContinuousClock.Instant) -> Int64? {
        samples.last { $0.at <= instant }?.size
    }

    /// `keylog_flooded`, once a flood has lasted half a second and then at most once every 10 s: the
    /// writers' rate since the flood began (or since the previous line), and what was skipped.
    mutating func report(at now: ContinuousClock.Instant, watches: Int, path: String) -> LogRecord? {
        if let lastPass, now - lastPass > .seconds(1) { window = nil }  // an earlier flood, over
        lastPass = now
        guard let since = window else {
            window = (now, appended)
            return nil
        }
        guard now - since.at >= .milliseconds(500), throttle.note(at: now) != nil else { return nil }
        let elapsed = now - since.at
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = Int(Double(appended - since.appended) / seconds)
        defer {
            skippedSinceLine = 0
            window = (now, appended)
        }
        return LogRecord(.warning, "keylog_flooded", [
            ("keylog", .string(path)), ("bytes_per_s", .int(rate)), ("skipped_bytes", .int(Int(skippedSinceLine))),
            ("watches", .int(watches)),
            ("detail", .string("writers append to the key log faster than it can be read; bytes no waiting tunnel can need are passed over unread (all of them while none waits, and the file is emptied)")),
        ])
    }
}
