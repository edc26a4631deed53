import Foundation
import PinPolicy

/// The log list's lines: `ct_list_loaded` at every load, and `ct_list_stale` at load and once a day
/// while the list is older than `ct_list_max_age` (Chrome stops enforcing then: a log that joined
/// since is unknown to it).
struct CTListLog {
    private var lastStaleLine: Date?

    /// The lines for a (re)loaded snapshot: the stale warning is due at once.
    mutating func loaded(_ book: CTLogBook, at now: Date) -> [LogRecord] {
        let logs = book.list.operators.reduce(0) { $0 + $1.logs.count }
        var loaded = LogRecord(.info, "ct_list_loaded", [
            ("path", .string(book.path)), ("list_timestamp", .string(RFC3339.format(book.list.timestamp))),
            ("age_days", .int(Self.days(now.timeIntervalSince(book.list.timestamp)))),
            ("operators", .int(book.list.operators.count)), ("logs", .int(logs)),
        ])
        loaded["signature"] = .string(book.settings.logListKey == nil ? "unchecked" : "verified")
        lastStaleLine = nil
        return [loaded] + (tick(book, at: now).map { [$0] } ?? [])
    }

    /// The stale warning, when the list is stale and a day has passed since the last one.
    mutating func tick(_ book: CTLogBook, at now: Date) -> LogRecord? {
        guard case .stale(let age) = book.freshness(at: now) else { return nil }
        if let last = lastStaleLine, now.timeIntervalSince(last) < 86400 { return nil }
        lastStaleLine = now
        let relaxed = book.settings.staleList == .report
        var r = LogRecord(.warning, "ct_list_stale", [
            ("path", .string(book.path)), ("age_days", .int(Self.days(age))), ("max_age_days", .int(Self.days(book.settings.maxAge))),
            ("enforced_as", .string(relaxed ? CTMode.report.rawValue : CTMode.require.rawValue)),
        ])
        r["detail"] = .string(relaxed
            ? "the CT log list is older than ct_list_max_age: ct: require is enforced as report (tunnel_bypassed bypass=ct_stale_list) until a current list is installed"
            : "the CT log list is older than ct_list_max_age; ct_stale_list: refuse keeps refusing what it does not count, including SCTs from logs that joined since")
        r["hint"] = .string("install a current list: enable pinproxy-ct-list.timer, or run pinproxy ct-list --install with a fresh log_list.json, then reload")
        return r
    }

    private static func days(_ seconds: TimeInterval) -> Int { Int((max(0, seconds) / 86400).rounded(.down)) }
}
