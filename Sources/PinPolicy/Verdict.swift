import Foundation

/// Why a tunnel is refused (or would have been). The raw values are the `reason` of the log lines:
/// a stable interface.
public enum RefusalReason: String, Hashable, Sendable, CaseIterable {
    // Decided by the policy before any network I/O.
    case portNotAllowed = "port_not_allowed"
    case destinationProhibited = "destination_ip_prohibited"
    case clientNotAllowed = "client_not_allowed"
    case unpinnedDenied = "unpinned_denied"
    // Decided on the certificate chain.
    case chainInvalid = "chain_invalid"
    case hostnameMismatch = "hostname_mismatch"
    case denylistedKey = "denylisted_key"
    case pinMismatch = "pin_mismatch"
    /// The leaf's SCTs do not meet Chrome's Certificate Transparency policy (`ct: require`).
    case ctNotCompliant = "ct_not_compliant"
}

/// Why a refusal was let through.
public enum BypassBasis: Hashable, Sendable {
    /// The rule is `mode: report`.
    case reportMode
    /// The rule passed its `expires` and says `on_expiry: report`.
    case expiredRule
    /// `debug:` with `--debug-bypass`, before `until`.
    case debugBypass(until: Date)
    /// `ct: report`: a chain that fails the CT policy is logged, not refused.
    case ctReport
    /// `ct: require` with a log list older than `ct_list_max_age` and `ct_stale_list: report`.
    case ctStaleList

    public var code: String {
        switch self {
        case .reportMode: return "report_mode"
        case .expiredRule: return "expired_rule_report"
        case .debugBypass: return "debug_bypass"
        case .ctReport: return "ct_report"
        case .ctStaleList: return "ct_stale_list"
        }
    }
}

/// Why a tunnel carries no pin check at all.
public enum UnpinnedBasis: String, Hashable, Sendable {
    /// No rule matches and `defaults.unpinned` is `allow`.
    case noRule = "no_rule"
    /// The most specific rule says `mode: unpinned`.
    case ruleUnpinned = "rule_unpinned"
}

/// A pin that matched, and where.
public struct PinMatch: Hashable, Sendable {
    public let entry: PinEntry
    public let position: Int
}

/// The decision for one CONNECT: `unpinned` or `refused` by admission before the probe (the proxy's
/// admission gate), the rest by `Policy.evaluate` on the probe's chain; a value, with no side effects.
public enum Verdict: Hashable, Sendable {
    case allowed(PinMatch)
    case unpinned(UnpinnedBasis)
    case refused(RefusalReason)
    case bypassed(wouldRefuse: RefusalReason, by: BypassBasis)
}

/// Something worth a warning that the probe revealed while deciding.
public enum RuntimeWarning: Hashable, Sendable {
    /// Every distinct pin of the rule matched this one chain: the "backup" is no backup.
    case noRealBackup
    /// The leaf expires within 30 days.
    case leafExpiresSoon(notAfter: Date)
    /// The rule passed its `expires`.
    case ruleExpired(Date)
    /// The rule expires within 30 days.
    case ruleExpiresSoon(Date)

    public var code: String {
        switch self {
        case .noRealBackup: return "no_real_backup"
        case .leafExpiresSoon: return "leaf_expires_soon"
        case .ruleExpired: return "rule_expired"
        case .ruleExpiresSoon: return "rule_expires_soon"
        }
    }

    /// What it says, in the same words in the log's `tunnel_warning detail` and in `check --probe`.
    public func detail(onExpiry: ExpiryBehaviour?) -> String {
        switch self {
        case .noRealBackup: return "every pin of the rule matched this one chain, so none of them is a real backup"
        case .leafExpiresSoon(let notAfter): return "the leaf certificate expires \(RFC3339.format(notAfter)); make sure the rule's pins survive its renewal"
        case .ruleExpired(let at): return "the rule expired \(RFC3339.format(at)) (on_expiry: \(onExpiry?.rawValue ?? "?")); refresh its pins and expires"
        case .ruleExpiresSoon(let at): return "the rule expires \(RFC3339.format(at)); refresh its pins and expires before then"
        }
    }
}

/// A verdict with everything needed to explain it in a log line.
public struct Evaluation: Hashable, Sendable {
    public let verdict: Verdict
    public let rule: Rule
    /// The pins the rule accepts (for the log; never sent to the client).
    public var expected: [PinEntry] { rule.pins }
    /// The deny-listed pin found, if that was the reason.
    public let denylisted: Pin?
    /// The chain failure, if that was the reason.
    public let chainFailure: ChainFailure?
    public let warnings: [RuntimeWarning]
    /// What Certificate Transparency made of the chain; nil when the policy has no log list.
    public var ct: CTStatus? = nil
}

/// Certificate Transparency for one chain, as the evaluation took it.
public enum CTStatus: Hashable, Sendable {
    /// The host's `ct` is off (a private CA that logs nothing, exempted by name).
    case exempt
    case judged(CTFinding)
}

/// Chrome's CT verdict on a chain's leaf, and how it is enforced.
public struct CTFinding: Hashable, Sendable {
    /// The host's `ct` (report or require).
    public let mode: CTMode
    /// What is enforced: `report` for `require` while the list is stale (`ct_stale_list: report`).
    public let enforced: CTMode
    public let verdict: CTVerdict

    public init(mode: CTMode, enforced: CTMode, verdict: CTVerdict) {
        self.mode = mode
        self.enforced = enforced
        self.verdict = verdict
    }

    public var isCompliant: Bool {
        if case .compliant = verdict { return true }
        return false
    }

    public var counted: [CountedSCT] {
        switch verdict {
        case .compliant(let counted), .notCompliant(_, let counted): return counted
        }
    }
}
