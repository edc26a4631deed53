/// Decides which occurrences of a repeating event get a log line: the first at once, then at most
/// one per `interval`, each carrying how many occurrences went unlogged since the previous line.
/// A value without I/O or a clock of its own, so that tests drive it with made-up instants.
struct LogThrottle {
    let interval: Duration
    private var lastLine: ContinuousClock.Instant?
    private var suppressed = 0

    init(interval: Duration) { self.interval = interval }

    /// Records one occurrence at `now`. Returns the number suppressed since the last line when this
    /// one should be logged, nil when it should not.
    mutating func note(at now: ContinuousClock.Instant) -> Int? {
        if let lastLine, now - lastLine < interval {
            suppressed += 1
            return nil
        }
        defer {
            lastLine = now
            suppressed = 0
        }
        return suppressed
    }
}
