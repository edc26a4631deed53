import Foundation
import Logging
import PinPolicy

/// The wall clock the rotation warnings read. A release build reads the system clock. A debug build
/// run with `PINPROXY_TEST_CLOCK_FILE=PATH` adds the seconds written in that file (read at every
/// look; missing or unreadable: 0), so that an end-to-end test moves the warnings' time by a day or
/// a week by rewriting one file, without sleeping and without touching the policy's own clock.
struct RotationClock: Sendable {
    /// The file that holds the offset in seconds; nil: the system clock as it is.
    let offsetFile: String?

    static let system = RotationClock(offsetFile: nil)

    static func fromEnvironment(_ environment: [String: String] = ProcessInfo.processInfo.environment) -> RotationClock {
        #if DEBUG
        if let path = environment["PINPROXY_TEST_CLOCK_FILE"], !path.isEmpty { return RotationClock(offsetFile: path) }
        #endif
        return .system
    }

    func now() -> Date {
        guard let offsetFile, let text = try? String(contentsOfFile: offsetFile, encoding: .utf8),
              let seconds = Double(text.trimmingCharacters(in: .whitespacesAndNewlines)) else { return Date() }
        return Date().addingTimeInterval(seconds)
    }

    /// How often the proxy asks whether the bypass banner is due: once a minute is plenty for an
    /// hourly line; a test that moves the clock needs the question asked soon after it does.
    var tickInterval: Double { offsetFile == nil ? 60 : 0.1 }
}

/// The rotation warnings (`certificate_expiring`, `pin_without_backup`, the repeated
/// `debug_bypass_active`): what a probe's judgement or the policy in force reveals, rate-limited
/// through one `RotationBook`. Safe from any thread: every worker's sessions report here, and only
/// the first of them past a limit gets the line to write.
final class RotationWatch: Sendable {
    let clock: RotationClock
    private let book: Locked<RotationBook>

    init(clock: RotationClock = .fromEnvironment(), capacity: Int = RotationBook.defaultCapacity) {
        self.clock = clock
        self.book = Locked(RotationBook(capacity: capacity))
    }

    /// The lines a probe's judgement calls for now: its verified leaf expiring soon, and a rule
    /// whose pins have all matched this one chain for a week.
    func judged(_ record: DecisionRecord, evaluation: Evaluation) -> [LogRecord] {
        guard case .verified(let chain)? = record.validation, let authority = record.authority else { return [] }
        let now = clock.now()
        let target = authority.description
        let leaf = chain.leaf
        var lines: [LogRecord] = []
        if book.withLock({ $0.leafSeen(target: target, notAfter: leaf.notAfter, at: now) }) {
            lines.append(Self.expiring(leaf, record: record, rule: evaluation.rule, at: now))
        }
        if case .allowed(let match) = evaluation.verdict {
            let rule = evaluation.rule
            let key = RotationBook.StreakKey(ruleLine: rule.line, rule: rule.name, target: target)
            let onOneChain = evaluation.warnings.contains(.noRealBackup)
            if let since = book.withLock({ $0.pinsMatched(key, allPinsOnOneChain: onOneChain, pin: match.entry.pin.description, at: now) }) {
                lines.append(Self.withoutBackup(match, record: record, rule: rule, since: since, at: now))
            }
        }
        return lines
    }

    /// Whether the per-rule `tunnel_warning reason=no_real_backup` may be written now (once a day).
    func noRealBackupDue(_ rule: Rule) -> Bool {
        book.withLock { $0.noRealBackupDue(rule: "\(rule.line) \(rule.name)", at: clock.now()) }
    }

    /// `debug_bypass_active` when the bypass is in force and its last banner is an hour old (or
    /// there was none): at start, then hourly, with the start banner's keys.
    func bypassBanner(_ policy: Policy, enabled: Bool) -> LogRecord? {
        let until = enabled ? policy.debug?.until : nil
        guard let debug = policy.debug, book.withLock({ $0.bypassCheck(until: until, at: clock.now()) }) else { return nil }
        return LogRecord(.warning, "debug_bypass_active", [
            ("bypass_until", .string(RFC3339.format(debug.until))),
            ("hosts", .string(debug.hosts.map(\.description).joined(separator: ","))),
            ("detail", .string("DEBUG BYPASS ACTIVE: pin refusals for these hosts are tunnelled and logged with would_refuse=true until then")),
        ])
    }

    // MARK: lines

    private static func expiring(_ leaf: CertificateFacts, record: DecisionRecord, rule: Rule, at now: Date) -> LogRecord {
        let daysLeft = Int((leaf.notAfter.timeIntervalSince(now) / 86400).rounded(.down))
        return LogRecord(.warning, "certificate_expiring", target(record) + [
            ("rule", .string(rule.name)), ("rule_line", .int(rule.line)), ("days_left", .int(daysLeft)),
            ("leaf_not_after", .string(RFC3339.format(leaf.notAfter))), ("leaf_subject", .string(leaf.subject)),
            ("leaf_spki", .string(leaf.spki.description)), ("leaf_cert", .string(leaf.certificate.description)),
            ("detail", .string("the server's leaf certificate expires in \(daysLeft) days; its renewal may bring a new key")),
            ("hint", .string("make sure a pin of the rule at line \(rule.line) will match the renewed chain: confirm the new key from a trusted network with 'pinproxy pin \(pinTarget(record))' and add its pin before the switch; a cert-sha256 leaf pin never survives a renewal")),
        ])
    }

    private static func withoutBackup(_ match: PinMatch, record: DecisionRecord, rule: Rule, since: Date, at now: Date) -> LogRecord {
        var fields = target(record) + [
            ("rule", .string(rule.name)), ("rule_line", .int(rule.line)), ("pin", .string(match.entry.pin.description)),
        ]
        if let label = match.entry.label { fields.append(("pin_label", .string(label))) }
        fields += [
            ("since", .string(RFC3339.format(since))),
            ("detail", .string("every pin of the rule has matched this one chain since \(RFC3339.format(since)): when its key changes, no pin will match and every CONNECT is refused")),
            ("hint", .string("add a backup pin to the rule at line \(rule.line): a key that is not in use yet, kept offline (its public key as a pin: '{ file: next-key.pub.pem, at: leaf, label: backup }'), or the CA the host may move to")),
        ]
        return LogRecord(.warning, "pin_without_backup", fields)
    }

    private static func target(_ record: DecisionRecord) -> [(String, LogValue)] {
        guard let authority = record.authority else { return [] }
        return [("host", .string(authority.target.description)), ("port", .int(Int(authority.port)))]
    }

    /// `HOST:PORT --config PATH`, as the refusal hints write it.
    private static func pinTarget(_ record: DecisionRecord) -> String {
        (record.authority?.description ?? "HOST:PORT") + (record.policySource.map { " --config \(shellWord($0))" } ?? "")
    }
}
