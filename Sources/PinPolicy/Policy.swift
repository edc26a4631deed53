import Foundation

/// The loaded configuration and pin policy: an immutable snapshot. Each CONNECT is judged by the
/// snapshot in force when it arrived; a reload makes a new one.
public struct Policy: Hashable, Sendable {
    public var source: String
    public var proxy: ProxySettings
    public var defaults: PolicyDefaults
    /// `resolve:`: name → addresses, tried before DNS.
    public var resolve: [String: [IPAddress]]
    /// The line of each `resolve:` entry, for lint warnings about it.
    public var resolveLines: [String: Int] = [:]
    /// Keys known to be compromised.
    public var deny: [Pin]
    public var pinsets: [String: [PinEntry]]
    /// In file order.
    public var rules: [Rule] { didSet { index = Derived(RuleIndex(rules)) } }
    public var debug: DebugBypass?
    /// Where each rule is by what it matches, made once per policy (each reload makes a new one;
    /// every worker shares it). Left out of `==` and `hash(into:)`: it follows from `rules`.
    private var index: Derived<RuleIndex>

    public init(source: String = "<memory>", proxy: ProxySettings = ProxySettings(), defaults: PolicyDefaults,
                resolve: [String: [IPAddress]] = [:], deny: [Pin] = [], pinsets: [String: [PinEntry]] = [:],
                rules: [Rule] = [], debug: DebugBypass? = nil) {
        self.source = source
        self.proxy = proxy
        self.defaults = defaults
        self.resolve = resolve
        self.deny = deny
        self.pinsets = pinsets
        self.rules = rules
        self.debug = debug
        self.index = Derived(RuleIndex(rules))
    }

    /// The single most specific rule for a CONNECT target, or nil. Rules never union.
    ///
    /// An IPv6 literal that embeds an IPv4 address (mapped, compatible, NAT64: `embeddedIPv4`)
    /// reaches that IPv4 host, so a rule written for the IPv4 address applies to it first; otherwise
    /// `CONNECT [64:ff9b::cb00:7107]:443` would slip past the pins of an `ip: 203.0.113.7` rule.
    public func rule(for authority: Authority) -> Rule? { rule(for: authority, except: nil) }

    /// The same, as if the file did not have `excluded` (what lint asks: which rule would apply without it).
    func rule(for authority: Authority, except excluded: Rule?) -> Rule? {
        if case .ip(let address) = authority.target, let embedded = address.embeddedIPv4,
           let rule = mostSpecificRule(for: Authority(target: .ip(embedded), port: authority.port), except: excluded) {
            return rule
        }
        return mostSpecificRule(for: authority, except: excluded)
    }

    /// Every rule whose pattern matches one of `targets` on any port, once each, in file order: the
    /// few the index finds, so that a caller never looks at all of them.
    public func rules(matching targets: Target...) -> [Rule] {
        Set(targets.flatMap { index.value.positions(matching: $0) }).sorted().map { rules[$0] }
    }

    /// The rule whose checks a CONNECT to `authority` gets: its own rule, or, for a host no rule
    /// matches while `defaults.ct` has pinproxy look at it, the stand-in for the defaults
    /// (`Rule.standIn`). Nil when nothing looks at the chain there.
    public func checkingRule(for authority: Authority) -> Rule? {
        if let rule = rule(for: authority) { return rule }
        guard defaults.unpinned == .allow, defaults.ct != .off else { return nil }
        return .standIn(for: authority, defaults: defaults)
    }

    /// Among equally specific rules the first in the file (`min` keeps the first of equals).
    private func mostSpecificRule(for authority: Authority, except excluded: Rule?) -> Rule? {
        rules(matching: authority.target).filter { $0.applies(to: authority) && $0 != excluded }.min { $0.specificity < $1.specificity }
    }

    /// Whether the debug bypass is in force for this target now.
    public func debugBypass(for target: Target, at now: Date, enabled: Bool) -> DebugBypass? {
        guard enabled, let debug, now < debug.until, debug.covers(target) else { return nil }
        return debug
    }
}

/// A value computed from the other fields of the struct that holds it: every two are equal and it
/// adds nothing to a hash, so the holder's synthesised `==` and `hash(into:)` compare only what it
/// was computed from.
struct Derived<Value: Sendable>: Hashable, Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
    static func == (_: Derived, _: Derived) -> Bool { true }
    func hash(into hasher: inout Hasher) {}
}

extension Policy {
    /// Steps 4–7 of "How a CONNECT is decided" (docs/policy.md), on the result of validating the upstream's chain
    /// under `rule.trust`. First failure wins:
    ///
    /// 1. the chain did not validate, or the hostname did not match → refuse in every mode
    ///    (only the debug bypass lets it through);
    /// 2. a `deny` pin anywhere in the verified chain (or, when validation failed, anywhere in what
    ///    was presented, so a bypass cannot carry a deny-listed key) → refuse, never bypassed;
    /// 3. one of the rule's pins matches at an allowed position → allow;
    /// 4. no pin matches → `enforce` refuses, `report` (or an expired rule with `on_expiry: report`)
    ///    tunnels and logs would-refuse; the debug bypass turns a refusal into a tunnel.
    ///
    /// 5. then Certificate Transparency (`ct`), when the pins let the chain through: a leaf that
    ///    fails Chrome's policy is refused under `require` (only the debug bypass lets it through,
    ///    not a pin rule's report mode: pins and CT must both hold), and let through with a
    ///    would-refuse under `report` or a stale list.
    ///
    /// An unpinned rule (CT only, or the stand-in for a host no rule matches) compares no pins and
    /// refuses no chain the client may trust by itself; only the deny list and CT apply to it.
    /// Revocation and key usage beyond OpenSSL's server-purpose check are not looked at.
    public func evaluate(_ validation: ChainValidation, rule: Rule, target: Target, at now: Date,
                         debugBypassEnabled: Bool, ct: CTStatus? = nil) -> Evaluation {
        let bypass = debugBypass(for: target, at: now, enabled: debugBypassEnabled)
        var evaluation = evaluatePins(validation, rule: rule, at: now, bypass: bypass)
        evaluation.ct = ct
        guard case .judged(let finding)? = ct, !finding.isCompliant else { return evaluation }
        let verdict: Verdict
        switch evaluation.verdict {
        case .refused:
            return evaluation  // the pins' refusal comes first
        case .bypassed(_, .debugBypass):
            return evaluation
        case .allowed, .unpinned, .bypassed:
            if finding.enforced == .require {
                verdict = bypass.map { .bypassed(wouldRefuse: .ctNotCompliant, by: .debugBypass(until: $0.until)) } ?? .refused(.ctNotCompliant)
            } else if case .bypassed = evaluation.verdict {
                return evaluation  // one would-refuse is named; `ct=report` says the other
            } else {
                verdict = .bypassed(wouldRefuse: .ctNotCompliant, by: finding.mode == .require ? .ctStaleList : .ctReport)
            }
        }
        return Evaluation(verdict: verdict, rule: evaluation.rule, denylisted: nil, chainFailure: nil, warnings: evaluation.warnings, ct: ct)
    }

    private func evaluatePins(_ validation: ChainValidation, rule: Rule, at now: Date, bypass: DebugBypass?) -> Evaluation {
        var warnings: [RuntimeWarning] = []
        if let expires = rule.expires {
            if now >= expires { warnings.append(.ruleExpired(expires)) }
            else if expires.timeIntervalSince(now) < 30 * 86400 { warnings.append(.ruleExpiresSoon(expires)) }
        }
        func result(_ verdict: Verdict, denylisted: Pin? = nil, failure: ChainFailure? = nil) -> Evaluation {
            Evaluation(verdict: verdict, rule: rule, denylisted: denylisted, chainFailure: failure, warnings: warnings)
        }

        if rule.mode == .unpinned {
            let seen = switch validation {
            case .failed(_, let presented): presented
            case .verified(let chain): chain.certificates.map(\.facts)
            }
            if let hit = denylisted(in: seen) { return result(.refused(.denylistedKey), denylisted: hit) }
            return result(.unpinned(rule.isStandIn ? .noRule : .ruleUnpinned))
        }

        let chain: VerifiedChain
        switch validation {
        case .failed(let failure, let presented):
            if let hit = denylisted(in: presented) { return result(.refused(.denylistedKey), denylisted: hit, failure: failure) }
            if let bypass { return result(.bypassed(wouldRefuse: failure.reason, by: .debugBypass(until: bypass.until)), failure: failure) }
            return result(.refused(failure.reason), failure: failure)
        case .verified(let verified):
            chain = verified
        }

        if let hit = denylisted(in: chain.certificates.map(\.facts)) { return result(.refused(.denylistedKey), denylisted: hit) }
        if chain.leaf.notAfter.timeIntervalSince(now) < 30 * 86400 { warnings.append(.leafExpiresSoon(notAfter: chain.leaf.notAfter)) }

        if let match = firstMatch(of: rule.pins, in: chain) {
            // BackupRule: what `check` lints for enforced rules, the log says of the served chain.
            if defaults.requireBackup != .off, rule.mode == .enforce, Set(rule.pins.map(\.pin)).count >= 2, rule.acceptedBackup == nil,
               rule.pins.allSatisfy({ entry in firstMatch(of: [entry], in: chain) != nil }) {
                warnings.append(.noRealBackup)
            }
            return result(.allowed(match))
        }
        switch rule.effectiveMode(at: now) {
        case .report:
            let basis: BypassBasis = rule.mode == .report ? .reportMode : .expiredRule
            return result(.bypassed(wouldRefuse: .pinMismatch, by: basis))
        case .enforce, .unpinned:
            if let bypass { return result(.bypassed(wouldRefuse: .pinMismatch, by: .debugBypass(until: bypass.until))) }
            return result(.refused(.pinMismatch))
        }
    }

    private func denylisted(in certificates: [CertificateFacts]) -> Pin? {
        for facts in certificates {
            if let hit = deny.first(where: { facts.matches($0) }) { return hit }
        }
        return nil
    }

    /// The first pin (in rule order) that matches a certificate at a position it allows.
    private func firstMatch(of entries: [PinEntry], in chain: VerifiedChain) -> PinMatch? {
        for entry in entries {
            for cert in chain.certificates where entry.position.allows(position: cert.position) {
                if cert.facts.matches(entry.pin) { return PinMatch(entry: entry, position: cert.position) }
            }
        }
        return nil
    }
}
