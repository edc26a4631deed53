import Foundation
import Testing
@testable import PinPolicy

/// What `policy_reloaded changes=` says: a rule changed in anything that decides its tunnels (its
/// `ct`, its mirrors, where a pin may match, a backup mark) and every `defaults` key; an edit
/// elsewhere in the file that only moves a rule's lines changes nothing.
@Suite struct PolicyDiffTests {
    static let base = """
        version: 1
        defaults:
          unpinned: allow
        rules:
          - host: a.test
            pins:
              - { pin: "\(pinA)", at: leaf, label: leaf }
              - { pin: "\(pinB)", at: ca, label: issuing CA, backup: true }
          - host: b.test
            pins: ["\(pinA)", "\(pinC)"]

        """

    func diff(_ old: String, _ new: String) throws -> PolicyDiff {
        PolicyDiff(from: try load(old).get(), to: try load(new).get())
    }

    @Test func anEditThatOnlyMovesLinesIsNoChange() throws {
        let moved = Self.base.replacingOccurrences(of: "version: 1\n", with: "version: 1\n# a comment\n\n")
            .replacingOccurrences(of: "label: leaf", with: "label: the leaf key")
        let d = try diff(Self.base, moved)
        #expect(d.isEmpty)
        #expect(d.summary == "no change to rules, pins, deny or defaults")
        let denied = Self.base.replacingOccurrences(of: "rules:\n", with: "deny:\n  - \"\(spki(9))\"\nrules:\n")
        #expect(try diff(Self.base, denied).summary == "rules +0 -0 ~0; pins +0 -0; deny +1 -0")
    }

    @Test(arguments: [
        ("  - host: b.test\n", "  - host: b.test\n    ct: report\n"),
        ("  - host: b.test\n", "  - host: b.test\n    mirror_checks: 0\n"),
        ("  - host: b.test\n", "  - host: b.test\n    quarantine: 1h\n"),
        ("    pins: [\"\(pinA)\", \"\(pinC)\"]", "    pins: [{ pin: \"\(pinA)\", at: leaf }, \"\(pinC)\"]"),
    ])
    func aRuleChangeNamesTheRule(old: String, new: String) throws {
        let withList = Self.base.replacingOccurrences(of: "version: 1\n", with: "version: 1\nproxy: { ct_log_list: /x/log_list.json }\n")
        let d = try diff(withList, withList.replacingOccurrences(of: old, with: new))
        #expect(d.summary == "rules +0 -0 ~1 (~b.test); pins +0 -0; deny +0 -0")
    }

    @Test func aBackupMarkIsPartOfTheRule() throws {
        let unmarked = Self.base.replacingOccurrences(of: ", backup: true", with: "")
        #expect(try diff(Self.base, unmarked).summary == "rules +0 -0 ~1 (~a.test); pins +0 -0; deny +0 -0")
    }

    @Test func defaultsChangesAreNamedWithTheirNewValue() throws {
        let withList = Self.base.replacingOccurrences(of: "version: 1\n", with: "version: 1\nproxy: { ct_log_list: /x/log_list.json }\n")
        let changed = withList.replacingOccurrences(of: "  unpinned: allow\n", with: "  unpinned: allow\n  ct: require\n  quarantine: 1h\n  mirror_checks: 2\n")
        let d = try diff(withList, changed)
        #expect(d.defaultsChanged == ["quarantine: 1h", "mirror_checks: 2", "ct: require"])
        // A rule that takes its quarantine and mirrors from defaults changed with them.
        #expect(d.summary == "rules +0 -0 ~2 (~a.test ~b.test); pins +0 -0; deny +0 -0; defaults ~3 (quarantine: 1h, mirror_checks: 2, ct: require)")
        let onlyCT = withList.replacingOccurrences(of: "  unpinned: allow\n", with: "  unpinned: allow\n  ct: report\n")
        #expect(try diff(withList, onlyCT).summary == "rules +0 -0 ~0; pins +0 -0; deny +0 -0; defaults ~1 (ct: report)")
    }
}
