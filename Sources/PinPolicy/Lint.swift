import Foundation

/// A warning about a policy that loads but is likely to hurt: rotation hygiene and
/// exclusions that should be visible choices.
public struct LintWarning: Hashable, Sendable, CustomStringConvertible {
    public let line: Int
    /// Stable code, also used in log lines.
    public let code: String
    public let message: String

    public var description: String { "line \(line): warning[\(code)]: \(message)" }
}

extension Policy {
    public func lint(at now: Date) -> [LintWarning] {
        var warnings: [LintWarning] = []
        func warn(_ line: Int, _ code: String, _ message: String) {
            warnings.append(LintWarning(line: line, code: code, message: message))
        }
        let soon: TimeInterval = 30 * 86400
        for rule in rules where rule.mode != .unpinned {
            let distinct = Set(rule.pins.map(\.pin))
            if defaults.requireBackup == .warn, rule.mode == .enforce, distinct.count < 2 {
                warn(rule.line, "missing_backup_pin", "the rule for '\(rule.name)' has only one distinct pin; when that key is rotated every CONNECT is refused. Add a backup: \(BackupRule.advice)")
            } else if defaults.requireBackup != .off, rule.mode == .enforce, let ca = rule.caPinInServedChain {
                warn(rule.line, "no_real_backup", "the rule for '\(rule.name)' has no real backup: its CA pin (line \(ca.line)) is in the same chain as its leaf pin; \(BackupRule.advice)")
            } else if defaults.requireBackup != .off, rule.mode == .enforce, case let unplaced = rule.unplacedPinsInServedChain, !unplaced.isEmpty {
                // What the log says of the served chain, said here of what the file can tell: the
                // same code, so `check` and `run` name one warning.
                let lines = unplaced.map(\.line).reduce(into: [Int]()) { if !$0.contains($1) { $0.append($1) } }.map(String.init).joined(separator: ", ")
                warn(rule.line, "no_real_backup", "the rule for '\(rule.name)' may have no real backup: its pin\(unplaced.count == 1 ? "" : "s") at: any (line\(lines.contains(",") ? "s" : "") \(lines)) may be the server's key and its issuing CA's, in the one chain the server serves (as pins imported from network_security_config.xml are), and then every pin of the rule matches that chain and pinproxy logs no_real_backup on its tunnels; say where each sits (at: leaf for the server's key, at: ca for a CA's) so that check can tell; \(BackupRule.advice)")
            }
            if !rule.pins.isEmpty, rule.pins.allSatisfy({ $0.pin.kind == .cert && $0.position == .leaf }) {
                warn(rule.line, "cert_leaf_pins_only", "the rule for '\(rule.name)' pins only whole leaf certificates (cert-sha256); every renewal breaks it, even with the same key. Prefer spki-sha256 pins")
            }
            for entry in rule.pins where entry.pin.kind == .cert {
                if let notAfter = entry.notAfter, notAfter.timeIntervalSince(now) < soon {
                    warn(entry.line, "pinned_cert_expires_soon", "the pinned certificate \(entry.file ?? "") expires \(RFC3339.format(notAfter)); its cert-sha256 pin stops matching at renewal")
                }
            }
            for entry in rule.pins where deny.contains(entry.pin) {
                warn(entry.line, "pin_denylisted", "\(entry.pin) is accepted by the rule for '\(rule.name)' and also in deny:; the deny list wins")
            }
            if let expires = rule.expires {
                if expires <= now {
                    warn(rule.line, "rule_expired", "the rule for '\(rule.name)' expired \(RFC3339.format(expires)) (on_expiry: \(rule.onExpiry?.rawValue ?? "?")); refresh its pins and its expires")
                } else if expires.timeIntervalSince(now) < soon {
                    warn(rule.line, "rule_expires_soon", "the rule for '\(rule.name)' expires \(RFC3339.format(expires)); refresh its pins and its expires before then")
                }
            }
        }
        for rule in rules where rule.mode != .enforce {
            if let broader = broaderEnforcedRule(than: rule) {
                warn(rule.line, "weaker_rule_shadows_enforced", "the rule for '\(rule.name)' (mode: \(rule.mode.rawValue)) is chosen for names that the enforced rule for '\(broader.name)' at line \(broader.line) would otherwise pin; make sure this exclusion is intended")
            }
        }
        for (name, addresses) in resolve.sorted(by: { $0.key < $1.key }) {
            let denied = addresses.compactMap { address in proxy.denyDestinations.entry(containingAnyFormOf: address).map { (address, $0.name) } }
            guard !denied.isEmpty else { continue }
            let listed = denied.map { "\($0.0) (\($0.1))" }.joined(separator: ", ")
            let effect = denied.count == addresses.count
                ? "every CONNECT to it is refused with 403 destination_ip_prohibited"
                : "those addresses are never used"
            warn(resolveLines[name] ?? 0, "resolve_to_denied_destination",
                 "resolve: sends '\(name)' to \(listed), which proxy.deny_destinations refuses: \(effect); take that class out of deny_destinations if this destination is intended, or map the name elsewhere")
        }
        if let debug {
            if debug.until > now {
                warn(debug.line, "debug_bypass_present", "a debug bypass for \(debug.hosts.map(\.description).joined(separator: ", ")) is in force until \(RFC3339.format(debug.until)) whenever pinproxy runs with --debug-bypass; remove it when done")
            } else {
                warn(debug.line, "debug_bypass_expired", "the debug bypass ended \(RFC3339.format(debug.until)); remove the debug: section")
            }
        }
        warnings += transparentWarnings()  // Lint+Transparent.swift
        return warnings.sorted { $0.line < $1.line }
    }

    /// An enforced rule that would apply to the names of `rule` if `rule` were not there.
    private func broaderEnforcedRule(than rule: Rule) -> Rule? {
        let sample: Authority
        switch rule.pattern {
        case .host(.exact(let s)), .host(.anyDepth(let s)):
            sample = Authority(target: .name(s), port: rule.ports?.first ?? proxy.allowedPorts.first ?? 443)
        case .host(.oneLabel(let s)):
            sample = Authority(target: .name("x." + s), port: rule.ports?.first ?? proxy.allowedPorts.first ?? 443)
        case .ip(let c):
            sample = Authority(target: .ip(c.network), port: rule.ports?.first ?? proxy.allowedPorts.first ?? 443)
        }
        guard let fallback = self.rule(for: sample, except: rule), fallback.mode == .enforce else { return nil }
        return fallback
    }
}
