import Foundation
import Testing
@_spi(ChainValidation) @testable import PinPolicy

/// Facts for a made-up certificate whose pins are derived from `seed`.
func facts(_ seed: UInt8, notAfter: Date = Date(timeIntervalSince1970: 4_000_000_000), isCA: Bool = false) -> CertificateFacts {
    CertificateFacts(spki: Pin(kind: .spki, digest: Array(repeating: seed, count: 32))!,
                     certificate: Pin(kind: .cert, digest: Array(repeating: seed &+ 100, count: 32))!,
                     subject: "CN=cert\(seed)", issuer: "CN=issuer", notBefore: Date(timeIntervalSince1970: 0),
                     notAfter: notAfter, subjectAltNames: [], key: "EC P-256", isCA: isCA)
}

func spki(_ seed: UInt8) -> String { "spki-sha256:" + Base64.encode(Array(repeating: seed, count: 32)) }
func cert(_ seed: UInt8) -> String { "cert-sha256:" + Base64.encode(Array(repeating: seed &+ 100, count: 32)) }

let now = RFC3339.parse("2026-11-22T00:00:00Z")!
/// leaf 1 ← intermediate 2 ← anchor 3
let genuine = ChainValidation.verified(VerifiedChain(leafFirst: [facts(1), facts(2, isCA: true), facts(3, isCA: true)]))
/// The attacker's: leaf 7 ← rogue root 8 (a CA the machine trusts).
let forged = ChainValidation.verified(VerifiedChain(leafFirst: [facts(7), facts(8, isCA: true)]))

/// The policy text with one rule for api.test whose `rule` lines are given, in enforce and report mode.
func policy(rule: String, extra: String = "") -> (enforce: Policy, report: Policy) {
    let text = { (mode: String) in
        "version: 1\ndefaults: {unpinned: allow}\n\(extra)\nrules:\n  - host: api.test\n    mode: \(mode)\n\(rule)\n"
    }
    return (try! load(text("enforce")).get(), try! load(text("report")).get())
}

/// One claim, both modes: what enforce and report each decide for `chain`.
func expectVerdict(_ chain: ChainValidation, rule: String, extra: String = "", enforce: Verdict, report: Verdict,
                   at time: Date = now, bypass: Bool = false, sourceLocation: SourceLocation = #_sourceLocation) {
    let (e, r) = policy(rule: rule, extra: extra)
    let target = Target.name("api.test")
    #expect(e.evaluate(chain, rule: e.rules[0], target: target, at: time, debugBypassEnabled: bypass).verdict == enforce,
            "enforce", sourceLocation: sourceLocation)
    #expect(r.evaluate(chain, rule: r.rules[0], target: target, at: time, debugBypassEnabled: bypass).verdict == report,
            "report", sourceLocation: sourceLocation)
}

func match(_ pin: String, at position: Int, _ where_: PinPosition? = nil) -> Verdict {
    let entry = PinEntry(pin: try! Pin.parse(pin).get(), position: where_)
    return .allowed(PinMatch(entry: entry, position: position))
}

@Suite struct VerdictTests {
    @Test func leafKeyPinAllowsTheGenuineChain() {
        expectVerdict(genuine, rule: "    pins: [\"\(spki(1))\"]", enforce: .allowed(PinMatch(entry: policy(rule: "    pins: [\"\(spki(1))\"]").enforce.rules[0].pins[0], position: 0)),
                      report: .allowed(PinMatch(entry: policy(rule: "    pins: [\"\(spki(1))\"]").report.rules[0].pins[0], position: 0)))
    }

    @Test func forgedLeafFromASecondTrustedCA() {
        expectVerdict(forged, rule: "    pins: [\"\(spki(1))\", \"\(spki(2))\"]",
                      enforce: .refused(.pinMismatch), report: .bypassed(wouldRefuse: .pinMismatch, by: .reportMode))
    }

    @Test func caPinMatchesAnIntermediateOrTheAnchorButNotTheLeaf() {
        let (e, _) = policy(rule: "    pins:\n      - { pin: \"\(spki(3))\", at: ca }")
        let v = e.evaluate(genuine, rule: e.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false)
        #expect(v.verdict == .allowed(PinMatch(entry: e.rules[0].pins[0], position: 2)))
        let leafAsCA = policy(rule: "    pins:\n      - { pin: \"\(spki(1))\", at: ca }").enforce
        #expect(leafAsCA.evaluate(genuine, rule: leafAsCA.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false).verdict == .refused(.pinMismatch))
    }

    @Test func leafPinMustNotMatchACA() {
        expectVerdict(genuine, rule: "    pins:\n      - { pin: \"\(spki(2))\", at: leaf }",
                      enforce: .refused(.pinMismatch), report: .bypassed(wouldRefuse: .pinMismatch, by: .reportMode))
    }

    @Test func certificatePinMatchesTheWholeCertificateOnly() {
        let p = policy(rule: "    pins: [\"\(cert(1))\"]").enforce
        #expect(p.evaluate(genuine, rule: p.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false).verdict
                == .allowed(PinMatch(entry: p.rules[0].pins[0], position: 0)))
        // The SPKI digest of cert 1 written as a cert pin is not a match: kinds never mix.
        let mixed = policy(rule: "    pins: [\"cert-sha256:\(spki(1).dropFirst(12))\"]").enforce
        #expect(mixed.evaluate(genuine, rule: mixed.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false).verdict == .refused(.pinMismatch))
    }

    @Test func chainFailuresRefuseInEveryMode() {
        let failed = ChainValidation.failed(ChainFailure(reason: .chainInvalid, detail: "unable to get local issuer certificate"), presented: [facts(1)])
        expectVerdict(failed, rule: "    pins: [\"\(spki(1))\"]", enforce: .refused(.chainInvalid), report: .refused(.chainInvalid))
        let wrongName = ChainValidation.failed(ChainFailure(reason: .hostnameMismatch, detail: "hostname mismatch"), presented: [facts(1)])
        expectVerdict(wrongName, rule: "    pins: [\"\(spki(1))\"]", enforce: .refused(.hostnameMismatch), report: .refused(.hostnameMismatch))
    }

    @Test func denyListedKeyIsRefusedEvenWithAMatchingPinAndNeverBypassed() {
        let deny = "deny: [\"\(spki(2))\"]\ndebug:\n  until: \"2030-01-01T00:00:00Z\"\n  hosts: [api.test]"
        expectVerdict(genuine, rule: "    pins: [\"\(spki(1))\"]", extra: deny, enforce: .refused(.denylistedKey),
                      report: .refused(.denylistedKey), bypass: true)
        // Also when validation failed and the bypass would otherwise let the chain through.
        let failed = ChainValidation.failed(ChainFailure(reason: .chainInvalid, detail: "x"), presented: [facts(1), facts(2)])
        expectVerdict(failed, rule: "    pins: [\"\(spki(1))\"]", extra: deny, enforce: .refused(.denylistedKey),
                      report: .refused(.denylistedKey), bypass: true)
    }

    @Test func debugBypassNeedsTheFlagATimeAndAMatchingHost() {
        let until = RFC3339.parse("2026-12-01T18:00:00Z")!
        let debug = "debug:\n  until: \"2026-12-01T18:00:00Z\"\n  hosts: [\"**.test\"]"
        let rule = "    pins: [\"\(spki(1))\"]"
        // flag on, before until: the refusal becomes a bypass (report stays report)
        expectVerdict(forged, rule: rule, extra: debug, enforce: .bypassed(wouldRefuse: .pinMismatch, by: .debugBypass(until: until)),
                      report: .bypassed(wouldRefuse: .pinMismatch, by: .reportMode), bypass: true)
        // without the flag the section is inert
        expectVerdict(forged, rule: rule, extra: debug, enforce: .refused(.pinMismatch),
                      report: .bypassed(wouldRefuse: .pinMismatch, by: .reportMode), bypass: false)
        // after until it is over
        expectVerdict(forged, rule: rule, extra: debug, enforce: .refused(.pinMismatch),
                      report: .bypassed(wouldRefuse: .pinMismatch, by: .reportMode), at: until, bypass: true)
        // a chain failure is bypassed too (step 8 covers steps 5 and 7)
        let failed = ChainValidation.failed(ChainFailure(reason: .hostnameMismatch, detail: "x"), presented: [facts(7)])
        expectVerdict(failed, rule: rule, extra: debug, enforce: .bypassed(wouldRefuse: .hostnameMismatch, by: .debugBypass(until: until)),
                      report: .bypassed(wouldRefuse: .hostnameMismatch, by: .debugBypass(until: until)), bypass: true)
        // hosts it does not cover
        let other = "debug:\n  until: \"2026-12-01T18:00:00Z\"\n  hosts: [other.test]"
        expectVerdict(forged, rule: rule, extra: other, enforce: .refused(.pinMismatch),
                      report: .bypassed(wouldRefuse: .pinMismatch, by: .reportMode), bypass: true)
    }

    @Test func expiredRulesFollowOnExpiry() throws {
        let after = RFC3339.parse("2027-07-01T00:00:00Z")!
        for (behaviour, verdict) in [("enforce", Verdict.refused(.pinMismatch)), ("report", .bypassed(wouldRefuse: .pinMismatch, by: .expiredRule))] {
            let p = try load(header + "rules:\n  - host: api.test\n    pins: [\"\(spki(1))\"]\n    expires: \"2027-06-30T00:00:00Z\"\n    on_expiry: \(behaviour)\n").get()
            let late = p.evaluate(forged, rule: p.rules[0], target: .name("api.test"), at: after, debugBypassEnabled: false)
            #expect(late.verdict == verdict)
            #expect(late.warnings.contains(.ruleExpired(RFC3339.parse("2027-06-30T00:00:00Z")!)))
            let early = p.evaluate(forged, rule: p.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false)
            #expect(early.verdict == .refused(.pinMismatch))
        }
    }

    @Test func runtimeWarningsForNoRealBackupAndExpiringLeaf() {
        let p = policy(rule: "    pins: [\"\(spki(1))\", \"\(spki(2))\"]").enforce
        let e = p.evaluate(genuine, rule: p.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false)
        #expect(e.warnings == [.noRealBackup])
        let soon = now.addingTimeInterval(10 * 86400)
        let expiring = ChainValidation.verified(VerifiedChain(leafFirst: [facts(1, notAfter: soon), facts(3, isCA: true)]))
        let q = policy(rule: "    pins: [\"\(spki(1))\", \"\(spki(9))\"]").enforce
        #expect(q.evaluate(expiring, rule: q.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false).warnings == [.leafExpiresSoon(notAfter: soon)])
    }

    /// BackupRule at runtime: every pin on the served chain is no real backup, unless a CA pin is
    /// marked `backup: true`; not said for `require_backup: off` nor for a rule in report mode.
    @Test func noRealBackupUnlessTheCAPinIsMarked() {
        let pins = "    pins:\n      - { pin: \"\(spki(1))\", at: leaf }\n      - { pin: \"\(spki(2))\", at: ca"
        let (unmarked, report) = policy(rule: pins + " }")
        #expect(unmarked.evaluate(genuine, rule: unmarked.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false).warnings == [.noRealBackup])
        #expect(report.evaluate(genuine, rule: report.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false).warnings == [])
        let marked = policy(rule: pins + ", backup: true }").enforce
        #expect(marked.evaluate(genuine, rule: marked.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false).warnings == [])
        let offPolicy = try! load("version: 1\ndefaults: {unpinned: allow, require_backup: off}\nrules:\n  - host: api.test\n\(pins) }\n").get()
        #expect(offPolicy.evaluate(genuine, rule: offPolicy.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false).warnings == [])
    }

    @Test func keyRotationWithAndWithoutTheBackupPin() {
        let rotated = ChainValidation.verified(VerifiedChain(leafFirst: [facts(5), facts(2, isCA: true), facts(3, isCA: true)]))
        let withBackup = policy(rule: "    pins:\n      - { pin: \"\(spki(1))\", at: leaf }\n      - { pin: \"\(spki(5))\", at: leaf, label: backup }").enforce
        #expect(withBackup.evaluate(rotated, rule: withBackup.rules[0], target: .name("api.test"), at: now, debugBypassEnabled: false).verdict
                == .allowed(PinMatch(entry: withBackup.rules[0].pins[1], position: 0)))
        expectVerdict(rotated, rule: "    pins:\n      - { pin: \"\(spki(1))\", at: leaf }", enforce: .refused(.pinMismatch),
                      report: .bypassed(wouldRefuse: .pinMismatch, by: .reportMode))
    }
}
