import Foundation
import Testing
@_spi(ChainValidation) @testable import PinPolicy

/// CT after the pins (Policy.evaluate's step 5), and the `ct` keys of the policy file.
@Suite struct CTVerdictTests {
    // Built per use, not kept in statics: LeakSanitizer reports what a test-process global holds
    // when the process exits (as CTPolicyTests do).
    private static var list: CTLogList { try! CTFake.parse(CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)]), CTFake.operator("B", logs: [CTFake.log(2)])])) }
    private static let day: TimeInterval = 86400

    /// A verdict of the fake list on SCTs from the given logs (all verified, embedded, a day old).
    private static func finding(logs: [UInt8], mode: CTMode = .require, enforced: CTMode? = nil) -> CTStatus {
        let scts = logs.map { SCTFacts(logID: CTFake.id($0), timestamp: now - day, delivery: .embedded, signatureVerified: true) }
        let verdict = CTPolicy.chrome.evaluate(notBefore: now - 10 * day, notAfter: now + 80 * day, scts: scts, list: list, at: now)
        return .judged(CTFinding(mode: mode, enforced: enforced ?? mode, verdict: verdict))
    }

    private static var compliant: CTStatus { finding(logs: [1, 2]) }
    private static var oneOperator: CTStatus { finding(logs: [1]) }

    private func verdict(_ yaml: String, _ chain: ChainValidation = genuine, ct: CTStatus?, bypass: Bool = false) -> Verdict {
        let policy = try! load(yaml).get()
        let rule = policy.rules.first ?? .standIn(for: Authority(target: .name("api.test"), port: 443), defaults: policy.defaults)
        return policy.evaluate(chain, rule: rule, target: .name("api.test"), at: now, debugBypassEnabled: bypass, ct: ct).verdict
    }

    private let ctPolicy = "version: 1\nproxy: {ct_log_list: /x/log_list.json}\ndefaults: {unpinned: allow, ct: require}\n"
    private var pinned: String { ctPolicy + "rules:\n  - host: api.test\n    pins: [\"\(spki(1))\"]\n" }

    @Test func bothPinsAndCTMustHold() {
        let pin = try! load(pinned).get().rules[0].pins[0]
        #expect(verdict(pinned, ct: Self.compliant) == .allowed(PinMatch(entry: pin, position: 0)))
        #expect(verdict(pinned, ct: Self.oneOperator) == .refused(.ctNotCompliant))
        // The pins' refusal comes first: the chain is refused for what it is not.
        #expect(verdict(pinned, forged, ct: Self.oneOperator) == .refused(.pinMismatch))
    }

    @Test func aPinRuleInReportModeDoesNotExcuseRequiredCT() {
        let report = ctPolicy + "rules:\n  - host: api.test\n    mode: report\n    pins: [\"\(spki(1))\"]\n"
        #expect(verdict(report, forged, ct: Self.oneOperator) == .refused(.ctNotCompliant))
        #expect(verdict(report, forged, ct: Self.compliant) == .bypassed(wouldRefuse: .pinMismatch, by: .reportMode))
    }

    @Test func reportModeAndAStaleListLetAFailureThroughNamed() {
        #expect(verdict(pinned, ct: Self.finding(logs: [1], mode: .report)) == .bypassed(wouldRefuse: .ctNotCompliant, by: .ctReport))
        #expect(verdict(pinned, ct: Self.finding(logs: [1], mode: .require, enforced: .report)) == .bypassed(wouldRefuse: .ctNotCompliant, by: .ctStaleList))
    }

    @Test func theDebugBypassCoversCT() {
        let until = RFC3339.format(now + Self.day)
        let debug = pinned + "debug: {until: \"\(until)\", hosts: [api.test]}\n"
        #expect(verdict(debug, ct: Self.oneOperator, bypass: true) == .bypassed(wouldRefuse: .ctNotCompliant, by: .debugBypass(until: now + Self.day)))
        #expect(verdict(debug, ct: Self.oneOperator, bypass: false) == .refused(.ctNotCompliant))
    }

    @Test func anUnpinnedHostIsJudgedOnCTAndTheDenyListOnly() {
        // The stand-in for no rule: a chain the system store does not validate is the client's
        // business (it may trust a private root); only CT and the deny list refuse here.
        let invalid = ChainValidation.failed(ChainFailure(reason: .chainInvalid, detail: "self-signed"), presented: [facts(7)])
        #expect(verdict(ctPolicy, invalid, ct: Self.compliant) == .unpinned(.noRule))
        #expect(verdict(ctPolicy, invalid, ct: Self.oneOperator) == .refused(.ctNotCompliant))
        let denied = ctPolicy + "deny: [\"\(spki(7))\"]\n"
        #expect(verdict(denied, invalid, ct: Self.compliant) == .refused(.denylistedKey))
        // A CT-only rule: unpinned by its rule.
        let ctOnly = ctPolicy + "rules:\n  - host: api.test\n    ct: report\n"
        #expect(verdict(ctOnly, ct: Self.compliant) == .unpinned(.ruleUnpinned))
        #expect(verdict(ctOnly, ct: Self.finding(logs: [1], mode: .report)) == .bypassed(wouldRefuse: .ctNotCompliant, by: .ctReport))
    }

    @Test func anExemptHostIsNotJudged() {
        #expect(verdict(pinned, ct: .exempt) == .allowed(PinMatch(entry: try! load(pinned).get().rules[0].pins[0], position: 0)))
    }

    // MARK: the keys

    @Test func theKeysLoad() throws {
        let policy = try load("""
            version: 1
            proxy:
              ct_log_list: /var/lib/pinproxy/ct/log_list.json
              ct_log_list_key: /usr/share/pinproxy/ct/log_list_pubkey.pem
              ct_list_max_age: 30d
              ct_stale_list: refuse
            defaults: {unpinned: allow, ct: require}
            rules:
              - host: internal.corp.example
                ct: off
              - host: "*.new-vendor.example"
                ct: report
                mirror_checks: 2
              - host: api.test
                pins: ["\(pinA)", "\(pinB)"]
            """).get()
        #expect(policy.proxy.ct.logList == "/var/lib/pinproxy/ct/log_list.json")
        #expect(policy.proxy.ct.logListLine == 3)
        #expect(policy.proxy.ct.logListKey == "/usr/share/pinproxy/ct/log_list_pubkey.pem")
        #expect(policy.proxy.ct.maxAge == 30 * Self.day)
        #expect(policy.proxy.ct.staleList == .refuse)
        #expect(policy.defaults.ct == .require)
        #expect(policy.rules.map(\.mode) == [.unpinned, .unpinned, .enforce])  // ct and no pins: CT-only
        #expect(policy.rules.map(\.ct) == [.off, .report, nil])
        #expect(policy.rules.map { policy.ctMode(under: $0) } == [.off, .report, .require])
        #expect(policy.rules[1].mirrorChecks == 2)
        #expect(policy.usesCT)
    }

    /// A CT-only rule's chain is built under its `trust` (where the deny list is looked for), so
    /// `trust: system` or `ca-file:` is accepted; `pins-only` has no anchor without pins and is
    /// refused, saying so; on a rule that is not probed at all `trust` is refused as before.
    @Test func aCTOnlyRuleTakesATrustThatCanBuildAChain() throws {
        let ctOnly = "version: 1\nproxy: {ct_log_list: /x/log_list.json}\ndefaults: {unpinned: allow}\nrules:\n  - host: a.test\n    ct: require\n"
        let policy = try load(ctOnly + "    trust: system\n").get()
        #expect(policy.rules[0].mode == .unpinned && policy.rules[0].trust == .system && policy.ctMode(under: policy.rules[0]) == .require)
        expectError(ctOnly + "    trust: pins-only\n", line: 7, column: 12,
                    "the rule for 'a.test' has no pins, and under trust: pins-only a pinned certificate is the only anchor, so no chain would ever be built; use system or ca-file:PATH (the store whose chain the deny list is looked for in)")
        expectError("version: 1\ndefaults: {unpinned: allow}\nrules:\n  - host: a.test\n    mode: unpinned\n    trust: system\n", line: 6, column: 12,
                    "the rule for 'a.test' is mode: unpinned without ct: its tunnels are not probed, so 'trust' has no effect")
        expectError(ctOnly + "    require_keylog: false\n", line: 7, column: 21,
                    "require_keylog applies to pinned tunnels, and a host checked for Certificate Transparency alone is verified by the mirror check")
    }

    @Test func theDefaultsAreOff() throws {
        let policy = try load(header).get()
        #expect(policy.defaults.ct == .off && policy.proxy.ct.logList == nil && policy.proxy.ct.maxAge == 70 * Self.day)
        #expect(policy.proxy.ct.staleList == .report && !policy.usesCT)
    }

    @Test func badKeysAreErrorsWithTheirPosition() {
        expectError("version: 1\ndefaults: {unpinned: allow, ct: require}\n", line: 2, column: 33,
                    "defaults.ct is require, but there is no proxy.ct_log_list")
        expectError("version: 1\ndefaults: {unpinned: allow}\nrules:\n  - host: a.test\n    ct: report\n", line: 5, column: 9,
                    "this rule has ct: report, but there is no proxy.ct_log_list")
        expectError("version: 1\ndefaults: {unpinned: allow, ct: always}\n", line: 2, column: 33, "defaults.ct must be")
        expectError("version: 1\nproxy: {ct_log_list: /x.json, ct_list_max_age: 12h}\ndefaults: {unpinned: allow}\n", line: 2, column: 48,
                    "proxy.ct_list_max_age must be from 1d to 366d")
        expectError("version: 1\nproxy: {ct_log_list_key: /k.pem}\ndefaults: {unpinned: allow}\n", line: 2, column: 26,
                    "proxy.ct_log_list_key verifies the signature of proxy.ct_log_list, which is not set")
        expectError("version: 1\nproxy: {ct_log_list: /x.json, ct_stale_list: warn}\ndefaults: {unpinned: allow}\n", line: 2, column: 46,
                    "proxy.ct_stale_list must be")
        // An unpinned rule without CT still has nothing for mirrors to check.
        expectError("version: 1\ndefaults: {unpinned: allow}\nrules:\n  - host: a.test\n    mode: unpinned\n    mirror_checks: 2\n", line: 6, column: 20,
                    "is mode: unpinned without ct")
    }

    @Test func ctOffNeedsNoList() throws {
        let policy = try load("version: 1\ndefaults: {unpinned: allow, ct: off}\nrules:\n  - host: a.test\n    ct: off\n").get()
        #expect(!policy.usesCT && policy.rules[0].mode == .unpinned)
    }

    @Test func theSignatureSitsBesideTheList() {
        #expect(CTSettings.signaturePath(forList: "/var/lib/pinproxy/ct/log_list.json") == "/var/lib/pinproxy/ct/log_list.sig")
        #expect(CTSettings.signaturePath(forList: "/etc/ct.d/list") == "/etc/ct.d/list.sig")
        #expect(CTSettings.signaturePath(forList: "/etc/ct.d/.list") == "/etc/ct.d/.list.sig")
    }

    @Test func durationsTakeDays() throws {
        let policy = try load("version: 1\ndefaults: {unpinned: allow, quarantine: 2d}\n").get()
        #expect(policy.defaults.quarantine == 2 * Self.day)
    }
}
