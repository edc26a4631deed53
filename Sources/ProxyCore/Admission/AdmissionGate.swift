import Foundation
import PinPolicy

/// How a client asks to reach a destination: a CONNECT tunnel, or one plain-HTTP request.
enum AdmissionKind: Equatable, Sendable {
    case connect
    case plain
}

/// Why admission refuses, with the evidence its detail names. The one place a refusal's reason,
/// status and detail text are made from what admission saw.
enum AdmissionCause: Equatable, Sendable {
    /// `proxy.plain_http: refuse` (plain only).
    case plainHTTPRefused
    case clientNotAllowed(IPAddress)
    /// A rule pins this host on some port, so it is never reached in cleartext (plain only).
    case pinnedHostOverPlain(Target, Rule)
    /// Not in `allowed_ports` (CONNECT) or `allowed_plain_ports` (plain).
    case portNotAllowed(AdmissionKind, UInt16, allowed: [UInt16])
    /// An IP-literal target in `deny_destinations`, with the entry that names it.
    case destinationDenied(Target, entry: String)
    /// No rule, and `defaults.unpinned: deny`.
    case unpinnedDenied(AdmissionKind, Target)

    var refusal: Refusal {
        switch self {
        case .plainHTTPRefused:
            return Refusal(.network(.plainHTTPRefused), detail: "proxy.plain_http is refuse: pinproxy forwards no plain-HTTP request")
        case .clientNotAllowed(let client):
            return .policy(.clientNotAllowed, detail: "client \(client) is not in allow_clients")
        case .pinnedHostOverPlain(let target, let rule):
            return Refusal(.network(.plainHTTPToPinnedHost),
                           detail: "\(target) is pinned by the rule \(rule.name) (line \(rule.line)), so it is reached only over HTTPS")
        case .portNotAllowed(let kind, let port, let allowed):
            let list = allowed.map(String.init).joined(separator: ", ")
            switch kind {
            case .connect: return .policy(.portNotAllowed, detail: "port \(port) is not in allowed_ports (\(list))")
            case .plain: return Refusal(.network(.plainPortNotAllowed), detail: "port \(port) is not in allowed_plain_ports (\(list))")
            }
        case .destinationDenied(let target, let entry):
            return .policy(.destinationProhibited, detail: "\(target) is in deny_destinations (\(entry))")
        case .unpinnedDenied(.connect, let target):
            return .policy(.unpinnedDenied, detail: "no rule pins \(target) and defaults.unpinned is deny")
        case .unpinnedDenied(.plain, let target):
            return .policy(.unpinnedDenied, detail: "no rule lets plain HTTP reach \(target) and defaults.unpinned is deny")
        }
    }

    /// The policy's reason, when the cause is one (`tunnel_refused`'s verdict); nil for the plain-HTTP codes.
    var policyReason: RefusalReason? {
        if case .policy(let reason) = refusal.code { return reason }
        return nil
    }
}

/// What admission makes of a request before any DNS or certificate.
enum AdmissionOutcome: Equatable, Sendable {
    case refused(AdmissionCause)
    /// Reached without looking at a certificate; `rule` is the `unpinned` rule that says so, if any.
    case unpinned(UnpinnedBasis, rule: Rule?)
    /// Probe the upstream and judge its chain under this rule (CONNECT only): a pinning rule, or an
    /// unpinned one (a rule's, or `Rule.standIn` for no rule) whose hosts CT applies to.
    case probe(Rule)

    /// The refusal to answer, when refused.
    var refusal: Refusal? {
        if case .refused(let cause) = self { return cause.refusal }
        return nil
    }
}

/// "May this client reach this destination": decided here, for a CONNECT, a plain-HTTP request and a
/// reload's second look at an open tunnel. Pure: no sockets, no logs.
///
/// The steps are those of "How a CONNECT is decided" (docs/policy.md) — client, port, IP-literal
/// destination, rule — with plain HTTP's own first: `plain_http: refuse` before everything, and a
/// host a rule pins (on any port) refused right after the client, before its port is looked at.
enum AdmissionGate {
    static func admit(_ authority: Authority, client: IPAddress, policy: Policy, kind: AdmissionKind) -> AdmissionOutcome {
        if kind == .plain, policy.proxy.plainHTTP == .refuse { return .refused(.plainHTTPRefused) }
        if let cause = refusesClient(client, policy: policy) { return .refused(cause) }
        return admitFromAnyClient(authority, policy: policy, kind: kind)
    }

    /// Every step after the client's, for a client `allow_clients` lets in (and for `pinproxy check
    /// --explain`, which names no client).
    static func admitFromAnyClient(_ authority: Authority, policy: Policy, kind: AdmissionKind) -> AdmissionOutcome {
        let settings = policy.proxy
        if kind == .plain, let rule = pinningRule(for: authority.target, policy: policy) {
            return .refused(.pinnedHostOverPlain(authority.target, rule))
        }
        let ports = kind == .connect ? settings.allowedPorts : settings.allowedPlainPorts
        if !ports.contains(authority.port) { return .refused(.portNotAllowed(kind, authority.port, allowed: ports)) }
        if case .ip(let address) = authority.target, let entry = settings.denyDestinations.entry(containingAnyFormOf: address) {
            return .refused(.destinationDenied(authority.target, entry: entry.name))
        }
        guard let rule = policy.rule(for: authority) else {
            switch policy.defaults.unpinned {
            case .allow:
                // `defaults.ct` has pinproxy look at the chains of hosts nobody pinned.
                if kind == .connect, policy.defaults.ct != .off { return .probe(.standIn(for: authority, defaults: policy.defaults)) }
                return .unpinned(.noRule, rule: nil)
            case .deny: return .refused(.unpinnedDenied(kind, authority.target))
            }
        }
        if rule.mode == .unpinned {
            return kind == .connect && rule.checksChain(under: policy) ? .probe(rule) : .unpinned(.ruleUnpinned, rule: rule)
        }
        // A plain request never gets here with a pinning rule: `pinningRule` saw it first.
        return kind == .connect ? .probe(rule) : .refused(.pinnedHostOverPlain(authority.target, rule))
    }

    /// The first step alone, for the accept: a client outside `allow_clients` never gets a session.
    static func refusesClient(_ client: IPAddress, policy: Policy) -> AdmissionCause? {
        policy.proxy.allowClients.contains(client) ? nil : .clientNotAllowed(client)
    }

    /// The first rule that pins this host on any port (a rule in `unpinned` mode pins nothing).
    static func pinningRule(for target: Target, policy: Policy) -> Rule? {
        let matching = if case .ip(let address) = target, let embedded = address.embeddedIPv4 {
            policy.rules(matching: target, .ip(embedded))
        } else {
            policy.rules(matching: target)
        }
        return matching.first { $0.mode != .unpinned }
    }
}
