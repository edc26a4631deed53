import Foundation
import PinPolicy

/// The host:ports where a check caught a chain that fails an enforced rule while the tunnel's own
/// chain could not be verified otherwise (a mirror, probe or stream check that disagrees with what
/// a client would be shown: an interceptor choosing its connections). While one lasts, a tunnel to
/// it that pinproxy cannot verify by itself — TLS 1.3 with no key-log line, a TLS 1.3 resumption —
/// is refused (`quarantined`); TLS 1.2 and key-log tunnels are verified on their own and go on.
///
/// One per process, shared by every worker behind a lock: the catch on one worker protects the
/// tunnels of all. A reload keeps an entry only while its host's rule is unchanged; an operator may
/// list and lift them through the control socket (`ControlServer`).
final class Quarantine: @unchecked Sendable {
    typealias Key = Authority

    /// One quarantined host:port.
    struct Entry: Equatable, Sendable {
        let since: Date
        let until: Date
        /// The rule that pinned it when it was caught.
        let rule: Rule
    }

    /// Why a quarantine ended: the `reason` of `quarantine_lifted`.
    typealias Lift = QuarantineLift

    /// What `enter` did.
    enum Entered: Equatable {
        /// A new quarantine: the incident is worth a line.
        case started(until: Date)
        /// Already quarantined: its end moved to `until`.
        case extended(until: Date)
        /// `quarantine: 0s` for this rule.
        case off
    }

    private let book = Locked([Key: Entry]())

    /// Puts host:port in quarantine for the rule's `quarantine` from `now` (or extends it).
    func enter(_ key: Key, rule: Rule, at now: Date) -> Entered {
        guard rule.quarantine > 0 else { return .off }
        let until = now.addingTimeInterval(rule.quarantine)
        return book.withLock { book in
            if let entry = book[key], entry.until > now {
                book[key] = Entry(since: entry.since, until: max(entry.until, until), rule: rule)
                return .extended(until: max(entry.until, until))
            }
            book[key] = Entry(since: now, until: until, rule: rule)
            return .started(until: until)
        }
    }

    /// The quarantine in force for host:port at `now`, if any.
    func entry(for key: Key, at now: Date) -> Entry? {
        book.withLock { book in
            guard let entry = book[key], entry.until > now else { return nil }
            return entry
        }
    }

    /// Removes and returns the quarantines that ended by `now` (each is worth a `quarantine_lifted`).
    func lift(at now: Date) -> [(key: Key, entry: Entry)] {
        book.withLock { book in
            let ended = book.filter { $0.value.until <= now }
            for key in ended.keys { book[key] = nil }
            return ended.map { ($0.key, $0.value) }.sorted { $0.key.description < $1.key.description }
        }
    }

    /// A reload: keeps a quarantine only where the new policy's rule for its host:port means what
    /// the one it was caught under meant (`Rule.sameMeaning`: where it sits in the file aside, so a
    /// `deny:` key or a rule added elsewhere lifts nothing); the rest are lifted and returned. A
    /// quarantine is about an incident at that host:port: only a change to its own rule is a reason
    /// to look at it afresh.
    func reloaded(_ policy: Policy) -> [(key: Key, entry: Entry)] {
        book.withLock { book in
            var lifted: [(key: Key, entry: Entry)] = []
            for (key, entry) in book {
                if let now = policy.checkingRule(for: key), now.sameMeaning(as: entry.rule) { continue }
                book[key] = nil
                lifted.append((key, entry))
            }
            return lifted.sorted { $0.key.description < $1.key.description }
        }
    }

    /// The quarantines in force at `now`, in the order of their host:ports (for `quarantine list`).
    func entries(at now: Date) -> [(key: Key, entry: Entry)] {
        book.withLock { book in
            book.filter { $0.value.until > now }.map { ($0.key, $0.value) }.sorted { $0.key.description < $1.key.description }
        }
    }

    /// Ends host:port's quarantine now and returns it; nil when none was in force at `now` (one that
    /// ran out is left for `lift(at:)`, whose line says `expired`).
    func lift(_ key: Key, at now: Date) -> Entry? {
        book.withLock { book in
            guard let entry = book[key], entry.until > now else { return nil }
            book[key] = nil
            return entry
        }
    }

    /// Ends every quarantine in force at `now` and returns them, in the order of their host:ports.
    func liftAll(at now: Date) -> [(key: Key, entry: Entry)] {
        book.withLock { book in
            let lifted = book.filter { $0.value.until > now }
            for key in lifted.keys { book[key] = nil }
            return lifted.map { ($0.key, $0.value) }.sorted { $0.key.description < $1.key.description }
        }
    }

    /// How many host:ports are quarantined now (for `stats` and `/metrics`).
    func count(at now: Date) -> Int { book.withLock { $0.values.filter { $0.until > now }.count } }
}
