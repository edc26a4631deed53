import Foundation
import Testing
@testable import PinPolicy

/// Chrome's CT policy as facts: each case gives the certificate's lifetime and its SCTs (log, time,
/// delivery, signature), and the verdict, with the words an operator reads.
@Suite struct CTPolicyTests {
    static let now = RFC3339.parse("2026-11-22T00:00:00Z")!
    static let issued = RFC3339.parse("2026-10-01T00:00:00Z")!
    static func date(_ text: String) -> Date { RFC3339.parse(text)! }

    /// Operator A: 1 usable, 2 retired 2026-06-01, 3 pending, 4 rejected, 5 readonly;
    /// B: 11 usable, 12 qualified (tiled), 13 retired 2026-06-01; C: 21 usable for certificates expiring in 2026,
    /// 31 usable, run by A until 2026-03-01.
    /// Built for each use, not kept in a global for the process's life: LeakSanitizer cannot follow
    /// the spare-bit-tagged enum payloads Swift stores, so a list alive at exit reads as a leak.
    static var list: CTLogList {
        let head = #"{"sha256_root_hash": "\#(Base64.encode(Array(repeating: 1, count: 32)))", "tree_size": 10}"#
        return try! CTFake.parse(CTFake.list([
            CTFake.operator("A", logs: [
                CTFake.log(1), CTFake.log(2, state: CTFake.state("retired", "2026-06-01T00:00:00Z")),
                CTFake.log(3, state: CTFake.state("pending", "2026-01-01T00:00:00Z")),
                CTFake.log(4, state: CTFake.state("rejected", "2026-01-01T00:00:00Z")),
                CTFake.log(5, state: #"{"readonly": {"timestamp": "2026-01-01T00:00:00Z", "final_tree_head": \#(head)}}"#),
            ]),
            CTFake.operator("B", logs: [CTFake.log(11), CTFake.log(13, state: CTFake.state("retired", "2026-06-01T00:00:00Z"))],
                            tiled: [CTFake.log(12, state: CTFake.state("qualified", "2026-01-01T00:00:00Z"), tiled: true)]),
            CTFake.operator("C", logs: [
                CTFake.log(21, interval: #"{"start_inclusive": "2026-01-01T00:00:00Z", "end_exclusive": "2027-01-01T00:00:00Z"}"#),
                CTFake.log(31, extra: #", "previous_operators": [{"name": "A", "end_time": "2026-03-01T00:00:00Z"}]"#),
            ]),
        ]))
    }

    static func sct(_ seed: UInt8, _ delivery: SCTDelivery = .embedded, at time: Date = issued, verified: Bool = true) -> SCTFacts {
        SCTFacts(logID: CTFake.id(seed), timestamp: time, delivery: delivery, signatureVerified: verified)
    }

    /// The verdict for a certificate valid `days` from `issued` (or from `from`).
    static func verdict(_ scts: [SCTFacts], days: Double = 90, from: Date = issued, list: CTLogList = list) -> CTVerdict {
        CTPolicy.chrome.evaluate(notBefore: from, notAfter: from.addingTimeInterval(days * 86400), scts: scts, list: list, at: now)
    }

    static func counted(_ verdict: CTVerdict) -> [CTLogID] {
        switch verdict {
        case .compliant(let counted), .notCompliant(_, let counted): counted.map(\.log.id)
        }
    }

    static func expectCompliant(_ scts: [SCTFacts], days: Double = 90, from: Date = issued, counting seeds: [UInt8],
                                sourceLocation: SourceLocation = #_sourceLocation) {
        let v = verdict(scts, days: days, from: from)
        guard case .compliant = v else { Issue.record("not compliant: \(v)", sourceLocation: sourceLocation); return }
        #expect(counted(v) == seeds.map(CTFake.id), sourceLocation: sourceLocation)
    }

    static func expectRefused(_ scts: [SCTFacts], days: Double = 90, from: Date = issued, _ words: String,
                              ignoring reasons: [IgnoredSCT.Reason] = [], sourceLocation: SourceLocation = #_sourceLocation) {
        let v = verdict(scts, days: days, from: from)
        guard case .notCompliant(let shortfall, _) = v else { Issue.record("compliant: \(v)", sourceLocation: sourceLocation); return }
        #expect(shortfall.description.prefix(while: { $0 != "(" }).trimmingCharacters(in: .whitespaces) == words, sourceLocation: sourceLocation)
        #expect(shortfall.ignored.map(\.reason) == reasons, sourceLocation: sourceLocation)
    }

    // MARK: compliant

    @Test func twoOperatorsTwoSCTsForAShortCertificate() {
        Self.expectCompliant([Self.sct(1), Self.sct(11)], counting: [1, 11])
    }

    @Test func threeSCTsForACertificateBeyond180Days() {
        Self.expectCompliant([Self.sct(1), Self.sct(5), Self.sct(11)], days: 398, counting: [1, 5, 11])
        Self.expectCompliant([Self.sct(1), Self.sct(11)], days: 180, counting: [1, 11])  // 180 days exactly is still short
    }

    @Test func qualifiedTiledAndReadonlyLogsCount() {
        Self.expectCompliant([Self.sct(5), Self.sct(12)], counting: [5, 12])
    }

    @Test func aRetiredLogCountsForSCTsBeforeItsRetirement() {
        let before = Self.date("2026-05-01T00:00:00Z")
        Self.expectCompliant([Self.sct(2, at: before), Self.sct(11, at: before)], from: before, counting: [2, 11])
    }

    @Test func sctsByTLSExtensionOrOCSP() {
        Self.expectCompliant([Self.sct(1, .tlsExtension), Self.sct(11, .tlsExtension)], counting: [1, 11])
        Self.expectCompliant([Self.sct(1, .ocsp), Self.sct(12, .tlsExtension)], days: 398, counting: [1, 12])
    }

    // MARK: refused

    @Test func noSCTAtAll() {
        Self.expectRefused([], "0 valid embedded SCTs from 0 operators; 2 SCTs needed for a certificate valid 90 days and 2 operators needed")
    }

    @Test func sctsFromOneOperatorOnly() {
        Self.expectRefused([Self.sct(1), Self.sct(5)], "2 valid embedded SCTs from 1 operator; 2 operators needed")
    }

    @Test func tooFewForTheLifetime() {
        Self.expectRefused([Self.sct(1), Self.sct(11)], days: 398, "2 valid embedded SCTs from 2 operators; 3 SCTs needed for a certificate valid 398 days")
        Self.expectRefused([Self.sct(1), Self.sct(11)], days: 180.5, "2 valid embedded SCTs from 2 operators; 3 SCTs needed for a certificate valid 181 days")
    }

    @Test func aLogInNoList() {
        Self.expectRefused([Self.sct(1), Self.sct(99)], "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 90 days and 2 operators needed",
                           ignoring: [.logNotInList])
    }

    @Test func aLogRetiredBeforeTheSCT() {
        Self.expectRefused([Self.sct(1), Self.sct(13)], "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 90 days and 2 operators needed",
                           ignoring: [.logRetiredBeforeSCT(retired: Self.date("2026-06-01T00:00:00Z"))])
    }

    @Test func pendingAndRejectedLogsNeverCount() {
        Self.expectRefused([Self.sct(3), Self.sct(4), Self.sct(11)], "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 90 days and 2 operators needed",
                           ignoring: [.logNotAccepted(state: "pending"), .logNotAccepted(state: "rejected")])
    }

    @Test func aFutureTimestamp() {
        Self.expectRefused([Self.sct(1), Self.sct(11, at: Self.now.addingTimeInterval(1))], "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 90 days and 2 operators needed",
                           ignoring: [.timestampInFuture])
    }

    /// An SCT signed for another certificate: `TLSInspection` reports its signature as not verified.
    @Test func aBadSignature() {
        Self.expectRefused([Self.sct(1), Self.sct(11, verified: false)], "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 90 days and 2 operators needed",
                           ignoring: [.signatureNotVerified])
    }

    /// Chrome judges a retirement against the certificate's earliest SCT: log 2's SCT dated after its
    /// retirement counts when the certificate was first logged before it (a log retiring mid-issuance).
    @Test func retirementIsJudgedAgainstTheEarliestSCT() {
        let before = Self.date("2026-05-15T00:00:00Z"), after = Self.date("2026-07-01T00:00:00Z")
        Self.expectCompliant([Self.sct(2, at: after), Self.sct(11, at: before)], from: before, counting: [2, 11])
    }

    /// An early timestamp that no known log signed does not make a retired log's SCT count.
    @Test func aForgedEarlySCTDoesNotRescueARetiredLog() {
        let early = Self.date("2026-01-01T00:00:00Z"), after = Self.date("2026-07-01T00:00:00Z")
        Self.expectRefused([Self.sct(2, at: after), Self.sct(11, at: after), Self.sct(1, at: early, verified: false), Self.sct(99, at: early)],
                           from: early, "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 90 days and 2 operators needed",
                           ignoring: [.logRetiredBeforeSCT(retired: Self.date("2026-06-01T00:00:00Z")), .signatureNotVerified, .logNotInList])
    }

    /// Log 31 changed hands from A to C on 2026-03-01: its SCTs count for whoever ran it when they were signed.
    @Test func aLogThatChangedOperatorsCountsForTheOperatorAtTheSCTsTime() {
        let underA = Self.date("2026-02-01T00:00:00Z"), underC = Self.date("2026-04-01T00:00:00Z")
        Self.expectRefused([Self.sct(1, at: underA), Self.sct(31, at: underA)], from: underA,
                           "2 valid embedded SCTs from 1 operator; 2 operators needed")
        Self.expectCompliant([Self.sct(1, at: underC), Self.sct(31, at: underC)], from: underC, counting: [1, 31])
    }

    /// Chrome: at least one embedded SCT from a log still in service.
    @Test func onlyRetiredLogs() {
        let before = Self.date("2026-05-01T00:00:00Z")
        Self.expectRefused([Self.sct(2, at: before), Self.sct(13, at: before)], from: before,
                           "2 valid embedded SCTs from 2 operators; 1 from a log not retired needed")
    }

    /// By TLS or OCSP a retired log's SCT never counts, even from before its retirement.
    @Test func aRetiredLogByTLS() {
        let before = Self.date("2026-05-01T00:00:00Z")
        Self.expectRefused([Self.sct(2, .tlsExtension, at: before), Self.sct(11, .tlsExtension, at: before)], from: before,
                           "1 valid SCT by TLS extension or OCSP from 1 operator; 2 SCTs needed and 2 operators needed",
                           ignoring: [.retiredLogNotEmbedded])
    }

    @Test func oneOperatorByTLS() {
        Self.expectRefused([Self.sct(1, .tlsExtension), Self.sct(5, .ocsp)], "2 valid SCTs by TLS extension or OCSP from 1 operator; 2 operators needed")
    }

    /// Embedded and TLS-delivered SCTs are two criteria, not one pool.
    @Test func mixedDeliveriesAreNotPooled() {
        Self.expectRefused([Self.sct(1), Self.sct(11, .tlsExtension)], "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 90 days and 2 operators needed")
        // …but either criterion met is enough.
        Self.expectCompliant([Self.sct(3), Self.sct(1, .tlsExtension), Self.sct(11, .ocsp)], counting: [1, 11])
    }

    /// Two SCTs from one log are one witness.
    @Test func theSameLogTwiceCountsOnce() {
        Self.expectRefused([Self.sct(1), Self.sct(1, at: Self.issued.addingTimeInterval(60)), Self.sct(11)], days: 398,
                           "2 valid embedded SCTs from 2 operators; 3 SCTs needed for a certificate valid 398 days")
    }

    /// Log 21 takes only certificates expiring in 2026.
    @Test func aCertificateOutsideTheLogsTemporalInterval() {
        Self.expectCompliant([Self.sct(1), Self.sct(21)], days: 60, counting: [1, 21])
        Self.expectRefused([Self.sct(1), Self.sct(21)], days: 120, "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 120 days and 2 operators needed",
                           ignoring: [.certificateOutsideLogInterval])
    }

    @Test func theRefusalSaysWhichSCTsWereIgnoredAndWhy() {
        guard case .notCompliant(let shortfall, let counted) = Self.verdict([Self.sct(1), Self.sct(99), Self.sct(13)]) else {
            Issue.record("compliant"); return
        }
        #expect(counted.map(\.operatorName) == ["A"])
        #expect(shortfall.description == "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 90 days and 2 operators needed"
                + " (ignored: SCT from \(CTFake.id(99)): its log is in no log list; SCT from \(CTFake.id(13)): its log retired 2026-06-01T00:00:00Z, before the certificate's earliest SCT)")
    }

    /// The published list's own logs: Argon2026h2 (Google) and Nimbus2026 (Cloudflare) for a certificate
    /// expiring in December 2026; Argon with Xenon is Google twice.
    @Test func thePublishedListsLogs() throws {
        let published = try CTFake.parse(publishedLogListExcerpt)
        let id = { (b64: String) in CTLogID(Base64.decode(b64)!)! }
        let argon = id("1219ENGn9XfCx+lf1wC/+YLJM1pl4dCzAXMXwMjFaXc="), xenon = id("2AlVO5RPev/IFhlvlE+Fq7D4/F6HVSYPFdEucrtFSxQ=")
        let nimbus = id("yzj3FYl8hKFEX1vB3fvJbvKaWc1HCmkFhbDLFMMUWOc=")
        let scts = { (ids: [CTLogID]) in ids.map { SCTFacts(logID: $0, timestamp: Self.issued, delivery: .embedded, signatureVerified: true) } }
        let compliant = Self.verdict(scts([argon, nimbus]), days: 75, list: published)
        guard case .compliant(let counted) = compliant else { Issue.record("\(compliant)"); return }
        #expect(counted.map(\.log.description) == ["Google 'Argon2026h2' log", "Cloudflare 'Nimbus2026'"])
        guard case .notCompliant(let shortfall, _) = Self.verdict(scts([argon, xenon]), days: 75, list: published) else {
            Issue.record("compliant"); return
        }
        #expect(shortfall.description == "2 valid embedded SCTs from 1 operator; 2 operators needed")
    }
}
