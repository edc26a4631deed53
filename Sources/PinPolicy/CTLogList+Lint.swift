import Foundation

/// What is wrong with a log list that loads but would judge badly: `pinproxy ct-list` and
/// `pinproxy check` print these as warnings (exit 0; `check --strict` exits 1).
public enum CTListWarning: Hashable, Sendable, CustomStringConvertible {
    /// Older than `ct_list_max_age`: logs may have been retired or distrusted since.
    case stale(age: TimeInterval, maxAge: TimeInterval)
    /// Fewer than 2 operators have a log that can issue SCTs today, so no new certificate can be
    /// compliant (Chrome's policy wants 2 operators).
    case fewOperators(inService: [String])

    /// Stable code, as `check` prints it (`warning[ct_list_stale]`).
    public var code: String {
        switch self {
        case .stale: "ct_list_stale"
        case .fewOperators: "ct_list_few_operators"
        }
    }

    public var description: String {
        switch self {
        case .stale(let age, let maxAge):
            return "the list is \(CTLogList.days(age)) days old, older than ct_list_max_age (\(CTLogList.days(maxAge)) days): "
                + "logs may have been retired or distrusted since; fetch the current one (pinproxy ct-list FILE --install)"
        case .fewOperators(let names):
            let which = names.isEmpty ? "no operator has" : "only '\(Printable.oneLine(names[0]))' has"
            return "\(which) a usable or qualified log; Chrome's policy needs SCTs from 2 operators, so no certificate can comply with this list"
        }
    }
}

extension CTLogList {
    /// The operators with at least one `usable` or `qualified` log: the ones that can log a new certificate.
    public var operatorsInService: [String] {
        operators.filter { $0.logs.contains { $0.state.isInService } }.map(\.name)
    }

    public func warnings(at now: Date, maxAge: TimeInterval = CTLogList.defaultMaxAge) -> [CTListWarning] {
        var warnings: [CTListWarning] = []
        if case .stale(let age) = freshness(at: now, maxAge: maxAge) { warnings.append(.stale(age: age, maxAge: maxAge)) }
        let inService = operatorsInService
        if inService.count < 2 { warnings.append(.fewOperators(inService: inService)) }
        return warnings
    }

    /// Whole days, rounded down: a list is "70 days old" until the 71st day begins.
    public static func days(_ interval: TimeInterval) -> Int { Int(interval / 86400) }
}

extension CTLogState {
    /// `usable` or `qualified`: the log takes submissions and Chrome counts its new SCTs.
    public var isInService: Bool {
        switch self {
        case .usable, .qualified: true
        case .pending, .readonly, .retired, .rejected: false
        }
    }

    /// When the log entered this state.
    public var since: Date {
        switch self {
        case .pending(let since), .qualified(let since), .usable(let since), .retired(let since), .rejected(let since): since
        case .readonly(let since, _): since
        }
    }
}

extension Policy {
    /// `check`'s warnings about the loaded `proxy.ct_log_list`, at the line that names it.
    public func lint(_ list: CTLogList, at now: Date) -> [LintWarning] {
        list.warnings(at: now, maxAge: proxy.ct.maxAge).map {
            LintWarning(line: proxy.ct.logListLine, code: $0.code, message: "\(proxy.ct.logList ?? "the CT log list"): \($0)")
        }
    }
}
