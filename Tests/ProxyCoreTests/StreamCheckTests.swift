import Foundation
import PinPolicy
import TestSupport
import TLSInspection
import Testing
@testable import ProxyCore

/// The stream check on real captured flights (TLSReaderVectors), without a socket: what the relay's
/// hook is told to do with each side's bytes, fed in one piece or a byte at a time.
@Suite struct StreamCheckUnitTests {
    static let leafEC = "spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="
    static let rogueLeaf = "spki-sha256:GpJMWznZg/+avOl3K8cJqwDXioJFfLZdlJTvnCoJ960="

    static func snapshot(pin: String, mode: String = "enforce") -> PolicySnapshot {
        let yaml = """
            version: 1
            proxy: { allowed_ports: [443], dns: { nameservers: [], hosts_file: none } }
            defaults: { unpinned: allow, require_backup: off, trust: "ca-file:\(Paths.fixture("both-roots.pem"))" }
            rules:
              - host: api.pinproxy.test
                mode: \(mode)
                pins: ["\(pin)"]
            """
        let policy = try! PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil)
        return try! PolicySnapshot(policy: policy, systemStore: TrustStore.system())
    }

    static func check(pin: String = leafEC, mode: String = "enforce", target: String = "api.pinproxy.test:443", pinned: Bool = true,
                      ledger: ResumptionLedger = ResumptionLedger()) -> StreamCheck {
        let snapshot = snapshot(pin: pin, mode: mode)
        let authority = try! Authority.parse(target).get()
        // A pinned IP literal (no rule of its own here) is judged by the file's one rule.
        let rule = snapshot.policy.rule(for: authority) ?? snapshot.policy.rule(for: try! Authority.parse("api.pinproxy.test:443").get())!
        return StreamCheck(StreamCheck.Context(authority: authority, snapshot: snapshot, pinning: pinned ? .pinned(rule: rule, probe: nil) : .unpinned,
                                               debugBypassEnabled: false), ledger: ledger)
    }

    static func bytes(_ base64: String) -> [UInt8] { Array(Data(base64Encoded: base64, options: .ignoreUnknownCharacters)!) }

    /// Just the first record of a captured flight (the ClientHello): the captures end with a
    /// deliberately cut record, which would swallow the records a test adds after them.
    static func firstRecord(_ base64: String) -> [UInt8] {
        let all = bytes(base64)
        return Array(all.prefix(5 + (Int(all[3]) << 8 | Int(all[4]))))
    }

    /// Feeds the bytes in one piece, or a byte at a time; returns the first answer that is not `.hold`.
    static func feed(_ check: StreamCheck, _ side: TunnelSide, _ bytes: [UInt8], drip: Bool = false) -> Inspection {
        let pieces = drip ? bytes.map { [$0] } : [bytes]
        for piece in pieces {
            let answer = piece.withUnsafeBytes { check.inspect(side, $0) }
            if answer != .hold { return answer }
        }
        return .hold
    }

    /// `.release` (pass what is held, keep watching for tickets) or `.done` (pass it, stop looking):
    /// which one depends on whether the piece also held the next record.
    static func released(_ answer: Inspection) -> Bool { answer == .release || answer == .done }

    @Test(arguments: [false, true])
    func aTLS12ChainThatMatchesIsReleasedAndVerifiedInTheStream(drip: Bool) {
        let check = Self.check()
        #expect(Self.feed(check, .client, Self.bytes(TLSReaderVectors.opensslTLS12Client), drip: drip) == .release)  // watched on
        #expect(Self.released(Self.feed(check, .upstream, Self.bytes(TLSReaderVectors.opensslTLS12Server), drip: drip)))
        #expect(check.summary.verification == .probeAndStream && check.summary.negotiated == .tls12)
        #expect(check.summary.judged.map { if case .verified = $0.validation { true } else { false } } == true)
    }

    @Test(arguments: [false, true])
    func aTLS12ChainThatFailsThePinsIsRefusedWithAnAlert(drip: Bool) {
        let check = Self.check(pin: Self.rogueLeaf)
        _ = Self.feed(check, .client, Self.bytes(TLSReaderVectors.opensslTLS12Client))
        guard case .refuse(let refusal) = Self.feed(check, .upstream, Self.bytes(TLSReaderVectors.opensslTLS12Server), drip: drip) else {
            Issue.record("expected a refusal"); return
        }
        #expect(refusal.reason == .policy(.pinMismatch) && refusal.alertClient)
    }

    /// A replayed chain that the client never completes a handshake with plants no session.
    @Test func aChainWithoutAFinishedHandshakeRecordsNoSession() {
        let ledger = ResumptionLedger()
        let check = Self.check(ledger: ledger)
        _ = Self.feed(check, .client, Self.firstRecord(TLSReaderVectors.sessionIDFullClient))
        _ = Self.feed(check, .upstream, Self.bytes(TLSReaderVectors.sessionIDFullServer) + [20, 3, 3, 0, 1, 1])
        _ = Self.feed(check, .client, [21, 3, 3, 0, 2, 2, 51])  // the client's alert: decrypt_error
        #expect(ledger.count == 0)
    }

    /// A server that claims TLS 1.3 to a client that did not offer it would get a 1.2-only client
    /// that ignores the extension to read a plaintext Certificate unjudged: refused.
    @Test func aTLS13ClaimTheClientDidNotOfferIsRefused() {
        let check = Self.check()
        _ = Self.feed(check, .client, Self.bytes(TLSReaderVectors.opensslTLS12Client))  // offers TLS 1.2 only
        guard case .refuse(let refusal) = Self.feed(check, .upstream, Self.bytes(TLSReaderVectors.opensslTLS13Server)) else {
            Issue.record("expected a refusal"); return
        }
        #expect(refusal.reason == .malformedTLS && refusal.detail.contains("did not offer"))
    }

    /// Report mode lets an SNI for another host through, but the server's chain is still judged:
    /// a deny-listed key (or any chain failure report mode does not cover) is refused.
    @Test func reportModeNeverStopsTheChainFromBeingJudged() {
        let check = Self.check(pin: Self.rogueLeaf, mode: "report", target: "api.pinproxy.test:443")
        #expect(Self.released(Self.feed(check, .client, Self.bytes(TLSReaderVectors.opensslNoSNIClient))))  // sni_mismatch, overlooked
        #expect(check.summary.overlooked?.reason == .sniMismatch)
        #expect(Self.released(Self.feed(check, .upstream, Self.bytes(TLSReaderVectors.opensslNoSNIServer))))
        #expect(check.summary.judged != nil && check.summary.verification == .bypass)
    }

    @Test func cleartextIsRefusedEvenInReportMode() {
        let check = Self.check(mode: "report")
        guard case .refuse(let refusal) = Self.feed(check, .client, Array("GET / HTTP/1.1\r\n\r\n".utf8)) else {
            Issue.record("not_tls must not be bypassed"); return
        }
        #expect(refusal.reason == .notTLS)
    }

    @Test func reportModeLetsItThroughAndSaysSo() {
        let check = Self.check(pin: Self.rogueLeaf, mode: "report")
        _ = Self.feed(check, .client, Self.bytes(TLSReaderVectors.opensslTLS12Client))
        #expect(Self.released(Self.feed(check, .upstream, Self.bytes(TLSReaderVectors.opensslTLS12Server))))
        #expect(check.summary.verification == .bypass && check.summary.overlooked?.reason == .policy(.pinMismatch) && check.summary.overlooked?.basis == .reportMode)
    }

    @Test(arguments: [TLSReaderVectors.opensslTLS13Server, TLSReaderVectors.curlTLS13Server, TLSReaderVectors.helloRetryRequestServer])
    func tls13PassesAfterTheServerHelloAsProbeOnly(server: String) {
        let check = Self.check()
        _ = Self.feed(check, .client, Self.bytes(TLSReaderVectors.opensslTLS13Client))
        #expect(Self.feed(check, .upstream, Self.bytes(server)) == .done)
        #expect(check.summary.verification == .probeOnly && check.summary.negotiated == .tls13)
    }

    @Test func aClientHelloWithoutTheConnectHostIsRefused() {
        guard case .refuse(let refusal) = Self.feed(Self.check(), .client, Self.bytes(TLSReaderVectors.opensslNoSNIClient)) else {
            Issue.record("expected a refusal"); return
        }
        #expect(refusal.reason == .sniMismatch && !refusal.alertClient)
        // To an IP literal, no SNI is fine.
        #expect(Self.released(Self.feed(Self.check(target: "127.0.0.1:443"), .client, Self.bytes(TLSReaderVectors.opensslNoSNIClient))))
    }

    @Test func aPinnedNameInsideAnUnpinnedTunnelIsRefused() {
        let check = Self.check(target: "other.pinproxy.test:443", pinned: false)
        guard case .refuse(let refusal) = Self.feed(check, .client, Self.bytes(TLSReaderVectors.opensslTLS12Client)) else {
            Issue.record("expected a refusal"); return
        }
        #expect(refusal.reason == .sniMismatch)
    }

    @Test func cleartextIsRefusedInAPinnedTunnelAndRelayedInAnUnpinnedOne() {
        let get = Array("GET / HTTP/1.1\r\nHost: api.pinproxy.test\r\n\r\n".utf8)
        guard case .refuse(let refusal) = Self.feed(Self.check(), .client, get) else { Issue.record("expected a refusal"); return }
        #expect(refusal.reason == .notTLS)
        let unpinned = Self.check(target: "other.pinproxy.test:443", pinned: false)
        #expect(Self.feed(unpinned, .client, get) == .done && Self.feed(unpinned, .upstream, Array("HTTP/1.1 200 OK\r\n".utf8)) == .done)
    }

    /// A session id recorded from a verified full handshake lets its abbreviated handshake through;
    /// without that record the same resumption is refused.
    @Test func resumptionNeedsAVerifiedSession() {
        let ledger = ResumptionLedger()
        let full = Self.check(ledger: ledger)
        _ = Self.feed(full, .client, Self.firstRecord(TLSReaderVectors.sessionIDFullClient))
        #expect(Self.released(Self.feed(full, .upstream, Self.bytes(TLSReaderVectors.sessionIDFullServer))))
        // Nothing is recorded until the server has proved its key: its ChangeCipherSpec, then the
        // client's application data (the client verified the server's Finished).
        #expect(ledger.count == 0)
        _ = Self.feed(full, .upstream, [20, 3, 3, 0, 1, 1])
        #expect(Self.feed(full, .client, [20, 3, 3, 0, 1, 1, 22, 3, 3, 0, 2, 0, 0]) == .release)
        #expect(ledger.count == 0)
        #expect(Self.feed(full, .client, [23, 3, 3, 0, 2, 0, 0]) == .done)
        #expect(ledger.count == 1)

        let resumed = Self.check(ledger: ledger)
        _ = Self.feed(resumed, .client, Self.bytes(TLSReaderVectors.sessionIDResumedClient))
        #expect(Self.feed(resumed, .upstream, Self.bytes(TLSReaderVectors.sessionIDResumedServer)) == .done)
        #expect(resumed.summary.verification == .probeAndStream)

        let stranger = Self.check()  // a fresh ledger: this session was never seen verified
        _ = Self.feed(stranger, .client, Self.bytes(TLSReaderVectors.sessionIDResumedClient))
        guard case .refuse(let refusal) = Self.feed(stranger, .upstream, Self.bytes(TLSReaderVectors.sessionIDResumedServer)) else {
            Issue.record("expected a refusal"); return
        }
        #expect(refusal.reason == .unverifiedResumption)
        let ticket = Self.check()
        _ = Self.feed(ticket, .client, Self.bytes(TLSReaderVectors.ticketResumedClient))
        guard case .refuse(let ticketRefusal) = Self.feed(ticket, .upstream, Self.bytes(TLSReaderVectors.ticketResumedServer)) else {
            Issue.record("expected a refusal"); return
        }
        #expect(ticketRefusal.reason == .unverifiedResumption)
    }

    /// A pinned check for a CONNECT to `target` under rules of (host pattern, mode), each pinning
    /// the genuine leaf, with the debug bypass listing `bypassed`.
    static func pinnedCheck(target: String, rules: [(host: String, mode: String)], bypassed: [String] = []) -> StreamCheck {
        let debug = bypassed.isEmpty ? "" : "debug: { until: \"\(RFC3339Text.inSeconds(3600))\", hosts: [\(bypassed.joined(separator: ", "))] }"
        let ruleLines = rules.map { "  - { host: \"\($0.host)\", mode: \($0.mode), pins: [\"\(leafEC)\"] }" }.joined(separator: "\n")
        let snapshot = PolicySnapshot.loaded(from: """
            version: 1
            proxy: { allowed_ports: [443], dns: { nameservers: [], hosts_file: none } }
            defaults: { unpinned: allow, require_backup: off, trust: "ca-file:\(Paths.fixture("both-roots.pem"))" }
            rules:
            \(ruleLines)
            \(debug)
            """)
        let authority = try! Authority.parse(target).get()
        return StreamCheck(StreamCheck.Context(authority: authority, snapshot: snapshot, pinning: .pinned(rule: snapshot.policy.rule(for: authority)!, probe: nil),
                                               debugBypassEnabled: !bypassed.isEmpty), ledger: ResumptionLedger())
    }

    /// Two hosts under one policy: `www.pinproxy.test` (the CONNECT) in `connectMode`, and
    /// `api.pinproxy.test` (the SNI of the captured ClientHellos) in `sniMode`.
    static func twoHosts(connectMode: String, sniMode: String, bypassed: [String]) -> StreamCheck {
        pinnedCheck(target: "www.pinproxy.test:443", rules: [("www.pinproxy.test", connectMode), ("api.pinproxy.test", sniMode)], bypassed: bypassed)
    }

    /// Report mode and the debug bypass are scoped to the CONNECT's host: a ClientHello naming a host
    /// that an enforced rule pins is refused whatever the CONNECT's host is under, on TLS 1.2 and 1.3.
    /// Only where the named host is itself not enforced (report mode, or bypassed too) does the
    /// CONNECT's report mode or bypass let the mismatch through, as a warning.
    @Test(arguments: [
        ("report", "enforce", [String](), nil as BypassBasis?),
        ("enforce", "enforce", ["www.pinproxy.test"], nil),
        ("report", "report", [], .reportMode),
        ("enforce", "enforce", ["www.pinproxy.test", "api.pinproxy.test"], .debugBypass(until: .distantFuture)),
        ("enforce", "report", [], nil),  // the CONNECT's host is enforced: it must carry its own name
    ])
    func reportModeAndTheBypassNeverReachAnotherEnforcedName(connectMode: String, sniMode: String, bypassed: [String],
                                                             overlookedBy: BypassBasis?) {
        for client in [TLSReaderVectors.opensslTLS12Client, TLSReaderVectors.opensslTLS13Client] {
            let check = Self.twoHosts(connectMode: connectMode, sniMode: sniMode, bypassed: bypassed)
            let answer = Self.feed(check, .client, Self.bytes(client))
            if let overlookedBy {
                #expect(Self.released(answer), "\(answer)")
                let basis = check.summary.overlooked?.basis
                if case .debugBypass = overlookedBy, case .debugBypass = basis {} else { #expect(basis == overlookedBy) }
                #expect(check.summary.overlooked?.reason == .sniMismatch)
            } else {
                guard case .refuse(let refusal) = answer else { Issue.record("\(connectMode)/\(sniMode)/\(bypassed): \(answer)"); continue }
                #expect(refusal.reason == .sniMismatch && refusal.detail.contains("api.pinproxy.test, which the rule at line"))
                #expect(check.summary.overlooked == nil)
            }
        }
    }

    /// One wildcard rule covering both names: a bypass listed for the CONNECT's host does not reach
    /// the other name the rule covers; the rule's own report mode covers both.
    @Test func aBypassForOneNameOfAWildcardRuleDoesNotReachAnother() {
        func check(mode: String, bypassed: Bool) -> StreamCheck {
            Self.pinnedCheck(target: "x.api.pinproxy.test:443", rules: [("**.api.pinproxy.test", mode)], bypassed: bypassed ? ["x.api.pinproxy.test"] : [])
        }
        guard case .refuse(let refusal) = Self.feed(check(mode: "enforce", bypassed: true), .client, Self.bytes(TLSReaderVectors.opensslTLS12Client)) else {
            Issue.record("the bypass for x.api.pinproxy.test must not reach api.pinproxy.test"); return
        }
        #expect(refusal.reason == .sniMismatch && refusal.detail == "the ClientHello names api.pinproxy.test, the CONNECT was for x.api.pinproxy.test")
        let report = check(mode: "report", bypassed: false)
        #expect(Self.released(Self.feed(report, .client, Self.bytes(TLSReaderVectors.opensslTLS12Client))))
        #expect(report.summary.overlooked?.basis == .reportMode)
    }
}
