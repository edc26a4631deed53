import Foundation
import PinPolicy
import TestSupport
import TLSInspection
import Testing
@testable import ProxyCore

/// The session's state machine without a socket: each event moves it, and the action it answers
/// says what the session must do.
@Suite struct SessionMachineTests {
    static let pin = Pins.leafEC
    static let snapshot: PolicySnapshot = {
        let yaml = """
            version: 1
            proxy: { allowed_ports: [443], deny_destinations: [link-local], dns: { nameservers: [], hosts_file: none } }
            defaults: { unpinned: allow, require_backup: off }
            resolve:
              api.example.test: 127.0.0.5
              denied.example.test: 169.254.0.9
            rules:
              - host: api.example.test
                pins: ["\(pin)"]
              - host: open.example.test
                mode: unpinned
            """
        return PolicySnapshot.loaded(from: yaml)
    }()
    static let client = SocketAddress.parse("127.0.0.1:40000")!

    func machine(ownAddress: String? = nil) -> SessionMachine {
        SessionMachine(conn: 7, client: Self.client) { $0.description == ownAddress }
    }

    func authority(_ text: String) -> Authority { try! Authority.parse(text).get() }

    func parsed(_ m: inout SessionMachine, _ target: String, available: Bool = true, stopping: Bool = false) -> SessionMachine.Action {
        m.requestParsed(authority(target), snapshot: Self.snapshot, stopping: stopping, tunnelAvailable: available)
    }

    @Test func aPinnedNameIsResolvedFromTheMapAndProbed() {
        var m = machine()
        guard case .probe(let key) = parsed(&m, "api.example.test:443") else { Issue.record("expected a probe"); return }
        #expect(key.serverName == "api.example.test" && key.port == 443 && key.addresses.map(\.description) == ["127.0.0.5"])
        #expect(m.holdsTunnelSlot)
        guard case .probing(_, let rule) = m.state else { Issue.record("\(m.state)"); return }
        #expect(rule.line == 8)
    }

    @Test func anUnpinnedRuleConnectsWithoutAProbe() {
        var m = machine()
        guard case .lookUp("open.example.test") = parsed(&m, "open.example.test:443") else { Issue.record("expected a lookup"); return }
        guard case .connect(let addresses) = m.resolved(.success([IPAddress("127.0.0.9")!])) else { Issue.record("expected a connect"); return }
        #expect(addresses.map(\.description) == ["127.0.0.9"])
        guard case .open(let record, let decision) = m.connected(to: SocketAddress.parse("127.0.0.9:443")!) else { Issue.record("expected open"); return }
        #expect(decision == .unpinned(.ruleUnpinned) && record.address?.description == "127.0.0.9:443" && record.judgement == nil)
        guard case .opened(_, .unpinned(.ruleUnpinned, let rule?), _) = record.stage, rule.line == 10 else { Issue.record("\(record.stage)"); return }
        guard case .close(.relay(.finished), let closed) = m.ended(.relay(.finished)), closed.passage?.decision == .unpinned(.ruleUnpinned) else {
            Issue.record("expected the close of an open tunnel"); return
        }
        #expect(!m.holdsTunnelSlot)
        guard case .none = m.ended(.clientClosed) else { Issue.record("a second end must do nothing"); return }
    }

    /// The policy decides before the tunnel cap: a refused port is a 403 even at the cap, and only
    /// an admitted CONNECT meets the cap (503).
    @Test func thePolicyComesBeforeTheCap() {
        var a = machine()
        guard case .refuse(let refusal, let record) = parsed(&a, "api.example.test:22", available: false) else { Issue.record("expected a refusal"); return }
        #expect(refusal.status == 403 && refusal.code == .policy(.portNotAllowed))
        // Refused by admission: what was asked, under which file, and no rule.
        guard case .asked(let asked) = record.stage, asked.authority.port == 22, record.policySource == "test.yaml", record.rule == nil else {
            Issue.record("\(record.stage)"); return
        }
        var b = machine()
        guard case .refuse(let capped, let admitted) = parsed(&b, "api.example.test:443", available: false) else { Issue.record("expected a refusal"); return }
        #expect(capped.status == 503 && capped.code == .network(.connectionLimitReached))
        // Admitted, then capped: the rule that admitted it is in the line.
        guard case .admitted(_, .pinned(let rule)) = admitted.stage, rule.line == 8 else {
            Issue.record("\(admitted.stage)"); return
        }
        #expect(!a.holdsTunnelSlot && !b.holdsTunnelSlot)
    }

    @Test(arguments: [
        ("169.254.0.1:443", false, "destination_ip_prohibited"),
        ("denied.example.test:443", false, "destination_ip_prohibited"),
        ("api.example.test:443", true, "shutting_down"),
    ])
    func refusalsBeforeAnyProbe(target: String, stopping: Bool, reason: String) {
        var m = machine()
        guard case .refuse(let refusal, _) = parsed(&m, target, stopping: stopping) else { Issue.record("expected a refusal"); return }
        #expect(refusal.reason == reason)
        guard case .lingering = m.state else { Issue.record("\(m.state)"); return }
    }

    @Test func aConnectToPinproxyItselfIsALoop() {
        var m = machine(ownAddress: "127.0.0.5:443")
        guard case .refuse(let refusal, _) = parsed(&m, "api.example.test:443") else { Issue.record("expected a refusal"); return }
        #expect(refusal.reason == "proxy_loop_detected")
    }

    @Test func dnsFailuresAndTimeoutsRefuse() {
        var failed = machine()
        _ = parsed(&failed, "other.example.test:443")
        guard case .refuse(let refusal, _) = failed.resolved(.failure(.notFound("NXDOMAIN"))) else { Issue.record("expected a refusal"); return }
        #expect(refusal.reason == "dns_error" && refusal.detail == "other.example.test did not resolve: NXDOMAIN")
        var slow = machine()
        _ = parsed(&slow, "other.example.test:443")
        guard case .refuse(let timeout, _) = slow.resolveTimedOut() else { Issue.record("expected a refusal"); return }
        #expect(timeout.reason == "dns_timeout" && timeout.status == 504)
    }

    @Test func aFailedProbeRefusesWithWhatItSaw() {
        var m = machine()
        _ = parsed(&m, "api.example.test:443")
        let failed = ProbeResult(outcome: .failed(.probeTimeout), address: SocketAddress.parse("127.0.0.5:443"), tlsVersion: nil)
        guard case .refuse(let refusal, let record) = m.probed(failed, at: Date(), debugBypassEnabled: false) else { Issue.record("expected a refusal"); return }
        #expect(refusal.code == .network(.probeTimeout) && record.address?.description == "127.0.0.5:443" && record.rule?.line == 8)
        guard case .probeFailed(_, _, let contact) = record.stage, contact.tlsVersion == nil, record.judgement == nil else { Issue.record("\(record.stage)"); return }
        #expect(!m.holdsTunnelSlot)
    }

    /// A pinned CONNECT's record grows stage by stage: judged with the probe's evidence, opened on the
    /// verdict that let it through, and its close carries that decision.
    @Test func aPinnedTunnelsRecordGrowsFromJudgedToOpened() throws {
        let snapshot = PolicySnapshot.loaded(from: """
            version: 1
            proxy: { allowed_ports: [443], deny_destinations: [link-local], dns: { nameservers: [], hosts_file: none } }
            defaults: { unpinned: deny, require_backup: off, trust: "ca-file:\(Paths.fixture("both-roots.pem"))" }
            resolve:
              api.pinproxy.test: 127.0.0.1
            rules:
              - host: api.pinproxy.test
                pins: ["\(Pins.leafEC)"]
            """)
        var m = machine()
        guard case .probe = m.requestParsed(authority("api.pinproxy.test:443"), snapshot: snapshot, stopping: false, tunnelAvailable: true) else {
            Issue.record("expected a probe"); return
        }
        let chain = try Certificate.load(file: Paths.fixture("leaf-ec256.chain.pem"))
        let seen = ProbeResult(outcome: .chain(chain, proof: .handshakeCompleted), address: SocketAddress.parse("127.0.0.1:443"), tlsVersion: .tls13)
        let action = m.probed(seen, at: Date(), debugBypassEnabled: false)
        guard case .connect(let addresses) = action, case .connecting(_, .pinned(_, let judgement, .allowed(let match))) = m.state else {
            Issue.record("\(action)"); return
        }
        #expect(addresses.map(\.description) == ["127.0.0.1"] && judgement.tlsVersion == .tls13 && match.entry.pin.description == Pins.leafEC)
        guard case .open(let record, .allowed) = m.connected(to: SocketAddress.parse("127.0.0.1:443")!) else { Issue.record("expected open"); return }
        #expect(record.judgement?.keyProof == .handshakeCompleted && record.validation.isVerified && record.tlsVersion == .tls13)
        guard case .close(.clientClosed, let closed) = m.ended(.clientClosed), case .pinned(_, _, .allowed)? = closed.passage else {
            Issue.record("expected the close of the open tunnel"); return
        }
    }

    @Test func aHangUpBeforeTheDecisionClosesWithoutATunnel() {
        var m = machine()
        _ = parsed(&m, "api.example.test:443")
        guard case .close(.clientClosed, let record) = m.ended(.clientClosed), record.passage == nil, case .admitted = record.stage else {
            Issue.record("expected close"); return
        }
        guard case .closed = m.state else { Issue.record("\(m.state)"); return }
    }

    @Test func aBadRequestIsRejectedAndLingers() {
        var m = machine()
        guard case .reject(let refusal, _) = m.requestRejected(.headerTimeout) else { Issue.record("expected a rejection"); return }
        #expect(refusal.status == 408)
        m.lingered()
        guard case .closed = m.state else { Issue.record("\(m.state)"); return }
    }

    /// Impossible transitions trap: a probe result for a session that never probed is a bug.
    @Test func anImpossibleTransitionTraps() async {
        await #expect(processExitsWith: .failure) {
            var m = SessionMachine(conn: 1, client: SocketAddress.parse("127.0.0.1:1")!) { _ in false }
            _ = m.connected(to: SocketAddress.parse("127.0.0.1:2")!)
        }
    }
}

/// Transparent mode through the same machine: the original destination stands in for DNS, and the
/// loop and `deny_destinations` judge it.
@Suite struct TransparentSessionMachineTests {
    func machine(original: String, ownAddress: String? = nil) -> SessionMachine {
        SessionMachine(conn: 9, client: SessionMachineTests.client, original: SocketAddress.parse(original)!) { $0.description == ownAddress }
    }

    func authority(_ text: String) -> Authority { try! Authority.parse(text).get() }

    @Test func aPinnedSNIIsProbedAtTheOriginalAddressNotTheResolveMap() {
        var m = machine(original: "192.0.2.44:443")
        let action = m.requestParsed(authority("api.example.test:443"), snapshot: SessionMachineTests.snapshot, stopping: false, tunnelAvailable: true)
        guard case .probe(let key) = action else {
            Issue.record("\(action)")
            return
        }
        #expect(key.serverName == "api.example.test" && key.addresses == [IPAddress("192.0.2.44")!] && key.port == 443)
        #expect(m.admitted?.original == SocketAddress.parse("192.0.2.44:443"))
    }

    @Test func aDeniedOriginalDestinationIsRefusedAndItsRecordNamesIt() {
        var m = machine(original: "169.254.0.9:443")
        let action = m.requestParsed(authority("open.example.test:443"), snapshot: SessionMachineTests.snapshot, stopping: false, tunnelAvailable: true)
        guard case .refuse(let refusal, let record) = action else {
            Issue.record("\(action)")
            return
        }
        #expect(refusal.code == .policy(.destinationProhibited) && record.originalDestination == SocketAddress.parse("169.254.0.9:443"))
    }

    @Test func anOriginalDestinationThatIsPinproxyItselfIsALoop() {
        var m = machine(original: "192.0.2.44:443", ownAddress: "192.0.2.44:443")
        let action = m.requestParsed(authority("open.example.test:443"), snapshot: SessionMachineTests.snapshot, stopping: false, tunnelAvailable: true)
        guard case .refuse(let refusal, _) = action else {
            Issue.record("\(action)")
            return
        }
        #expect(refusal.code == .network(.proxyLoopDetected))
    }

    @Test func aRejectedFirstFlightStillNamesTheOriginalDestination() {
        var m = machine(original: "192.0.2.44:443")
        guard case .reject(_, let record) = m.requestRejected(.headerTimeout) else {
            Issue.record("not rejected")
            return
        }
        #expect(record.originalDestination == SocketAddress.parse("192.0.2.44:443"))
    }
}
