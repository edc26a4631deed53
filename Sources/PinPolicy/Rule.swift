import Foundation

/// Which certificates a rule trusts before its pins are compared.
public enum Trust: Hashable, Sendable, CustomStringConvertible {
    /// The system store.
    case system
    /// This CA bundle **instead of** the system store.
    case caFile(path: String)
    /// No store: presented certificates matching one of the rule's pins become the anchors.
    case pinsOnly

    public var description: String {
        switch self {
        case .system: return "system"
        case .caFile(let p): return "ca-file:\(p)"
        case .pinsOnly: return "pins-only"
        }
    }
}

/// What a rule does with a pin mismatch.
public enum RuleMode: String, Hashable, Sendable {
    case enforce, report, unpinned
}

/// What an enforced rule does once past its `expires`.
public enum ExpiryBehaviour: String, Hashable, Sendable {
    case enforce, report
}

/// What a rule applies to.
public enum RulePattern: Hashable, Sendable, CustomStringConvertible {
    case host(HostPattern)
    case ip(CIDR)

    public func matches(_ target: Target) -> Bool {
        switch (self, target) {
        case (.host(let p), .name(let n)): return p.matches(n)
        case (.ip(let c), .ip(let a)): return c.contains(a)
        default: return false  // host patterns never match IP literals, IP rules never match names
        }
    }

    public var description: String {
        switch self {
        case .host(let p): return p.description
        case .ip(let c):
            return c.prefixLength == c.network.bytes.count * 8 ? c.network.description : c.description
        }
    }
}

/// One entry of `rules:`.
public struct Rule: Hashable, Sendable {
    public let pattern: RulePattern
    /// nil: any port in `proxy.allowed_ports`.
    public let ports: [UInt16]?
    public let mode: RuleMode
    public let trust: Trust
    public let pins: [PinEntry]
    public let pinset: String?
    public let expires: Date?
    public let onExpiry: ExpiryBehaviour?
    /// `require_keylog` of the rule, or of `defaults` when the rule does not say: a pinned TLS 1.3
    /// tunnel whose client wrote no key line within `proxy.keylog.wait` is refused (`keylog_missing`)
    /// instead of relayed `probe-only`.
    public let requireKeylog: Bool
    /// `quarantine` of the rule, or of `defaults`: how long a host:port stays quarantined after a
    /// check caught a chain failing this rule that a client could have been shown (0: never).
    public let quarantine: TimeInterval
    /// `mirror_checks` of the rule, or of `defaults`: how many mirror connections a tunnel gets
    /// (0: none, a TLS 1.3 tunnel without a key-log line then rests on a probe made for it). Each
    /// more is a decoy: an interceptor that picks one connection of N + 1 at random wins with
    /// probability 1/(N + 1) and is caught otherwise.
    public let mirrorChecks: Int
    /// `ct` of the rule; nil: `defaults.ct` applies (`Policy.ctMode(under:)`).
    public let ct: CTMode?
    /// Not a rule of the file: what stands for `defaults` when no rule matches a host that
    /// `defaults.ct` has pinproxy look at (`Rule.standIn`).
    public let isStandIn: Bool
    /// Line of the rule in the policy file.
    public let line: Int

    public init(pattern: RulePattern, ports: [UInt16]? = nil, mode: RuleMode = .enforce, trust: Trust = .system,
                pins: [PinEntry] = [], pinset: String? = nil, expires: Date? = nil, onExpiry: ExpiryBehaviour? = nil,
                requireKeylog: Bool = false, quarantine: TimeInterval = Rule.defaultQuarantine, mirrorChecks: Int = 1, ct: CTMode? = nil,
                isStandIn: Bool = false, line: Int = 0) {
        self.pattern = pattern
        self.ports = ports
        self.mode = mode
        self.trust = trust
        self.pins = pins
        self.pinset = pinset
        self.expires = expires
        self.onExpiry = onExpiry
        self.requireKeylog = requireKeylog
        self.quarantine = quarantine
        self.mirrorChecks = mirrorChecks
        self.ct = ct
        self.isStandIn = isStandIn
        self.line = line
    }

    /// What a host no rule matches is checked by when `defaults.ct` is on: an unpinned rule for
    /// exactly its target, with the defaults' trust, quarantine and mirrors (its CT is `defaults.ct`).
    public static func standIn(for authority: Authority, defaults: PolicyDefaults) -> Rule {
        let pattern: RulePattern
        switch authority.target {
        case .name(let name): pattern = .host(.exact(name))  // a CONNECT's name is already normalised
        case .ip(let address): pattern = .ip(CIDR(network: address, prefixLength: address.bytes.count * 8)!)
        }
        return Rule(pattern: pattern, mode: .unpinned, trust: defaults.trust, quarantine: defaults.quarantine,
                    mirrorChecks: defaults.mirrorChecks, isStandIn: true)
    }

    /// Whether pinproxy looks at this rule's chains: pins to compare, or Certificate Transparency.
    public func checksChain(under policy: Policy) -> Bool { mode != .unpinned || policy.ctMode(under: self) != .off }

    /// Ten minutes: long enough that an interceptor caught once cannot simply try again, short
    /// enough that a false alarm heals by itself.
    public static let defaultQuarantine: TimeInterval = 600

    public func applies(to authority: Authority) -> Bool {
        pattern.matches(authority.target) && (ports?.contains(authority.port) ?? true)
    }

    /// How the rule is named in logs: `api.example.com`, `*.example.com:8443`.
    public var name: String {
        guard let ports else { return pattern.description }
        return "\(pattern):\(ports.map(String.init).joined(separator: ","))"
    }

    /// The mode in force at `now`, after `expires` / `on_expiry`.
    public func effectiveMode(at now: Date) -> RuleMode {
        guard mode == .enforce, let expires, now >= expires, onExpiry == .report else { return mode }
        return .report
    }

    /// Sort key: more specific first. Longest literal suffix, then exact / `*.` / `**.`, then a rule
    /// with `ports` before one without. IP rules: longest prefix, then `ports`.
    var specificity: (Int, Int, Int) {
        let portsRank = ports == nil ? 1 : 0
        switch pattern {
        case .host(let p): return (-p.literalSuffix.utf8.count, p.wildcardRank, portsRank)
        case .ip(let c): return (-c.prefixLength, 0, portsRank)
        }
    }
}
