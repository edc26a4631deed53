import Foundation
import PinPolicy
import TLSInspection
import Testing
import TestSupport
@testable import ProxyCore

/// The one admission gate as tables: a CONNECT and a plain-HTTP request to the same targets, each
/// cause with the reason and detail its refusal carries (the log's bytes), and the outcomes that pass.
@Suite struct AdmissionGateTests {
    static let pin = "spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="

    static func policy(unpinned: String = "deny", plainHTTP: String = "forward") -> Policy {
        let yaml = """
            version: 1
            proxy:
              allowed_ports: [443, 8443]
              allowed_plain_ports: [80]
              plain_http: \(plainHTTP)
              allow_clients: [loopback, 10.1.0.0/16]
              deny_destinations: [loopback, 10.0.0.0/8]
              dns: { nameservers: [], hosts_file: none }
            defaults: { unpinned: \(unpinned), require_backup: off }
            rules:
              - host: api.test
                pins: ["\(pin)"]
              - host: "**.free.test"
                mode: unpinned
              - ip: 192.0.2.7
                ports: [8443]
                pins: ["\(pin)"]
            """
        return try! PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil)
    }

    static let deny = policy()

    func admit(_ target: String, client: String = "127.0.0.1", _ kind: AdmissionKind, policy: Policy = deny) -> AdmissionOutcome {
        AdmissionGate.admit(try! Authority.parse(target).get(), client: IPAddress(client)!, policy: policy, kind: kind)
    }

    /// (target, client, kind) → reason and detail of the refusal.
    @Test(arguments: [
        ("api.test:443", "10.2.0.1", AdmissionKind.connect, "client_not_allowed", "client 10.2.0.1 is not in allow_clients"),
        ("api.test:80", "10.2.0.1", .plain, "client_not_allowed", "client 10.2.0.1 is not in allow_clients"),
        ("api.test:22", "127.0.0.1", .connect, "port_not_allowed", "port 22 is not in allowed_ports (443, 8443)"),
        ("a.free.test:443", "127.0.0.1", .plain, "plain_port_not_allowed", "port 443 is not in allowed_plain_ports (80)"),
        ("api.test:80", "127.0.0.1", .plain, "plain_http_to_pinned_host",
         "api.test is pinned by the rule api.test (line 11), so it is reached only over HTTPS"),
        // A rule for 192.0.2.7:8443 pins the host on every port for plain HTTP, its embedded forms too.
        ("[::ffff:192.0.2.7]:80", "127.0.0.1", .plain, "plain_http_to_pinned_host",
         "::ffff:192.0.2.7 is pinned by the rule 192.0.2.7:8443 (line 15), so it is reached only over HTTPS"),
        ("10.0.0.1:443", "127.0.0.1", .connect, "destination_ip_prohibited", "10.0.0.1 is in deny_destinations (10.0.0.0/8)"),
        ("10.0.0.1:80", "127.0.0.1", .plain, "destination_ip_prohibited", "10.0.0.1 is in deny_destinations (10.0.0.0/8)"),
        ("[::ffff:127.0.0.1]:443", "127.0.0.1", .connect, "destination_ip_prohibited", "::ffff:127.0.0.1 is in deny_destinations (loopback)"),
        ("[64:ff9b::a00:1]:80", "127.0.0.1", .plain, "destination_ip_prohibited", "64:ff9b::a00:1 is in deny_destinations (10.0.0.0/8)"),
        ("other.test:443", "127.0.0.1", .connect, "unpinned_denied", "no rule pins other.test and defaults.unpinned is deny"),
        ("other.test:80", "127.0.0.1", .plain, "unpinned_denied", "no rule lets plain HTTP reach other.test and defaults.unpinned is deny"),
    ])
    func refusals(target: String, client: String, kind: AdmissionKind, reason: String, detail: String) {
        let refusal = admit(target, client: client, kind).refusal
        #expect(refusal?.reason == reason)
        #expect(refusal?.detail == detail)
    }

    @Test func plainHTTPRefusedComesBeforeEverything() {
        let refuse = Self.policy(plainHTTP: "refuse")
        #expect(admit("api.test:80", client: "10.2.0.1", .plain, policy: refuse) == .refused(.plainHTTPRefused))
        #expect(AdmissionCause.plainHTTPRefused.refusal.reason == "plain_http_refused")
        #expect(AdmissionCause.plainHTTPRefused.refusal.detail == "proxy.plain_http is refuse: pinproxy forwards no plain-HTTP request")
        // It is plain HTTP's setting: a CONNECT does not see it.
        #expect(admit("api.test:443", .connect, policy: refuse) == .probe(Self.deny.rules[0]))
    }

    @Test func theOutcomesThatPass() {
        let allow = Self.policy(unpinned: "allow")
        #expect(admit("api.test:443", .connect) == .probe(Self.deny.rules[0]))
        #expect(admit("a.free.test:443", .connect) == .unpinned(.ruleUnpinned, rule: Self.deny.rules[1]))
        #expect(admit("a.free.test:80", .plain) == .unpinned(.ruleUnpinned, rule: Self.deny.rules[1]))
        #expect(admit("other.test:443", .connect, policy: allow) == .unpinned(.noRule, rule: nil))
        #expect(admit("other.test:80", .plain, policy: allow) == .unpinned(.noRule, rule: nil))
        #expect(admit("other.test:80", .plain, policy: allow).refusal == nil)
    }

    /// A CONNECT's refusals are the policy's reasons (a `tunnel_refused` verdict); plain HTTP's own are not.
    @Test func onlyPolicyCausesCarryAVerdictReason() {
        #expect(AdmissionCause.destinationDenied(.ip(IPAddress("10.0.0.1")!), entry: "x").policyReason == .destinationProhibited)
        #expect(AdmissionCause.portNotAllowed(.connect, 22, allowed: [443]).policyReason == .portNotAllowed)
        #expect(AdmissionCause.portNotAllowed(.plain, 22, allowed: [80]).policyReason == nil)
        #expect(AdmissionCause.plainHTTPRefused.policyReason == nil)
    }

    /// Every spelling of a denied address, and allow lists that do not see through an embedding
    /// (moved here from the policy's own `admit`, which this gate replaced).
    static let embeddings = try! PolicyLoader.load(yaml: """
        version: 1
        proxy: { allowed_ports: [443, 8443], allow_clients: ["127.0.0.0/8", "10.1.0.0/16"], deny_destinations: [loopback, private] }
        defaults: { unpinned: deny }
        rules:
          - host: api.test
            pins: ["\(pin)"]
          - host: "**.free.test"
            mode: unpinned
        """, source: "test.yaml", pinFiles: nil)

    @Test(arguments: [
        ("api.test:443", "127.0.0.1", nil),
        ("api.test:443", "10.1.2.3", nil),
        ("api.test:443", "10.2.0.1", RefusalReason.clientNotAllowed),
        ("api.test:22", "127.0.0.1", .portNotAllowed),
        ("10.0.0.1:443", "127.0.0.1", .destinationProhibited),
        ("[::ffff:127.0.0.1]:443", "127.0.0.1", .destinationProhibited),
        ("[::1]:443", "127.0.0.1", .destinationProhibited),
        ("[::127.0.0.1]:443", "127.0.0.1", .destinationProhibited),
        ("[64:ff9b::a00:1]:443", "127.0.0.1", .destinationProhibited),
        ("[64:ff9b:1::7f00:1]:443", "127.0.0.1", .destinationProhibited),
        ("[2001:db8::a00:1]:443", "127.0.0.1", .unpinnedDenied),
        ("api.test:443", "64:ff9b::7f00:1", .clientNotAllowed),  // allow lists do not see through
        ("other.test:443", "127.0.0.1", .unpinnedDenied),
    ])
    func aConnectFromThisClientIsRefusedFor(target: String, client: String, reason: RefusalReason?) {
        let outcome = admit(target, client: client, .connect, policy: Self.embeddings)
        if let reason {
            #expect(outcome.refusal?.code == .policy(reason))
        } else {
            #expect(outcome == .probe(Self.embeddings.rules[0]))
        }
    }

    @Test func anUnpinnedRuleAdmitsWithoutAProbe() {
        #expect(admit("a.free.test:443", .connect, policy: Self.embeddings) == .unpinned(.ruleUnpinned, rule: Self.embeddings.rules[1]))
    }

    @Test func theAcceptRefusesAClientOutsideAllowClients() {
        #expect(AdmissionGate.refusesClient(IPAddress("10.1.9.9")!, policy: Self.deny) == nil)
        #expect(AdmissionGate.refusesClient(IPAddress("192.0.2.1")!, policy: Self.deny) == .clientNotAllowed(IPAddress("192.0.2.1")!))
    }
}

@Suite struct DestinationFilterTests {
    static let deny = AddressSet.parse(["loopback", "10.0.0.0/8"])!

    func filter(own: String? = nil) -> DestinationFilter {
        DestinationFilter(deny: Self.deny) { $0.description == own }
    }

    func addresses(_ texts: [String]) -> [IPAddress] { texts.map { IPAddress($0)! } }
    let authority = try! Authority.parse("app.test:8080").get()

    @Test func deniedAddressesAreDroppedInEverySpelling() {
        let all = addresses(["10.0.0.1", "::ffff:127.0.0.1", "64:ff9b::a00:2", "192.0.2.1", "2001:db8::1"])
        #expect(filter().filter(all, for: authority) == .reach(addresses(["192.0.2.1", "2001:db8::1"])))
    }

    @Test func onlyDeniedAddressesRefuseNamingEachEntry() {
        let outcome = filter().filter(addresses(["10.0.0.1", "::ffff:127.0.0.1"]), for: authority)
        guard case .refused(let cause) = outcome else { Issue.record("\(outcome)"); return }
        #expect(cause.refusal.reason == "destination_ip_prohibited")
        #expect(cause.refusal.detail == "app.test resolved only to denied destinations: 10.0.0.1 (10.0.0.0/8), ::ffff:127.0.0.1 (loopback)")
    }

    @Test func pinproxysOwnAddressIsALoop() {
        let outcome = filter(own: "192.0.2.1:8080").filter(addresses(["192.0.2.9", "192.0.2.1"]), for: authority)
        guard case .refused(let cause) = outcome else { Issue.record("\(outcome)"); return }
        #expect(cause == .loop(authority, SocketAddress.parse("192.0.2.1:8080")!))
        #expect(cause.refusal.reason == "proxy_loop_detected")
        #expect(cause.refusal.detail == "app.test:8080 is pinproxy's own listening address 192.0.2.1:8080")
        // The same address on another port is not pinproxy.
        #expect(filter(own: "192.0.2.1:3128").filter(addresses(["192.0.2.1"]), for: authority) == .reach(addresses(["192.0.2.1"])))
    }

    @Test func dnsFailuresHaveOneText() {
        #expect(Resolver.Failure.notFound("NXDOMAIN").detail(resolving: "a.test") == "a.test did not resolve: NXDOMAIN")
        #expect(Resolver.Failure.failed("SERVFAIL").detail(resolving: "a.test") == "resolving a.test failed: SERVFAIL")
    }
}

/// A reload's second look at an open tunnel, without sockets: on the chain it was judged on.
@Suite struct RejudgeTests {
    static let leafEC = "spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="
    static let rogueLeaf = "spki-sha256:GpJMWznZg/+avOl3K8cJqwDXioJFfLZdlJTvnCoJ960="

    static func snapshot(pin: String? = leafEC, mode: String = "enforce", ports: String = "[443]", deny: String = "[link-local]") -> PolicySnapshot {
        let rule = pin.map { "rules:\n  - host: api.pinproxy.test\n    mode: \(mode)\n    pins: [\"\($0)\"]\n" } ?? ""
        let yaml = """
            version: 1
            proxy: { allowed_ports: \(ports), deny_destinations: \(deny), dns: { nameservers: [], hosts_file: none } }
            defaults: { unpinned: allow, require_backup: off, trust: "ca-file:\(Paths.fixture("both-roots.pem"))" }

            """ + rule
        let policy = try! PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil)
        return try! PolicySnapshot(policy: policy, systemStore: TrustStore.system())
    }

    static let chain: [[UInt8]] = try! Certificate.load(file: Paths.fixture("leaf-ec256.chain.pem")).map(\.der)
    let authority = try! Authority.parse("api.pinproxy.test:443").get()
    let client = IPAddress("127.0.0.1")!

    func rejudge(_ snapshot: PolicySnapshot, address: String? = "127.0.0.5", chain: [[UInt8]]? = chain) -> ReloadVerdict {
        snapshot.rejudge(authority, client: client, address: address.map { IPAddress($0)! }, chain: chain, at: Date(), debugBypassEnabled: false)
    }

    @Test func theSameChainUnderTheSamePinsStands() {
        #expect(rejudge(Self.snapshot()) == .stands)
        #expect(rejudge(Self.snapshot(pin: nil), chain: nil) == .stands)  // unpinned, and still unpinned
    }

    @Test func aPinRemovedClosesWithTheChainsReason() {
        let verdict = rejudge(Self.snapshot(pin: Self.rogueLeaf))
        #expect(verdict == .closes(.chainRefused(.pinMismatch, failure: nil)))
        guard case .closes(let cause) = verdict else { return }
        #expect(cause.code == "pin_mismatch" && cause.detail == "the reloaded policy refuses the tunnel's chain: pin_mismatch")
        // Report mode tunnels on: would-refuse is not a refusal.
        #expect(rejudge(Self.snapshot(pin: Self.rogueLeaf, mode: "report")) == .stands)
    }

    @Test func aTunnelOpenedUnpinnedThatIsNowPinnedHasNoChain() {
        let verdict = rejudge(Self.snapshot(), chain: nil)
        #expect(verdict == .closes(.pinnedWithoutChain(authority.target, ruleLine: 5)))
        guard case .closes(let cause) = verdict else { return }
        #expect(cause.code == "unverified_chain")
        #expect(cause.detail == "the reloaded policy pins api.pinproxy.test (rule at line 5); this tunnel was opened unpinned, with no chain to judge")
        #expect(rejudge(Self.snapshot(), chain: []) == verdict)
    }

    @Test func aChainThatNoLongerParsesIsUnverified() {
        let verdict = rejudge(Self.snapshot(), chain: [Self.chain[0], [0x30, 0x03, 0x02, 0x01]])
        #expect(verdict == .closes(.chainUnparsable))
        #expect(ReloadCause.chainUnparsable.code == "unverified_chain")
        #expect(ReloadCause.chainUnparsable.detail == "a certificate of the tunnel's chain no longer parses")
    }

    @Test func theAdmissionRefusesBeforeAnyChain() {
        let verdict = rejudge(Self.snapshot(ports: "[8443]"))
        guard case .closes(let cause) = verdict else { Issue.record("\(verdict)"); return }
        #expect(cause.code == "port_not_allowed")
        #expect(cause.detail == "the reloaded policy refuses this CONNECT before any chain is looked at")
    }

    @Test func theTunnelsAddressNowDenied() {
        let verdict = rejudge(Self.snapshot(deny: "[loopback]"))
        #expect(verdict == .closes(.addressDenied(IPAddress("127.0.0.5")!)))
        guard case .closes(let cause) = verdict else { return }
        #expect(cause.code == "destination_ip_prohibited" && cause.detail == "the tunnel's address 127.0.0.5 is in the reloaded deny_destinations")
        // Through a parent proxy the session passes no address: the target alone is judged.
        #expect(rejudge(Self.snapshot(deny: "[loopback]"), address: nil) == .stands)
    }
}
