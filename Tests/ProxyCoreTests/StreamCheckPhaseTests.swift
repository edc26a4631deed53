import Foundation
import PinPolicy
import TestSupport
import TLSInspection
import Testing
@testable import ProxyCore

/// The stream check's phases, driven without a socket by captured flights cut at their record
/// boundaries: which phase each flight leaves it in, with which data.
@Suite struct StreamCheckPhaseTests {
    typealias Unit = StreamCheckUnitTests

    /// The first `count` records of a captured flight.
    static func records(_ base64: String, _ range: Range<Int>) -> [UInt8] {
        let all = Unit.bytes(base64)
        var bounds = [0]
        while bounds.count <= range.upperBound {
            let start = bounds[bounds.count - 1]
            bounds.append(start + 5 + (Int(all[start + 3]) << 8 | Int(all[start + 4])))
        }
        return Array(all[bounds[range.lowerBound]..<bounds[range.upperBound]])
    }

    /// A TLS 1.2 NewSessionTicket record carrying `ticket` (RFC 5077 §3.3).
    static func newSessionTicket(_ ticket: [UInt8]) -> [UInt8] {
        let body: [UInt8] = [0, 0, 0x1c, 0x20] + [UInt8(ticket.count >> 8), UInt8(ticket.count & 0xff)] + ticket
        let message: [UInt8] = [4, 0, UInt8(body.count >> 8), UInt8(body.count & 0xff)] + body
        return [22, 3, 3, UInt8(message.count >> 8), UInt8(message.count & 0xff)] + message
    }

    static let changeCipherSpec: [UInt8] = [20, 3, 3, 0, 1, 1]
    static let applicationData: [UInt8] = [23, 3, 3, 0, 2, 0, 0]

    /// Runs a verified full TLS 1.2 handshake with a session id through a check on `ledger`.
    static func recordASession(in ledger: ResumptionLedger) {
        let full = Unit.check(ledger: ledger)
        _ = Unit.feed(full, .client, Unit.firstRecord(TLSReaderVectors.sessionIDFullClient))
        _ = Unit.feed(full, .upstream, Unit.bytes(TLSReaderVectors.sessionIDFullServer))
        _ = Unit.feed(full, .client, applicationData)
    }

    @Test func theClientHelloIsCountedUntilCompleteThenTheServerHelloIsAwaited() {
        let check = Unit.check()
        let hello = Unit.firstRecord(TLSReaderVectors.opensslTLS12Client)
        #expect(Unit.feed(check, .client, Array(hello.dropLast())) == .hold)
        guard case .awaitingClientHello(let fed) = check.phase else { Issue.record("\(check.phase)"); return }
        #expect(fed == hello.count - 1)
        #expect(Unit.feed(check, .client, [hello[hello.count - 1]]) == .release)
        guard case .awaitingServerHello(let client, let checks) = check.phase else { Issue.record("\(check.phase)"); return }
        #expect(client.serverName == "api.pinproxy.test" && checks.isEmpty)
    }

    /// ServerHello → Certificate (judged) → NewSessionTicket → ChangeCipherSpec → the client's
    /// application data: only then are the session id and the ticket recorded.
    @Test func aTLS12FullHandshakeWalksFromItsCertificateToTheClientsApplicationData() {
        let ledger = ResumptionLedger()
        let check = Unit.check(ledger: ledger)
        let server = TLSReaderVectors.opensslTLS12Server
        _ = Unit.feed(check, .client, Unit.firstRecord(TLSReaderVectors.opensslTLS12Client))
        #expect(Unit.feed(check, .upstream, Self.records(server, 0..<1)) == .hold)
        guard case .tls12Certificate(let hellos) = check.phase else { Issue.record("\(check.phase)"); return }
        #expect(hellos.server.version == 0x0303 && check.summary.negotiated == .tls12)
        #expect(Unit.feed(check, .upstream, Self.records(server, 1..<4)) == .release)
        guard case .tls12Judged(_, let judged) = check.phase else { Issue.record("\(check.phase)"); return }
        #expect(judged == [.sessionID(hellos.server.sessionID)])
        #expect(check.summary.verification == .probeAndStream && check.summary.judged != nil)
        #expect(Unit.feed(check, .upstream, Self.records(server, 4..<5)) == .release)
        guard case .tls12Judged(_, let issued) = check.phase, issued.count == 2, case .ticket = issued[1] else { Issue.record("\(check.phase)"); return }
        #expect(Unit.feed(check, .upstream, Self.changeCipherSpec) == .done)
        guard case .watchingApplicationData(let pending) = check.phase else { Issue.record("\(check.phase)"); return }
        #expect(pending == issued && ledger.count == 0)
        #expect(Unit.feed(check, .client, Self.applicationData) == .done)
        guard case .done = check.phase else { Issue.record("\(check.phase)"); return }
        // The ticket is recorded (this server's session id is empty: nothing to resume by).
        #expect(hellos.server.sessionID.isEmpty && ledger.count == 1)
        #expect(ledger.contains(any: [issued[1]], host: "api.pinproxy.test", port: 443, at: .now))
    }

    /// A resumption of a session seen verified is its own phase; the ticket the server issues in it
    /// is recorded like a full handshake's, once the client sends application data.
    @Test func aTLS12ResumptionIsItsOwnPhase() {
        let ledger = ResumptionLedger()
        Self.recordASession(in: ledger)
        #expect(ledger.count == 1)
        let check = Unit.check(ledger: ledger)
        let server = TLSReaderVectors.sessionIDResumedServer
        _ = Unit.feed(check, .client, Unit.bytes(TLSReaderVectors.sessionIDResumedClient))
        #expect(Unit.feed(check, .upstream, Self.records(server, 0..<1)) == .hold)
        guard case .tls12Certificate = check.phase else { Issue.record("\(check.phase)"); return }
        #expect(Unit.feed(check, .upstream, Self.newSessionTicket([7, 7, 7, 7])) == .release)
        guard case .resumption(_, let issued) = check.phase else { Issue.record("\(check.phase)"); return }
        #expect(issued == [.ticket([7, 7, 7, 7])] && check.summary.verification == .probeAndStream && check.summary.judged == nil)
        #expect(Unit.feed(check, .upstream, Self.changeCipherSpec) == .done)
        guard case .watchingApplicationData(let pending) = check.phase else { Issue.record("\(check.phase)"); return }
        #expect(pending == issued)
        #expect(Unit.feed(check, .client, Self.applicationData) == .done)
        #expect(ledger.contains(any: [.ticket([7, 7, 7, 7])], host: "api.pinproxy.test", port: 443, at: .now))
    }

    @Test func aServerHelloBeforeTheClientsHelloIsRefused() {
        let check = Unit.check()
        guard case .refuse(let refusal) = Unit.feed(check, .upstream, Self.records(TLSReaderVectors.opensslTLS12Server, 0..<1)) else {
            Issue.record("expected a refusal"); return
        }
        #expect(refusal.reason == .malformedTLS && refusal.detail == "the server sent a ServerHello before the client's hello")
        guard case .awaitingClientHello(fed: 0) = check.phase else { Issue.record("\(check.phase)"); return }
    }

    /// Without the client's key log, TLS 1.3 is done at its ServerHello: probe-only.
    @Test func tls13WithoutAKeyLogIsDoneAtItsServerHello() {
        let check = Unit.check()
        _ = Unit.feed(check, .client, Unit.firstRecord(TLSReaderVectors.opensslTLS13Client))
        #expect(Unit.feed(check, .upstream, Unit.bytes(TLSReaderVectors.opensslTLS13Server)) == .done)
        guard case .done = check.phase else { Issue.record("\(check.phase)"); return }
        #expect(check.summary.negotiated == .tls13 && check.summary.verification == .probeOnly && check.summary.judged == nil)
    }

    /// With it, the encrypted flight is held in `tls13Held` until the client's line opens it; then
    /// the tickets are read, and the check is done.
    @Test func tls13WithTheKeyLogIsHeldUntilTheLineOpensItsFlight() {
        let capture = TLS13Vectors.opensslAES128RSA
        let source = KeyLogCheckTests.Source(), ledger = ResumptionLedger()
        let (check, decisions) = KeyLogCheckTests.check(source, ledger: ledger)
        _ = KeyLogCheckTests.show(check, .client, KeyLogCheckTests.bytes(capture.client))
        guard case .awaitingServerHello(_, let checks) = check.phase, checks.keyLog != nil else { Issue.record("\(check.phase)"); return }
        #expect(KeyLogCheckTests.show(check, .upstream, KeyLogCheckTests.bytes(capture.server)) == .pass(count: capture.plaintextEnd))
        guard case .tls13Held(let hellos, _) = check.phase else { Issue.record("\(check.phase)"); return }
        #expect(hellos.server.version == 0x0304)
        source.line(.serverHandshake(KeyLogCheckTests.secret(capture.handshakeSecret)))
        #expect(decisions.seen.first?.1 == .release && check.summary.verification == .probeAndKeylog)
        guard case .tls13Held = check.phase else { Issue.record("reading tickets: \(check.phase)"); return }
        source.line(.serverTraffic0(KeyLogCheckTests.secret(capture.trafficSecret)))
        #expect(ledger.count > 0)
        #expect(KeyLogCheckTests.show(check, .upstream, [23, 3, 3, 0, 1, 0]) == .done)
        guard case .done = check.phase else { Issue.record("\(check.phase)"); return }
    }

    @Test func anUnpinnedTunnelIsDoneAfterItsClientHello() {
        let check = Unit.check(target: "other.pinproxy.test:443", pinned: false)
        #expect(Unit.feed(check, .client, Unit.bytes(TLSReaderVectors.opensslNoSNIClient)) == .done)
        guard case .done = check.phase else { Issue.record("\(check.phase)"); return }
        #expect(check.summary.verification == .unpinned)
    }

    /// A reload that no longer pins the host leaves the tunnel standing unpinned (the re-judge keeps
    /// it): what the check had still to judge, it no longer judges, rather than refusing it for want
    /// of a rule. A reload that still pins it judges by the new rule, no longer by the probe.
    @Test func aReloadThatNoLongerPinsTheHostLeavesNothingToJudge() {
        let check = Unit.check()
        let server = TLSReaderVectors.opensslTLS12Server
        _ = Unit.feed(check, .client, Unit.firstRecord(TLSReaderVectors.opensslTLS12Client))
        #expect(Unit.feed(check, .upstream, Self.records(server, 0..<1)) == .hold)
        let yaml = """
            version: 1
            proxy: { allowed_ports: [443], dns: { nameservers: [], hosts_file: none } }
            defaults: { unpinned: allow, require_backup: off }
            rules: []
            """
        let policy = try! PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil)
        check.policyChanged(to: try! PolicySnapshot(policy: policy, systemStore: TrustStore.system()))
        #expect(Unit.feed(check, .upstream, Self.records(server, 1..<4)) == .done)
        #expect(check.summary.judged == nil)
    }

    @Test func aContextFollowsAReloadToTheNewRule() {
        let snapshot = Unit.snapshot(pin: Unit.leafEC)
        let authority = try! Authority.parse("api.pinproxy.test:443").get()
        var context = StreamCheck.Context(authority: authority, snapshot: snapshot, pinning: .unpinned, debugBypassEnabled: false)
        context.policyChanged(to: snapshot)
        #expect(!context.isPinned && context.rule == nil && context.bypassBasis(at: .now) == nil)  // unpinned stays unpinned
        let reloaded = Unit.snapshot(pin: Unit.rogueLeaf, mode: "report")
        context = StreamCheck.Context(authority: authority, snapshot: snapshot, pinning: .pinned(rule: snapshot.policy.rule(for: authority)!, probe: nil),
                                      debugBypassEnabled: false)
        context.policyChanged(to: reloaded)
        guard case .pinned(let rule, nil) = context.pinning else { Issue.record("\(context.pinning)"); return }
        #expect(rule.mode == .report && context.bypassBasis(at: .now) == .reportMode)
    }
}

/// The record-header walk the client side uses after its ClientHello.
@Suite struct RecordHeaderWalkTests {
    /// Handshake and ChangeCipherSpec records whose bodies hold the byte 23, then application data.
    static let stream: [UInt8] = [22, 3, 3, 0, 3, 23, 23, 23] + [20, 3, 3, 0, 1, 23] + [23, 3, 3, 0, 2, 0, 0]

    @Test(arguments: [1, 2, 5, 7, 100])
    func applicationDataIsFoundHoweverThePiecesSplitTheHeaders(piece: Int) {
        var walk = RecordHeaderWalk(at: 10)
        var found: Int?
        for start in stride(from: 0, to: Self.stream.count, by: piece) {
            let slice = Array(Self.stream[start..<min(start + piece, Self.stream.count)])
            if slice.withUnsafeBytes({ walk.feed($0, until: 23) }) { found = start; break }
        }
        // The header starts at offset 14: found in the piece that completes it.
        #expect(found.map { $0 <= 18 && $0 + piece > 18 } == true, "\(String(describing: found))")
    }

    @Test func itCountsWhatItWasFedFromItsStart() {
        var walk = RecordHeaderWalk(at: 10)
        #expect(Array(Self.stream.prefix(8)).withUnsafeBytes { walk.feed($0, until: 23) } == false)
        #expect(walk.fed == 18)
    }
}

@Suite struct TLSVersionTests {
    @Test(arguments: [(0x0304, "TLSv1.3"), (0x0303, "TLSv1.2"), (0x0302, "TLSv1.1"), (0x0301, "TLSv1"), (0x7f1c, "0x7f1c")])
    func theVersionIsNamedAsTheLogsSayIt(version: Int, name: String) {
        #expect(TLSVersion(wire: UInt16(version)).description == name)
    }

    /// The probe's version arrives as OpenSSL's name: the same value as the stream's wire number.
    @Test(arguments: [("TLSv1.3", 0x0304), ("TLSv1.2", 0x0303), ("TLSv1.1", 0x0302), ("TLSv1", 0x0301)])
    func openSSLsNameIsTheWireVersion(name: String, wire: Int) {
        #expect(TLSVersion(openSSLName: name) == TLSVersion(wire: UInt16(wire)))
    }

    @Test(arguments: ["unknown", "", "0x0304", "TLSv1.4"])
    func aNameThatIsNoVersionIsNone(name: String) {
        #expect(TLSVersion(openSSLName: name) == nil)
    }
}

@Suite struct StreamSummaryTests {
    @Test func anythingLetThroughMakesItABypass() {
        var summary = StreamSummary(verifiedBy: .probeAndStream)
        #expect(summary.verification == .probeAndStream && summary.negotiated == nil)
        summary.overlooked = .init(reason: .sniMismatch, detail: "", basis: .reportMode)
        #expect(summary.verification == .bypass)
    }
}
