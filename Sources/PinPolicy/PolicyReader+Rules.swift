import Foundation
import Yams

/// The `rules:` section.
extension PolicyReader {
    func readRules(_ node: Node, proxy: ProxySettings, defaults: PolicyDefaults?, pinsets: [String: [PinEntry]]) -> [Rule] {
        guard let items = list(node, "rules", example: "[{ host: api.example.com, pins: [...] }]") else { return [] }
        var rules: [Rule] = []
        var samePattern: [RulePattern: [Rule]] = [:]  // the rules before, by pattern: no pass over all of them per rule
        for item in items {
            guard let rule = readRule(item, proxy: proxy, defaults: defaults, pinsets: pinsets) else { continue }
            if let other = samePattern[rule.pattern]?.first(where: { portsOverlap($0.ports, rule.ports) }) {
                fail(item, "this rule for '\(rule.pattern)' overlaps the rule at line \(other.line) (same pattern, and their ports overlap); exactly one rule must apply, so give them disjoint 'ports:' or merge them")
                continue
            }
            rules.append(rule)
            samePattern[rule.pattern, default: []].append(rule)
        }
        return rules
    }

    /// Two rules with the same pattern clash when neither has `ports` or their `ports`
    /// intersect. One with `ports` beside one without is a port split (the one with `ports` wins).
    private func portsOverlap(_ a: [UInt16]?, _ b: [UInt16]?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (let a?, let b?): return !Set(a).isDisjoint(with: b)
        default: return false
        }
    }

    func readRule(_ node: Node, proxy: ProxySettings, defaults: PolicyDefaults?, pinsets: [String: [PinEntry]]) -> Rule? {
        guard let f = fields(node, "a rule", allowed: .rule) else { return nil }
        let line = node.mark?.line ?? 0
        var pattern: RulePattern?
        switch (f["host"], f["ip"]) {
        case (let h?, nil):
            guard let text = string(h, "host") else { break }
            if IPAddress(text) != nil || CIDR(text) != nil {
                fail(h, "'\(text)' is an address; write 'ip: \(text)' for IP-literal targets")
                break
            }
            switch HostPattern.parse(text) {
            case .success(let p): pattern = .host(p)
            case .failure(let problem): fail(h, "bad host pattern '\(text)': \(problem.message)")
            }
        case (nil, let i?):
            guard let text = string(i, "ip") else { break }
            if let cidr = CIDR(text) { pattern = .ip(cidr) } else { fail(i, "'\(text)' is not an IP address or CIDR such as 10.0.0.0/8 or 2001:db8::/32") }
        case (nil, nil):
            fail(node, "a rule needs 'host:' (a name pattern) or 'ip:' (an address or CIDR)")
        case (_?, _?):
            fail(node, "a rule has either 'host:' or 'ip:', not both")
        }

        var ports: [UInt16]?
        if let n = f["ports"], let list = self.ports(n, "ports") {
            for (port, item) in zip(list, n.sequence.map(Array.init) ?? []) where !proxy.allowedPorts.contains(port) {
                fail(item, "port \(port) is not in proxy.allowed_ports (\(proxy.allowedPorts.map(String.init).joined(separator: ", "))); CONNECTs to it are refused before any rule applies")
            }
            ports = list
        }
        let errorsBeforePins = errors.count
        var pins = f["pins"].map { pinEntries($0, "pins") } ?? []
        var pinsetName: String?
        if let n = f["pinset"], let name = string(n, "pinset") {
            if let set = pinsets[name] {
                pins = set + pins
                pinsetName = name
            } else {
                let known = pinsets.keys.sorted()
                fail(n, "unknown pinset '\(name)'" + (known.isEmpty ? "; there is no pinsets: section" : "; known pinsets: \(known.joined(separator: ", "))"))
            }
        }
        let ct = f["ct"].flatMap { ctMode($0, "ct") }
        if let n = f["ct"], let ct, ct != .off, proxy.ct.logList == nil {
            fail(n, "this rule has ct: \(ct.rawValue), but there is no proxy.ct_log_list to judge SCTs by; add proxy.ct_log_list: /var/lib/pinproxy/ct/log_list.json (see pinproxy ct-list)")
        }
        // A rule with `ct` and nothing to pin only sets Certificate Transparency for its hosts.
        let ctOnly = f["ct"] != nil && f["pins"] == nil && f["pinset"] == nil && f["mode"] == nil
        let mode = f["mode"].flatMap { choice($0, "mode", RuleMode.self, options: [.enforce, .report, .unpinned]) } ?? (ctOnly ? .unpinned : .enforce)
        // An unpinned rule still has its chains looked at when CT applies to it.
        let checksCT = (ct ?? defaults?.ct ?? .off) != .off
        let trust = f["trust"].flatMap { self.trust($0, "trust") } ?? defaults?.trust ?? .system
        let expires = f["expires"].flatMap { date($0, "expires") }
        let onExpiry = f["on_expiry"].flatMap { choice($0, "on_expiry", ExpiryBehaviour.self, options: [.enforce, .report]) }
        let requireKeylog = f["require_keylog"].flatMap { boolean($0, "require_keylog") } ?? defaults?.requireKeylog ?? false
        let quarantine = f["quarantine"].flatMap { self.quarantine($0, "quarantine") } ?? defaults?.quarantine ?? Rule.defaultQuarantine
        let mirrorChecks = f["mirror_checks"].flatMap { integer($0, "mirror_checks", in: 0...4) } ?? defaults?.mirrorChecks ?? 1

        let patternText = pattern?.description ?? "?"
        switch mode {
        case .unpinned:
            if !pins.isEmpty { fail(f["pins"] ?? f["pinset"], "the rule for '\(patternText)' is mode: unpinned, so its pins would never be checked; remove them or use mode: report") }
            // Under `ct`, pinproxy validates the chain under `trust` (OpenSSL builds it to an anchor of
            // that store): the deny list is looked for in that chain, the root a server does not send
            // included. A chain the store does not validate is not refused for that: for a host nobody
            // pinned the client judges trust, pinproxy judges the SCTs and the deny list.
            if let n = f["trust"] {
                if !checksCT {
                    fail(n, "the rule for '\(patternText)' is mode: unpinned without ct: its tunnels are not probed, so 'trust' has no effect")
                } else if trust == .pinsOnly {
                    fail(n, "the rule for '\(patternText)' has no pins, and under trust: pins-only a pinned certificate is the only anchor, so no chain would ever be built; use system or ca-file:PATH (the store whose chain the deny list is looked for in)")
                }
            }
            if f["require_keylog"] != nil {
                fail(f["require_keylog"], checksCT
                     ? "the rule for '\(patternText)' has no pins: require_keylog applies to pinned tunnels, and a host checked for Certificate Transparency alone is verified by the mirror check when its client writes no key log, so 'require_keylog' has no effect"
                     : "the rule for '\(patternText)' is mode: unpinned without ct: its tunnels are not probed, so 'require_keylog' has no effect")
            }
            if f["quarantine"] != nil, !checksCT { fail(f["quarantine"], "the rule for '\(patternText)' is mode: unpinned without ct: no chain is checked, so nothing is caught and 'quarantine' has no effect") }
            if f["mirror_checks"] != nil, !checksCT { fail(f["mirror_checks"], "the rule for '\(patternText)' is mode: unpinned without ct: no chain is checked, so 'mirror_checks' has no effect") }
        case .enforce, .report:
            if pins.isEmpty && errors.count == errorsBeforePins {
                fail(node, "the rule for '\(patternText)' has no pins; an \(mode.rawValue) rule needs at least one (pins: or pinset:), or write mode: unpinned to exclude the name")
            }
            if mode == .enforce, defaults?.requireBackup == .error, Set(pins.map(\.pin)).count < 2, !pins.isEmpty {
                fail(node, "the rule for '\(patternText)' has \(Set(pins.map(\.pin)).count) distinct pin; defaults.require_backup is 'error', so add a backup pin (a key kept offline, or the issuing CA)")
            }
        }
        if expires != nil, onExpiry == nil, f["expires"] != nil {
            fail(f["expires"], "'expires' needs 'on_expiry: enforce' or 'on_expiry: report' to say what happens after it")
        }
        if expires == nil, f["on_expiry"] != nil, f["expires"] == nil {
            fail(f["on_expiry"], "'on_expiry' only means something with 'expires'")
        }
        if expires != nil, mode != .enforce {
            fail(f["expires"], "'expires' applies to enforced rules only (this rule is mode: \(mode.rawValue))")
        }
        if let n = f["require_keylog"], requireKeylog, proxy.keylog == nil {
            fail(n, "the rule for '\(patternText)' has require_keylog: true, but there is no proxy.keylog for clients to write their key lines to; add proxy.keylog: { path: /run/pinproxy/keylog }")
        }
        guard let pattern else { return nil }
        let effective = mode == .unpinned ? false : requireKeylog
        return Rule(pattern: pattern, ports: ports, mode: mode, trust: trust, pins: pins, pinset: pinsetName,
                    expires: expires, onExpiry: onExpiry, requireKeylog: effective, quarantine: quarantine, mirrorChecks: mirrorChecks,
                    ct: ct, line: line)
    }
}
