import Foundation
import Testing
@testable import PinPolicy

@Suite struct LintTests {
    func codes(_ yaml: String, at time: Date = now) throws -> [String] {
        try load(yaml).get().lint(at: time).map(\.code)
    }

    @Test func singlePinRuleWantsABackup() throws {
        #expect(try codes(header + "rules:\n  - host: a.test\n    pins: [\"\(pinA)\"]\n") == ["missing_backup_pin"])
        #expect(try codes(header + "rules:\n  - host: a.test\n    pins: [{ pin: \"\(pinA)\", at: leaf }, { pin: \"\(pinB)\", at: leaf }]\n") == [])
        #expect(try codes("version: 1\ndefaults: {unpinned: allow, require_backup: off}\nrules:\n  - host: a.test\n    pins: [\"\(pinA)\"]\n") == [])
    }

    /// BackupRule: the leaf and its issuing CA match the same chain, so the CA is a backup only when
    /// the policy marks it `backup: true`; a spare leaf key, or two CAs, are left to the served chain.
    @Test func aCAPinInTheServedChainIsABackupOnlyWhenMarked() throws {
        let leafAndCA = header + "rules:\n  - host: a.test\n    pins:\n      - { pin: \"\(pinA)\", at: leaf }\n      - { pin: \"\(pinB)\", at: ca, label: issuing CA }\n"
        let warnings = try load(leafAndCA).get().lint(at: now)
        #expect(warnings.map(\.code) == ["no_real_backup"])
        #expect(warnings.first?.line == 5)
        #expect(warnings.first?.message == "the rule for 'a.test' has no real backup: its CA pin (line 8) is in the same chain as its leaf pin; a real backup is a key not in the served chain (a spare kept offline: '{ file: next-key.pub.pem, at: leaf, label: backup }') or a CA pin marked 'backup: true' (then any key that CA certifies for the name passes)")
        let marked = leafAndCA.replacingOccurrences(of: "label: issuing CA }", with: "label: issuing CA, backup: true }")
        #expect(try codes(marked) == [])
        #expect(try load(marked).get().rules[0].acceptedBackup?.pin.description == pinB)
        #expect(try codes(header + "rules:\n  - host: a.test\n    pins:\n      - { pin: \"\(pinA)\", at: leaf }\n      - { pin: \"\(pinC)\", at: leaf }\n") == [])
        #expect(try codes(header + "rules:\n  - host: a.test\n    pins:\n      - { pin: \"\(pinB)\", at: ca }\n      - { pin: \"\(pinC)\", at: ca }\n") == [])
        #expect(try codes(leafAndCA.replacingOccurrences(of: "unpinned: allow\n", with: "unpinned: allow\n  require_backup: off\n")) == [])
        #expect(try codes(leafAndCA.replacingOccurrences(of: "  - host: a.test\n", with: "  - host: a.test\n    mode: report\n")) == [])
    }

    /// `at: any` pins (what network_security_config.xml, OkHttp and TrustKit pins say) may be the
    /// server's key and its issuing CA, both in the served chain: `check` says `no_real_backup`, as
    /// the log will when they all match, unless the rule rules it out — a second leaf key, a key file
    /// (a spare kept offline), a CA marked `backup: true` — or says where each pin sits.
    @Test func atAnyPinsMayAllBeInTheServedChain() throws {
        let imported = header + "rules:\n  - host: a.test\n    pins:\n      - \"\(pinA)\"\n      - \"\(pinB)\"\n"
        let warnings = try load(imported).get().lint(at: now)
        #expect(warnings.map(\.code) == ["no_real_backup"] && warnings.first?.line == 5)
        #expect(warnings.first?.message == "the rule for 'a.test' may have no real backup: its pins at: any (lines 7, 8) may be the server's key and its issuing CA's, in the one chain the server serves (as pins imported from network_security_config.xml are), and then every pin of the rule matches that chain and pinproxy logs no_real_backup on its tunnels; say where each sits (at: leaf for the server's key, at: ca for a CA's) so that check can tell; a real backup is a key not in the served chain (a spare kept offline: '{ file: next-key.pub.pem, at: leaf, label: backup }') or a CA pin marked 'backup: true' (then any key that CA certifies for the name passes)")
        let leafAndAny = header + "rules:\n  - host: a.test\n    pins:\n      - { pin: \"\(pinA)\", at: leaf }\n      - \"\(pinB)\"\n"
        #expect(try load(leafAndAny).get().lint(at: now).first?.message.hasPrefix("the rule for 'a.test' may have no real backup: its pin at: any (line 8) may be") == true)
        // Said where they sit: a leaf and a spare leaf key; a leaf and a marked CA; a key file.
        #expect(try codes(leafAndAny.replacingOccurrences(of: "- \"\(pinB)\"", with: "- { pin: \"\(pinB)\", at: leaf }")) == [])
        #expect(try codes(leafAndAny.replacingOccurrences(of: "- \"\(pinB)\"", with: "- { pin: \"\(pinB)\", at: ca, backup: true }")) == [])
        let keyFile = try PolicyLoader.load(yaml: header + "rules:\n  - host: a.test\n    pins:\n      - \"\(pinA)\"\n      - { file: next-key.pub.pem }\n",
                                            source: "t.yaml", pinFiles: { _, _ in PinFileContents(pin: try Pin.parse(pinB).get(), notAfter: nil) })
        #expect(keyFile.lint(at: now).isEmpty)
        // The log's condition: enforced, with require_backup on.
        #expect(try codes(imported.replacingOccurrences(of: "  - host: a.test\n", with: "  - host: a.test\n    mode: report\n")) == [])
        #expect(try codes(imported.replacingOccurrences(of: "unpinned: allow\n", with: "unpinned: allow\n  require_backup: off\n")) == [])
    }

    @Test func backupTrueIsOnlyForACAPin() {
        expectError(header + "rules:\n  - host: a.test\n    pins:\n      - { pin: \"\(pinA)\", at: leaf, backup: true }\n      - \"\(pinB)\"\n",
                    line: 7, column: 94, "backup: true marks a CA pin (at: ca) as the rule's accepted backup; a leaf key not in use yet is a real backup without it")
        expectError(header + "rules:\n  - host: a.test\n    pins:\n      - { pin: \"\(pinB)\", at: ca, backup: yes }\n      - \"\(pinA)\"\n",
                    line: 7, column: 92, "backup must be true or false, not 'yes'")
    }

    @Test func certLeafPinsAloneBreakAtRenewal() throws {
        #expect(try codes(header + "rules:\n  - host: a.test\n    pins: [\"\(cert(1))\", \"\(cert(2))\"]\n") == ["cert_leaf_pins_only"])
    }

    @Test func weakerRuleUnderAnEnforcedOneIsAVisibleChoice() throws {
        let yaml = header + "rules:\n  - host: \"**.example.com\"\n    pins: [{ pin: \"\(pinA)\", at: leaf }, { pin: \"\(pinB)\", at: leaf }]\n  - host: status.example.com\n    mode: unpinned\n  - host: audit.example.com\n    mode: report\n    pins: [\"\(pinA)\"]\n  - host: other.test\n    mode: unpinned\n"
        let warnings = try load(yaml).get().lint(at: now)
        #expect(warnings.map(\.code) == ["weaker_rule_shadows_enforced", "weaker_rule_shadows_enforced"])
        #expect(warnings.map(\.line) == [7, 9])
        #expect(warnings[0].message.contains("'**.example.com' at line 5"))
    }

    @Test func expiryAndDebugWarnings() throws {
        let yaml = header + "rules:\n  - host: a.test\n    pins: [{ pin: \"\(pinA)\", at: leaf }, { pin: \"\(pinB)\", at: leaf }]\n    expires: \"2026-12-10T00:00:00Z\"\n    on_expiry: enforce\ndebug:\n  until: \"2026-12-01T00:00:00Z\"\n  hosts: [a.test]\n"
        #expect(try codes(yaml) == ["rule_expires_soon", "debug_bypass_present"])
        #expect(try codes(yaml, at: RFC3339.parse("2027-01-01T00:00:00Z")!) == ["rule_expired", "debug_bypass_expired"])
    }

    @Test func pinnedCertificateExpiringSoonAndDenylistedPin() throws {
        let soon = now.addingTimeInterval(5 * 86400)
        let policy = try PolicyLoader.load(yaml: header + "deny: [\"\(pinB)\"]\nrules:\n  - host: a.test\n    pins:\n      - { file: leaf.pem, kind: cert }\n      - { pin: \"\(pinB)\", at: leaf }\n",
                                           source: "t.yaml", pinFiles: { _, _ in PinFileContents(pin: try Pin.parse(cert(1)).get(), notAfter: soon) })
        #expect(policy.lint(at: now).map(\.code) == ["pinned_cert_expires_soon", "pin_denylisted"])
    }
}
