import Foundation
import PinPolicy
import Testing
@testable import ProxyCore

/// A reload keeps a quarantine while the host's own rule means what it meant when the incident was
/// caught: a `deny:` key added above the rules (which moves every rule's and pin's line), another
/// rule's edit or a label leaves it; a change to the host's rule lifts it.
@Suite struct QuarantineReloadTests {
    static let yaml = """
        version: 1
        proxy: { allowed_ports: [443, 8443] }
        defaults: { unpinned: allow, require_backup: off }
        rules:
          - host: api.example.test
            pins:
              - { pin: "spki-sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", at: leaf, label: leaf }
              - { pin: "spki-sha256:BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBA=", at: ca, backup: true }
          - host: other.example.test
            pins: ["spki-sha256:CCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCCA="]

        """
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let api = try! Authority.parse("api.example.test:443").get()

    static func policy(_ yaml: String) throws -> Policy {
        try PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil)
    }

    /// A quarantine caught under `yaml`'s rule, then a reload to `edited`: what it lifted.
    func lifted(by edited: String) throws -> [Authority] {
        let quarantine = Quarantine()
        let rule = try #require(try Self.policy(Self.yaml).rule(for: Self.api))
        _ = quarantine.enter(Self.api, rule: rule, at: Self.start)
        return quarantine.reloaded(try Self.policy(edited)).map(\.key)
    }

    @Test func editsElsewhereKeepIt() throws {
        let denied = Self.yaml.replacingOccurrences(of: "rules:\n", with: "deny:\n  - \"spki-sha256:DDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDDA=\"\nrules:\n")
        #expect(try lifted(by: denied).isEmpty)
        #expect(try lifted(by: Self.yaml.replacingOccurrences(of: "label: leaf", with: "label: current leaf key")).isEmpty)
        #expect(try lifted(by: Self.yaml.replacingOccurrences(of: "CCCCCCCC", with: "EEEEEEEE")).isEmpty)
        #expect(try lifted(by: Self.yaml + "  - host: new.example.test\n    mode: unpinned\n").isEmpty)
    }

    @Test(arguments: [
        ("at: leaf, label: leaf", "at: any, label: leaf"),
        (", backup: true", ""),
        ("AAAAAAAA", "FFFFFFFF"),
        ("  - host: api.example.test\n", "  - host: api.example.test\n    mirror_checks: 0\n"),
        ("  - host: api.example.test\n", "  - host: api.example.test\n    ports: [8443]\n"),
    ])
    func aChangeToItsOwnRuleLiftsIt(old: String, new: String) throws {
        #expect(try lifted(by: Self.yaml.replacingOccurrences(of: old, with: new)) == [Self.api])
    }
}
