/// Decides which `stats` ticks write a line: the first tick after start (a baseline), then only a
/// tick whose counters differ from the last line written, and one an hour after the last line
/// regardless, so an idle proxy says it is alive without filling the log with identical lines.
/// A value without I/O or a clock of its own, so that tests drive it with made-up instants.
struct StatsGate {
    static let heartbeat: Duration = .seconds(3600)

    private var lastLine: (values: [String], at: ContinuousClock.Instant)?

    /// Records one tick's counters at `now`; true when they should be logged.
    mutating func shouldLog(_ fields: [(String, LogValue)], at now: ContinuousClock.Instant) -> Bool {
        let values = fields.map { "\($0.0)=\($0.1.json)" }
        if let lastLine, lastLine.values == values, now - lastLine.at < Self.heartbeat { return false }
        lastLine = (values, now)
        return true
    }
}
