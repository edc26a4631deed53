import Foundation

/// `max_tunnels` across every worker: one count of the tunnel slots taken, taken and given back
/// under a lock so two workers admitting at once cannot both take the last slot.
final class TunnelBudget: @unchecked Sendable {
    private let taken = Locked(0)

    /// Takes a slot if fewer than `limit` are taken (the limit of the snapshot the CONNECT is judged by).
    func take(limit: Int) -> Bool {
        taken.withLock { count in
            guard count < limit else { return false }
            count += 1
            return true
        }
    }

    func giveBack() { taken.withLock { $0 -= 1 } }

    /// Slots taken now: the tunnels open (or being set up) on every worker.
    var count: Int { taken.withLock { $0 } }
}

/// A rule past its `expires` is reported at error level once an hour, whichever worker saw it.
final class RuleExpiryBook: @unchecked Sendable {
    private let reported = Locked([Int: Date]())
    static let interval: TimeInterval = 3600

    /// Whether the expiry of the rule on `line` is due to be reported now (and if so, notes it).
    func shouldReport(line: Int, at now: Date) -> Bool {
        reported.withLock { book in
            if let last = book[line], now.timeIntervalSince(last) < Self.interval { return false }
            book[line] = now
            return true
        }
    }
}
