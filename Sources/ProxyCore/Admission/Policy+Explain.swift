import PinPolicy

extension Policy {
    /// What happens to a CONNECT target, in words, for `pinproxy check --explain`: which rule applies
    /// and why, and the pins it accepts. Decided by the proxy's own admission gate, for any client
    /// (the explanation names no client, so `allow_clients` is not looked at).
    public func explain(_ authority: Authority) -> [String] {
        var lines = ["CONNECT \(authority)"]
        switch AdmissionGate.admitFromAnyClient(authority, policy: self, kind: .connect) {
        case .refused(let cause):
            switch cause {
            case .portNotAllowed:
                lines.append("refused before any rule: port \(authority.port) is not in proxy.allowed_ports (\(proxy.allowedPorts.map(String.init).joined(separator: ", "))) → \(cause.refusal.status)")
            case .destinationDenied:
                lines.append("refused before any rule: the address is in proxy.deny_destinations (\(proxy.denyDestinations)) → \(cause.refusal.status)")
            case .unpinnedDenied:
                lines.append("no rule matches; defaults.unpinned is deny → refused with \(cause.refusal.status)")
            default:
                lines.append("refused: \(cause.refusal.reason)")
            }
        case .unpinned(.noRule, _):
            lines.append("no rule matches; defaults.unpinned is allow → tunnelled without any certificate check (logged as tunnel_unpinned)")
        case .unpinned(_, let rule?):
            lines.append("rule at line \(rule.line): '\(rule.name)' (mode: unpinned) → tunnelled without any certificate check")
            lines += candidatesNote(authority, chosen: rule)
        case .unpinned:
            break
        case .probe(let rule) where rule.mode == .unpinned:
            // No pins: pinproxy looks at the chain for Certificate Transparency only.
            if rule.isStandIn {
                lines.append("no rule matches; defaults.unpinned is allow and defaults.ct is \(ctMode(under: rule).rawValue) → probed and checked for Certificate Transparency only (logged as tunnel_unpinned with ct=)")
            } else {
                lines.append("rule at line \(rule.line): '\(rule.name)' (mode: unpinned, ct: \(ctMode(under: rule).rawValue)) → probed and checked for Certificate Transparency only")
                lines += candidatesNote(authority, chosen: rule)
            }
        case .probe(let rule):
            lines.append("rule at line \(rule.line): '\(rule.name)', mode: \(rule.mode.rawValue), trust: \(rule.trust)" + (rule.pinset.map { ", pinset: \($0)" } ?? ""))
            lines += candidatesNote(authority, chosen: rule)
            lines.append("the chain must validate under trust \(rule.trust) with the hostname check; then one of these pins must match:")
            for entry in rule.pins {
                lines.append("  \(entry.pin)  at: \(entry.position.rawValue)" + (entry.label.map { "  (\($0))" } ?? ""))
            }
            switch (rule.trust, rule.mode) {
            case (.pinsOnly, _):
                // Under pins-only a pinned certificate is the only anchor: no match means no valid
                // chain, and an invalid chain is refused in every mode.
                lines.append("no match → refused with \(Refusal.Code.policy(.chainInvalid).answerLine) (\(RefusalReason.chainInvalid.rawValue): under trust pins-only a pinned certificate is the only anchor; in every mode)")
            case (_, .report): lines.append("no match → tunnelled anyway and logged as would-refuse (mode: report)")
            default: lines.append("no match → refused with \(Refusal.Code.policy(.pinMismatch).answerLine)")
            }
            if let expires = rule.expires { lines.append("expires \(RFC3339.format(expires)); after that: on_expiry \(rule.onExpiry?.rawValue ?? "?")") }
        }
        if let debug, debug.covers(authority.target) {
            lines.append("debug bypass covers this host until \(RFC3339.format(debug.until)) when pinproxy runs with --debug-bypass")
        }
        return lines
    }

    private func candidatesNote(_ authority: Authority, chosen: Rule) -> [String] {
        let others = rules(matching: authority.target).filter { $0.applies(to: authority) && $0 != chosen }
        guard !others.isEmpty else { return [] }
        return ["also matching but less specific (never combined): " + others.map { "'\($0.name)' (line \($0.line))" }.joined(separator: ", ")]
    }
}
