import Foundation
import PinPolicy
import TestSupport
import TLSInspection
import Testing
@testable import ProxyCore

/// The mirror check's decisions as tables, without a socket: what a mirror connection's end makes
/// of the check, and what each outcome means for the tunnel under an enforced rule and under report
/// mode (a lost or failed mirror refuses the tunnel, report mode lets it through; an unavailable one
/// leaves the tunnel to the probe; a chain that does not parse is refused in every mode).
@Suite struct MirrorCheckDecisionTests {
    struct EndCase: CustomTestStringConvertible, Sendable {
        let end: MirrorConnection.End
        let progress: MirrorCheck.Progress
        var testDescription: String { "\(end)" }
    }

    static let ends: [EndCase] = [
        EndCase(end: .connectFailed("refused"), progress: .lost("the mirror connection could not be made while the tunnel's was: refused")),
        EndCase(end: .closed("reset by the server"), progress: .lost("the mirror connection ended before the server's flight: reset by the server")),
        EndCase(end: .closedByPinproxy, progress: .lost("closed")),
    ]

    @Test(arguments: ends)
    func aMirrorConnectionThatEndsIsLost(_ c: EndCase) {
        #expect(MirrorCheck.progress(after: c.end) == c.progress)
    }

    static func check(mode: String) -> StreamCheck {
        let yaml = """
            version: 1
            proxy: { allowed_ports: [443], dns: { nameservers: [], hosts_file: none } }
            defaults: { unpinned: allow, require_backup: off }
            rules:
              - host: api.pinproxy.test
                mode: \(mode)
                pins: ["\(Pins.intermediate)"]
            """
        let policy = try! PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil)
        let snapshot = try! PolicySnapshot(policy: policy, systemStore: .anchors([], name: "none"))
        let authority = try! Authority.parse("api.pinproxy.test:443").get()
        let context = StreamCheck.Context(authority: authority, snapshot: snapshot, pinning: .pinned(rule: snapshot.policy.rule(for: authority)!, probe: nil),
                                          debugBypassEnabled: false, keyLog: nil)
        return StreamCheck(context, ledger: ResumptionLedger())
    }

    static func refused(_ reason: StreamReason, _ detail: String) -> MirrorFinding {
        .refused(.refuse(StreamRefusal(reason: reason, detail: detail, stage: .mirror)))
    }

    struct FindingCase: CustomTestStringConvertible, Sendable {
        let name: String
        let progress: MirrorCheck.Progress
        let enforced: MirrorFinding?
        let reported: MirrorFinding?
        var testDescription: String { name }
    }

    static let findings: [FindingCase] = [
        FindingCase(name: "pending", progress: .pending, enforced: nil, reported: nil),
        FindingCase(name: "a flight that does not verify", progress: .invalid("bad CertificateVerify"),
                    enforced: refused(.mirrorInvalid, "the server's flight on the mirror check does not verify: bad CertificateVerify"),
                    reported: .refused(.done)),
        FindingCase(name: "an answer that proves no chain", progress: .failed("an alert"),
                    enforced: refused(.mirrorFailed, "the server's answer on the mirror check proves no chain: an alert"), reported: .refused(.done)),
        FindingCase(name: "a lost mirror", progress: .lost("closed"), enforced: refused(.mirrorLost, "closed"), reported: .refused(.done)),
        FindingCase(name: "a mirror that cannot be made", progress: .unavailable("a group pinproxy cannot compute"),
                    enforced: .unavailable("a group pinproxy cannot compute"), reported: .unavailable("a group pinproxy cannot compute")),
        FindingCase(name: "a chain that does not parse", progress: .shown(chain: [[0x30, 0x00]], version: 0x0304, delivered: .none),
                    enforced: refused(.malformedTLS, "a certificate in the server's Certificate message does not parse"),
                    reported: refused(.malformedTLS, "a certificate in the server's Certificate message does not parse")),
    ]

    @Test(arguments: findings)
    func whatAMirrorsOutcomeMeansForTheTunnel(_ c: FindingCase) {
        #expect(Self.check(mode: "enforce").finding(for: c.progress, Date()) == c.enforced)
        #expect(Self.check(mode: "report").finding(for: c.progress, Date()) == c.reported)
    }
}
