import Foundation

/// What the rotation warnings remember: when each was last written, and since when each rule's pins
/// have all matched one chain. A value without I/O or a clock of its own, so that tests drive it
/// with made-up dates; `RotationWatch` owns one behind a lock and turns its answers into log lines.
///
/// Every table is bounded (`capacity`): a client that CONNECTs to many names under a wildcard rule
/// costs the oldest entries, never unbounded memory. Losing one only means a warning comes again
/// (or a week's streak starts over).
struct RotationBook {
    /// A certificate expiring, a pin without backup: at most one line per target (and rule) a day.
    static let reportEvery: TimeInterval = 86400
    /// The debug bypass banner: at most one an hour while the bypass is active.
    static let bypassEvery: TimeInterval = 3600
    /// How long every pin of a rule must have matched the one chain before it is called no backup:
    /// long enough that a rotation in progress (old and new pins briefly on the same chain) is not
    /// reported, short enough to be noticed long before the key changes.
    static let backupStreak: TimeInterval = 7 * 86400
    /// A leaf that expires within this is reported.
    static let expiryWindow: TimeInterval = 30 * 86400
    static let defaultCapacity = 4096

    /// The pins of a rule all matched one chain for one target since `since`, with `pin` matching.
    struct Streak: Equatable {
        let since: Date
        let pin: String
        var reported: Date?
    }

    /// A rule (its line and pattern: a reload that moves it starts a new streak) and one target.
    struct StreakKey: Hashable {
        let ruleLine: Int
        let rule: String
        let target: String
    }

    let capacity: Int
    private var expiringReported: [String: Date] = [:]
    private var streaks: [StreakKey: Streak] = [:]
    private var bypassReported: Date?
    /// `tunnel_warning reason=no_real_backup`, by rule (its line and pattern).
    private var noBackupReported: [String: Date] = [:]

    init(capacity: Int = RotationBook.defaultCapacity) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    /// A verified leaf seen for `target` (`host:port`). True when it expires within the window and
    /// no line was written for this target in the last day.
    mutating func leafSeen(target: String, notAfter: Date, at now: Date) -> Bool {
        guard notAfter.timeIntervalSince(now) < Self.expiryWindow else { return false }
        guard Self.due(expiringReported[target], every: Self.reportEvery, at: now) else { return false }
        expiringReported[target] = now
        Self.bound(&expiringReported, to: capacity) { $0 }
        return true
    }

    /// An allowed CONNECT under a rule: `allPinsOnOneChain` when every pin of the rule matched this
    /// one chain (`noRealBackup`), with `pin` the one that matched. Returns the streak's start when
    /// that has held for a week and no line was written for it in the last day.
    mutating func pinsMatched(_ key: StreakKey, allPinsOnOneChain: Bool, pin: String, at now: Date) -> Date? {
        guard allPinsOnOneChain else {
            streaks[key] = nil  // a chain without one of the pins: the backup is a real one
            return nil
        }
        guard var streak = streaks[key], streak.pin == pin else {
            streaks[key] = Streak(since: now, pin: pin)
            Self.bound(&streaks, to: capacity) { $0.reported ?? $0.since }
            return nil
        }
        guard now.timeIntervalSince(streak.since) >= Self.backupStreak, Self.due(streak.reported, every: Self.reportEvery, at: now) else {
            return nil
        }
        streak.reported = now
        streaks[key] = streak
        return streak.since
    }

    /// Whether `tunnel_warning reason=no_real_backup` is due for `rule` (its line and name): at most
    /// once per rule a day, whichever host under it was seen.
    mutating func noRealBackupDue(rule: String, at now: Date) -> Bool {
        guard Self.due(noBackupReported[rule], every: Self.reportEvery, at: now) else { return false }
        noBackupReported[rule] = now
        Self.bound(&noBackupReported, to: capacity) { $0 }
        return true
    }

    /// Whether the debug bypass banner is due: the bypass is active (`until` after now) and none
    /// was written in the last hour. A bypass that ended lets the next one announce itself at once.
    mutating func bypassCheck(until: Date?, at now: Date) -> Bool {
        guard let until, until > now else {
            bypassReported = nil
            return false
        }
        guard Self.due(bypassReported, every: Self.bypassEvery, at: now) else { return false }
        bypassReported = now
        return true
    }

    /// Due when never reported, or `every` has passed. A clock stepped back by more than `every`
    /// counts as passed too, so a wrong clock set right cannot silence a warning for its error's length.
    private static func due(_ last: Date?, every: TimeInterval, at now: Date) -> Bool {
        guard let last else { return true }
        return abs(now.timeIntervalSince(last)) >= every
    }

    /// Once `table` outgrows `capacity`, drops its oldest entries down to three quarters of it, so
    /// the sort is paid once per quarter of the capacity's inserts, not on each.
    private static func bound<Key, Value>(_ table: inout [Key: Value], to capacity: Int, date: (Value) -> Date) {
        guard table.count > capacity else { return }
        let excess = table.count - capacity * 3 / 4
        for (key, _) in table.sorted(by: { date($0.value) < date($1.value) }).prefix(excess) { table[key] = nil }
    }
}
