import Foundation
import PinPolicy
import TestSupport
import TLSInspection
import Testing
@testable import ProxyCore

/// The TLS 1.3 stream check on real captured handshakes (TLS13Vectors) with a key-log source the
/// test drives: when the client's line arrives (before or after the flight), a wrong or conflicting
/// line, no line within the wait, and the tickets read afterwards.
@Suite struct KeyLogCheckTests {
    /// Stands in for the intake: the test delivers the lines and fires the wait.
    final class Source: KeyLogSource {
        var waitSeconds = 0.1
        var path = "/dev/shm/keylog"
        var deliver: ((KeyLogDelivery) -> Void)?
        var timers: [() -> Void] = []
        func follow(clientRandom: [UInt8], _ deliver: @escaping (KeyLogDelivery) -> Void) -> AnyObject {
            self.deliver = deliver
            return self
        }
        func readNow(then done: @escaping () -> Void) { done() }
        func after(_ seconds: Double, _ action: @escaping () -> Void) -> AnyObject {
            timers.append(action)
            return self
        }
        func line(_ secret: KeyLogSecret) { deliver?(.secret(secret)) }
    }

    static let intermediate = Pins.intermediate
    static let rsaLeaf = Pins.leafRSA
    static let captures = [TLS13Vectors.opensslAES128RSA, TLS13Vectors.curlAES256ECDSA, TLS13Vectors.pythonChaChaECDSA,
                           TLS13Vectors.opensslCertificateRequest]

    static func check(_ source: Source, pin: String = intermediate, requireKeylog: Bool = false,
                      ledger: ResumptionLedger = ResumptionLedger()) -> (StreamCheck, Decisions) {
        let yaml = """
            version: 1
            proxy: { allowed_ports: [443], dns: { nameservers: [], hosts_file: none }, keylog: { path: /dev/shm/keylog } }
            defaults: { unpinned: allow, require_backup: off, trust: "ca-file:\(Paths.fixture("both-roots.pem"))" }
            rules:
              - host: api.pinproxy.test
                require_keylog: \(requireKeylog)
                pins: ["\(pin)"]
            """
        let policy = try! PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil)
        let snapshot = try! PolicySnapshot(policy: policy, systemStore: TrustStore.system())
        let authority = try! Authority.parse("api.pinproxy.test:443").get()
        let check = StreamCheck(StreamCheck.Context(authority: authority, snapshot: snapshot, pinning: .pinned(rule: snapshot.policy.rule(for: authority)!, probe: nil),
                                                    debugBypassEnabled: false, keyLog: source), ledger: ledger)
        let decisions = Decisions()
        check.decide = { side, answer in decisions.seen.append((side, answer)) }
        return (check, decisions)
    }

    final class Decisions { var seen: [(TunnelSide, Inspection)] = [] }

    static func bytes(_ base64: String) -> [UInt8] { Array(Data(base64Encoded: base64, options: .ignoreUnknownCharacters)!) }
    static func secret(_ hex: String) -> SecretBytes {
        var raw: [UInt8] = stride(from: 0, to: hex.count, by: 2).map {
            UInt8(hex[hex.index(hex.startIndex, offsetBy: $0)..<hex.index(hex.startIndex, offsetBy: $0 + 2)], radix: 16)!
        }
        defer { explicit_bzero(&raw, raw.count) }
        return raw.withUnsafeBytes { SecretBytes(copying: $0) }
    }
    static func show(_ check: StreamCheck, _ side: TunnelSide, _ bytes: [UInt8]) -> Inspection {
        bytes.withUnsafeBytes { check.inspect(side, $0) }
    }
    static func refusal(_ answer: Inspection?) -> StreamReason? {
        if case .refuse(let refusal)? = answer { return refusal.reason }
        return nil
    }

    @Test(arguments: captures)
    func aLineBeforeTheFlightOpensItAndTheTicketsAreRead(capture: TLS13Capture) {
        let source = Source(), ledger = ResumptionLedger()
        let (check, _) = Self.check(source, ledger: ledger)
        #expect(Self.show(check, .client, Self.bytes(capture.client)) != .hold)
        source.line(.serverHandshake(Self.secret(capture.handshakeSecret)))
        source.line(.serverTraffic0(Self.secret(capture.trafficSecret)))
        let answer = Self.show(check, .upstream, Self.bytes(capture.server))
        #expect(answer == .release || answer == .done, "\(capture.name): \(answer)")
        #expect(check.summary.verification == .probeAndKeylog, "\(capture.name)")
        let tickets = capture.tickets.map { hex in Self.secret(hex).withUnsafeBytes { Array($0) } }
        #expect(!tickets.isEmpty && ledger.contains(any: tickets.map { .ticket($0) }, host: "api.pinproxy.test", port: 443, at: .now), "\(capture.name)")
    }

    @Test(arguments: captures)
    func aLineAfterTheFlightReleasesItLater(capture: TLS13Capture) {
        let source = Source()
        let (check, decisions) = Self.check(source)
        _ = Self.show(check, .client, Self.bytes(capture.client))
        let server = Self.bytes(capture.server)
        #expect(Self.show(check, .upstream, server) == .pass(count: capture.plaintextEnd), "\(capture.name)")
        #expect(decisions.seen.isEmpty)
        source.line(.serverHandshake(Self.secret(capture.handshakeSecret)))
        #expect(decisions.seen.count == 1 && decisions.seen.first?.0 == .upstream)
        #expect(decisions.seen.first.map { $0.1 == .release || $0.1 == .done } == true, "\(decisions.seen)")
        #expect(check.summary.verification == .probeAndKeylog)
    }

    @Test func aWrongLineIsRefusedNeverProbeOnly() {
        let capture = TLS13Vectors.curlAES256ECDSA
        let source = Source()
        let (check, decisions) = Self.check(source)
        _ = Self.show(check, .client, Self.bytes(capture.client))
        #expect(Self.show(check, .upstream, Self.bytes(capture.server)) == .pass(count: capture.plaintextEnd))
        source.line(.serverHandshake(Self.secret(String(repeating: "ab", count: 48))))
        #expect(Self.refusal(decisions.seen.first?.1) == .keylogInvalid)
    }

    @Test func aConflictingLineIsRefused() {
        let capture = TLS13Vectors.pythonChaChaECDSA
        let source = Source()
        let (check, decisions) = Self.check(source)
        _ = Self.show(check, .client, Self.bytes(capture.client))
        // Only the ServerHello so far: the flight is not complete when the lines come.
        #expect(Self.show(check, .upstream, Array(Self.bytes(capture.server).prefix(capture.plaintextEnd + 10))) == .pass(count: capture.plaintextEnd))
        source.line(.serverHandshake(Self.secret(capture.handshakeSecret)))
        source.line(.serverHandshake(Self.secret(String(repeating: "cd", count: 32))))
        #expect(Self.refusal(decisions.seen.first?.1) == .keylogInvalid, "\(decisions.seen)")
    }

    @Test(arguments: [(TLS13Vectors.curlAES256ECDSA.rogueSigned, "rogue signature"), (TLS13Vectors.curlAES256ECDSA.rogueChain, "rogue chain"),
                      (TLS13Vectors.curlAES256ECDSA.finishedAltered, "altered Finished")])
    func aFlightTheLeafsKeyDidNotSignIsRefused(flight: String, what: String) {
        let capture = TLS13Vectors.curlAES256ECDSA
        let source = Source()
        let (check, _) = Self.check(source)
        _ = Self.show(check, .client, Self.bytes(capture.client))
        source.line(.serverHandshake(Self.secret(capture.handshakeSecret)))
        let server = Array(Self.bytes(capture.server).prefix(capture.plaintextEnd)) + Self.bytes(flight)
        #expect(Self.refusal(Self.show(check, .upstream, server)) == .keylogInvalid, "\(what)")
    }

    @Test func aChainTheRuleRefusesIsRefusedWithItsReason() {
        let capture = TLS13Vectors.opensslAES128RSA
        let source = Source()
        let (check, _) = Self.check(source, pin: "spki-sha256:GpJMWznZg/+avOl3K8cJqwDXioJFfLZdlJTvnCoJ960=")
        _ = Self.show(check, .client, Self.bytes(capture.client))
        source.line(.serverHandshake(Self.secret(capture.handshakeSecret)))
        #expect(Self.refusal(Self.show(check, .upstream, Self.bytes(capture.server))) == .policy(.pinMismatch))
        #expect(check.summary.judged?.evaluation.verdict == .refused(.pinMismatch))
    }

    @Test(arguments: [false, true])
    func noLineWithinTheWaitIsProbeOnlyUnlessRequired(requireKeylog: Bool) {
        let capture = TLS13Vectors.opensslEd25519
        let source = Source()
        let (check, decisions) = Self.check(source, requireKeylog: requireKeylog)
        _ = Self.show(check, .client, Self.bytes(capture.client))
        #expect(Self.show(check, .upstream, Self.bytes(capture.server)) == .pass(count: capture.plaintextEnd))
        #expect(source.timers.count == 1)
        source.timers[0]()
        if requireKeylog {
            #expect(Self.refusal(decisions.seen.first?.1) == .keylogMissing)
        } else {
            #expect(decisions.seen.first?.1 == .done && check.summary.verification == .probeOnly)
        }
    }

    /// However the reads split the ServerHello, the ChangeCipherSpec and the first encrypted
    /// record's header, exactly the plaintext passes before the flight is verified, and the line
    /// then opens the rest.
    @Test func everySplitAroundTheServerHelloPassesExactlyThePlaintext() {
        let capture = TLS13Vectors.curlAES256ECDSA
        let server = Self.bytes(capture.server)
        #expect(Array(server[(capture.plaintextEnd - 6)..<capture.plaintextEnd]) == [20, 3, 3, 0, 1, 1])  // the compatibility CCS
        for cut in 1..<(capture.plaintextEnd + 40) {
            let source = Source()
            let (check, decisions) = Self.check(source)
            _ = Self.show(check, .client, Self.bytes(capture.client))
            var passed = 0
            for piece in [Array(server[..<cut]), Array(server[cut...])] {
                switch Self.show(check, .upstream, piece) {
                case .pass(let count): passed += count
                case .hold: break
                case let other: Issue.record("cut \(cut): \(other)")
                }
            }
            // A ChangeCipherSpec cut in two goes with the flight: it passes when the flight does.
            let serverHelloEnd = capture.plaintextEnd - 6
            #expect(passed == (cut >= serverHelloEnd && cut < capture.plaintextEnd ? serverHelloEnd : capture.plaintextEnd), "cut \(cut)")
            source.line(.serverHandshake(Self.secret(capture.handshakeSecret)))
            #expect(decisions.seen.first.map { $0.1 == .release || $0.1 == .done } == true, "cut \(cut): \(decisions.seen)")
            #expect(check.summary.verification == .probeAndKeylog, "cut \(cut)")
        }
    }

    /// A ServerHello choosing a suite pinproxy cannot open (TLS_AES_128_CCM_SHA256) is held like any
    /// flight: a line refuses it (nothing could be verified), no line is probe-only after the wait,
    /// or keylog_missing under require_keylog — never let through at once.
    @Test(arguments: ["line", "none", "required"])
    func aSuitePinproxyCannotOpenIsNeverLetThroughAtOnce(client: String) {
        let capture = TLS13Vectors.curlAES256ECDSA
        var server = Self.bytes(capture.server)
        let sessionIDLength = Int(server[5 + 4 + 2 + 32])
        let suite = 5 + 4 + 2 + 32 + 1 + sessionIDLength
        #expect(server[suite] == 0x13 && server[suite + 1] == 0x02)
        server[suite + 1] = 0x04
        let source = Source()
        let (check, decisions) = Self.check(source, requireKeylog: client == "required")
        _ = Self.show(check, .client, Self.bytes(capture.client))
        #expect(Self.show(check, .upstream, server) == .pass(count: capture.plaintextEnd))
        switch client {
        case "line":
            source.line(.serverHandshake(Self.secret(capture.handshakeSecret)))
            #expect(Self.refusal(decisions.seen.first?.1) == .keylogInvalid)
        case "required":
            source.timers.first?()
            #expect(Self.refusal(decisions.seen.first?.1) == .keylogMissing)
        default:
            source.timers.first?()
            #expect(decisions.seen.first?.1 == .done && check.summary.verification == .probeOnly)
        }
    }
}
