import Foundation

/// `ct:` of `defaults` or a rule: what a chain's Certificate Transparency means for its tunnel.
public enum CTMode: String, Hashable, Sendable {
    /// Not looked at (the default): the host is exempt.
    case off
    /// Judged and logged; a chain that fails Chrome's policy still tunnels (`tunnel_bypassed`).
    case report
    /// A chain that fails Chrome's policy is refused (`ct_not_compliant`).
    case require
}

/// `proxy.ct_stale_list`: what `ct: require` means while the log list is older than `ct_list_max_age`.
public enum CTStaleList: String, Hashable, Sendable {
    /// Enforced as `report` (Chrome stops enforcing on a stale list: a log that joined since is unknown,
    /// and refusing its SCTs would break good servers).
    case report
    /// Still refused.
    case refuse
}

/// The `proxy.ct_*` settings.
public struct CTSettings: Hashable, Sendable {
    /// `ct_log_list`: the v3 log list file; nil when CT is not configured.
    public var logList: String?
    /// The line and column of `ct_log_list` in the policy file, for errors about the list.
    public var logListLine = 0
    public var logListColumn = 0
    /// `ct_log_list_key`: a PEM public key the list's detached signature must verify with.
    public var logListKey: String?
    /// `ct_list_max_age`.
    public var maxAge: TimeInterval = CTLogList.defaultMaxAge
    /// `ct_stale_list`.
    public var staleList: CTStaleList = .report

    public init() {}

    /// Where the detached signature of the list at `path` is: Google publishes `log_list.json` and
    /// `log_list.sig` side by side, so the extension is replaced (appended when there is none).
    public static func signaturePath(forList path: String) -> String {
        let slash = path.lastIndex(of: "/").map { path.index(after: $0) } ?? path.startIndex
        guard let dot = path[slash...].lastIndex(of: "."), dot > slash else { return path + ".sig" }
        return String(path[..<dot]) + ".sig"
    }
}

extension Policy {
    /// The CT mode for a CONNECT under `rule` (nil: no rule): the rule's `ct`, else `defaults.ct`.
    public func ctMode(under rule: Rule?) -> CTMode { rule?.ct ?? defaults.ct }

    /// Whether any host is judged for CT (a log list is then needed).
    public var usesCT: Bool { defaults.ct != .off || rules.contains { ($0.ct ?? .off) != .off } }
}

extension Evaluation {
    /// Why the leaf failed the CT policy, in words ("2 valid SCTs from 1 operator; 2 operators
    /// needed"); nil when it did not.
    public var ctShortfall: String? {
        guard case .judged(let finding)? = ct, case .notCompliant(let shortfall, _) = finding.verdict else { return nil }
        return shortfall.description
    }
}
