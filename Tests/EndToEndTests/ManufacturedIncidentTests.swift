import Foundation
import Testing
import TestSupport

/// Incidents manufactured by a local client against a GENUINE server. pinproxy's mirror copies the
/// client's own ClientHello, and the TLS 1.2 stream check reads the chain the server shows that
/// hello: a client that asks an honest server for something the pins do not cover (a suite it
/// refuses, an ALPN it refuses, its other certificate, another virtual host, its ACME challenge
/// certificate) makes that chain fail the pins, or the flight fail, with no interceptor anywhere.
/// That is a refusal of the attacker's own tunnel at most, never an `interception_suspected` and
/// never a quarantine that refuses every other client's TLS 1.3 tunnels to the host.
///
/// Each attack test: one proxy pinning the genuine server's key (names reach 127.0.0.1 only through
/// the policy's `resolve:` map), the attacker's hello sent `attempts` times (openssl s_client
/// through the proxy, one after another), then: no `interception_suspected` line, no `quarantined`
/// refusal, each attacker tunnel's end line a pass or a refusal that is not `quarantined`, and an
/// honest client (curl, TLS 1.3, no key log) still gets the body, `honestRuns` times, each tunnel
/// verified by its mirror.
///
/// The last test keeps the other side: an interceptor that answers look-alike copies of one hello
/// differently (the same hello, two looks, two chains) is still caught and quarantines the host.
@Suite(.serialized) struct ManufacturedIncidentTests {
    static let host = "api.pinproxy.test"
    static let attempts = 24
    static let honestRuns = 3
    /// `leaf-ip` (IP SAN 127.0.0.1) of Fixtures/expected-pins.txt.
    static let leafIP = "spki-sha256:j/cBctevzPRTre++KPYReNKd83kuTdZ9mqW9EtXbTig="
    static let pinnedEC = apiRule(pinsLine(Pins.leafEC))

    // MARK: servers and clients

    /// scripts/vhost_server.py: a genuine server whose answer an ordinary hello selects.
    final class VhostServer {
        let helper: Helper
        let logPath: String
        var port: UInt16 { helper.port }

        init(_ arguments: [String]) throws {
            logPath = try temporaryDirectory() + "/vhost.jsonl"
            helper = try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/vhost_server.py", "--name", "genuine", "--log", logPath] + arguments)
        }

        /// What the server did for each connection so far (`default`, `vhost:NAME`, `acme`, `alert`, `dropped`).
        var served: [String] {
            let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
            return text.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["served"] as? String
            }
        }

        func stop() { helper.stop() }

        deinit {
            helper.stop()
            try? FileManager.default.removeItem(atPath: (logPath as NSString).deletingLastPathComponent)
        }
    }

    static func pair(_ leaf: String) -> String { "\(Paths.fixture("\(leaf).chain.pem")):\(Paths.fixture("\(leaf).key.pem"))" }

    /// The attacker: `openssl s_client` through pinproxy (`-proxy` speaks CONNECT to `connect`),
    /// with its own hello options; a GET if the handshake completes. Its output.
    static func sClient(proxy: UInt16, connect: String, _ options: [String]) throws -> String {
        let args = ["s_client", "-proxy", "127.0.0.1:\(proxy)", "-connect", connect, "-CAfile", Paths.fixture("both-roots.pem"), "-ign_eof"] + options
        let command = "printf 'GET / HTTP/1.1\\r\\nHost: x\\r\\nConnection: close\\r\\n\\r\\n' | openssl " + args.map { "'\($0)'" }.joined(separator: " ")
        let r = try run("/bin/sh", ["-c", command], timeout: 20)
        return r.stdout + r.stderr
    }

    /// Every tunnel's last line, in the order written.
    static func ends(_ proxy: ProxyProcess) -> [[String: String]] {
        proxy.lines.filter { $0["event"] == "tunnel_closed" || $0["event"] == "tunnel_refused" }
    }

    /// The incident lines, shortened to what says what was caught (for the failure messages).
    static func incidentLines(_ proxy: ProxyProcess) -> [String] {
        let keys = ["event", "host", "port", "stage", "reason", "detail", "tls", "chain.0.spki", "chain.0.subject", "probe_chain.0.spki", "quarantined_until"]
        return proxy.events("interception_suspected").map { line in
            keys.compactMap { key in line[key].map { "\(key)=\($0.contains(" ") ? "\"\($0)\"" : $0)" } }.joined(separator: " ")
        }
    }

    /// Each kind of end line (`event/stage/reason`) and how many tunnels had it.
    static func tally(_ ends: [[String: String]]) -> [String] {
        Dictionary(grouping: ends) { "\($0["event"] ?? "?")/\($0["stage"] ?? "-")/\($0["reason"] ?? "-")" }
            .map { "\($0.key) ×\($0.value.count)" }.sorted()
    }

    /// Runs the attacker `count` times, one after another, and returns its tunnels' end lines
    /// (waiting, bounded, for all of them).
    static func attack(_ proxy: ProxyProcess, count: Int = attempts, _ client: () throws -> String) throws -> [[String: String]] {
        let before = ends(proxy).count
        for _ in 1...count { _ = try client() }
        let deadline = Date().addingTimeInterval(30)
        var seen = ends(proxy)
        while seen.count < before + count && Date() < deadline {
            usleep(20_000)
            seen = ends(proxy)
        }
        return Array(seen.dropFirst(before))
    }

    // MARK: what must hold

    /// No incident and no quarantine after the attack; each attacker tunnel passed or was refused
    /// for a reason of its own; then the honest client gets the body `honestRuns` times, each
    /// tunnel verified by its mirror (TLS 1.3, no key log).
    static func expectNoIncident(_ proxy: ProxyProcess, attacker: [[String: String]], honest: () throws -> CurlResult,
                                 sourceLocation: SourceLocation = #_sourceLocation) throws {
        #expect(attacker.count == attempts, "\(attacker.count) end lines for \(attempts) attacker tunnels", sourceLocation: sourceLocation)
        // Passed, or refused for a reason of its own: never `quarantined`.
        let endedBadly = attacker.filter { !($0["event"] == "tunnel_closed" || ($0["event"] == "tunnel_refused" && $0["reason"] != nil && $0["reason"] != "quarantined")) }.count
        #expect(endedBadly == 0, "the attacker's tunnels: \(tally(attacker))", sourceLocation: sourceLocation)
        let before = ends(proxy).count
        var bodies: [String] = []
        for _ in 1...honestRuns { bodies.append(try honest().body) }
        let deadline = Date().addingTimeInterval(20)
        while ends(proxy).count < before + honestRuns && Date() < deadline { usleep(20_000) }
        let honestEnds = Array(ends(proxy).dropFirst(before))
        #expect(bodies == Array(repeating: "hello from genuine\n", count: honestRuns),
                "honest client: \(bodies); its tunnels: \(tally(honestEnds))", sourceLocation: sourceLocation)
        #expect(honestEnds.count == honestRuns && honestEnds.allSatisfy { $0["event"] == "tunnel_closed" && $0["verify"] == "probe+mirror" && $0["tls"] == "TLSv1.3" },
                "\(tally(honestEnds))", sourceLocation: sourceLocation)
        #expect(incidentLines(proxy).isEmpty, "incident: \(incidentLines(proxy)); the attacker's tunnels: \(tally(attacker))", sourceLocation: sourceLocation)
        let quarantined = proxy.events("tunnel_refused").filter { $0["reason"] == "quarantined" }.count
        #expect(quarantined == 0, "tunnels refused quarantined, the attacker's and the honest client's", sourceLocation: sourceLocation)
    }

    /// curl, TLS 1.3, no key log: the ordinary client of everyone else on the machine.
    static func honestCurl(_ proxy: ProxyProcess, host: String = host, port: UInt16) -> () throws -> CurlResult {
        { try curl(proxy: proxy.port, host: host, port: port, extra: ["--tlsv1.3"]) }
    }

    // MARK: 1. A suite the server refuses

    /// Only TLS_AES_128_CCM_8_SHA256 offered: the genuine server (OpenSSL's default TLS 1.3 suites)
    /// answers the hello, and its mirror, with a handshake_failure alert.
    /// Before the incident rule (a same-hello disagreement): `interception_suspected stage=mirror reason=mirror_invalid detail="mirror: malformed
    /// TLS: alert fatal handshake_failure(40)"` and a quarantine; the attacker's 24 tunnels end
    /// `tunnel_refused stage=stream reason=tls_protocol_error` (the client's own alert), the honest
    /// client's 3 `tunnel_refused stage=stream reason=quarantined`.
    @Test func aSuiteTheServerRefusesQuarantinesNothing() throws {
        let server = try Upstream("leaf-ec256", name: "genuine", tls: "any")
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.pinnedEC))
        let attacker = try Self.attack(proxy) {
            try Self.sClient(proxy: proxy.port, connect: "\(Self.host):\(server.port)",
                             ["-servername", Self.host, "-tls1_3", "-ciphersuites", "TLS_AES_128_CCM_8_SHA256"])
        }
        try Self.expectNoIncident(proxy, attacker: attacker, honest: Self.honestCurl(proxy, port: server.port))
    }

    // MARK: 2. An ALPN the server refuses

    /// An ALPN the server does not speak, to a server that refuses it with `no_application_protocol`
    /// (RFC 7301 §3.2; OpenSSL's s_server -alpn, nginx, Go and node do).
    /// Before the incident rule (a same-hello disagreement): `interception_suspected stage=mirror reason=mirror_invalid detail="mirror: malformed
    /// TLS: alert fatal no_application_protocol(120)"` and a quarantine; the attacker's tunnels end
    /// `stage=stream reason=tls_protocol_error`, the honest client's `reason=quarantined`.
    @Test func anALPNTheServerRefusesQuarantinesNothing() throws {
        let server = try VhostServer(["--cert", Self.pair("leaf-ec256"), "--alpn", "http/1.1"])
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.pinnedEC))
        let attacker = try Self.attack(proxy) {
            try Self.sClient(proxy: proxy.port, connect: "\(Self.host):\(server.port)", ["-servername", Self.host, "-alpn", "pinproxy-unknown/1"])
        }
        #expect(server.served.contains("alert"), "\(server.served)")
        try Self.expectNoIncident(proxy, attacker: attacker, honest: Self.honestCurl(proxy, port: server.port))
    }

    // MARK: 3. The other certificate of a dual-certificate server

    /// A server with an ECDSA and an RSA certificate (one context, OpenSSL picks by the client's
    /// signature algorithms), the ECDSA key pinned; the attacker offers RSA signature algorithms only.
    static func dualCertificateServer() throws -> VhostServer {
        try VhostServer(["--cert", pair("leaf-ec256"), "--cert", pair("leaf-rsa2048")])
    }

    /// TLS 1.3: the mirror is shown the RSA chain.
    /// Before the incident rule (a same-hello disagreement): `interception_suspected stage=mirror reason=pin_mismatch` (chain.0.spki the RSA key,
    /// probe_chain.0.spki the pinned ECDSA one) and a quarantine; the attacker's tunnels end
    /// `stage=mirror reason=pin_mismatch` (a few) or `stage=stream reason=quarantined` (the rest,
    /// whichever the tunnel's answer met first), the honest client's `reason=quarantined`.
    @Test func theRSACertificateOfADualCertificateServerOnTLS13QuarantinesNothing() throws {
        let server = try Self.dualCertificateServer()
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.pinnedEC))
        let attacker = try Self.attack(proxy) {
            try Self.sClient(proxy: proxy.port, connect: "\(Self.host):\(server.port)",
                             ["-servername", Self.host, "-tls1_3", "-sigalgs", "rsa_pss_rsae_sha256:rsa_pss_rsae_sha384:rsa_pss_rsae_sha512"])
        }
        try Self.expectNoIncident(proxy, attacker: attacker, honest: Self.honestCurl(proxy, port: server.port))
    }

    /// TLS 1.2: the stream check reads the RSA chain in the clear.
    /// Before the incident rule (a same-hello disagreement): `interception_suspected stage=stream reason=pin_mismatch` (chain.0.spki the RSA key;
    /// its `tls=TLSv1.3` is the probe's) and a quarantine; the attacker's TLS 1.2 tunnels end
    /// `stage=stream reason=pin_mismatch` (verified on their own, never quarantined), the honest
    /// client's TLS 1.3 ones `reason=quarantined`.
    @Test func theRSACertificateOfADualCertificateServerOnTLS12QuarantinesNothing() throws {
        let server = try Self.dualCertificateServer()
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.pinnedEC))
        let attacker = try Self.attack(proxy) {
            try Self.sClient(proxy: proxy.port, connect: "\(Self.host):\(server.port)",
                             ["-servername", Self.host, "-tls1_2", "-sigalgs", "RSA+SHA256:RSA+SHA384:RSA-PSS+SHA256"])
        }
        try Self.expectNoIncident(proxy, attacker: attacker, honest: Self.honestCurl(proxy, port: server.port))
        // The TLS 1.2 hello (no key_share) was sent again by a confirming look, and shown the RSA
        // certificate again, in clear: the server's own answer to it.
        let confirmed = proxy.events("confirming_look")
        #expect(!confirmed.isEmpty && confirmed.allSatisfy { $0["outcome"] == "same_chain" && $0["stage"] == "stream" }, "\(confirmed)")
    }

    // MARK: 4. Another virtual host under an ip: rule

    /// `ip: 127.0.0.1` pins the server's default certificate (leaf-ip); the attacker CONNECTs to the
    /// address and names another of the server's virtual hosts (other.pinproxy.test, held by no
    /// rule) in its SNI. Before the incident rule (a same-hello disagreement): `interception_suspected host=127.0.0.1 stage=mirror
    /// reason=hostname_mismatch detail="… IP address mismatch"` (chain.0.spki leaf-other-name's)
    /// and a quarantine; the attacker's tunnels end `stage=mirror reason=hostname_mismatch` or
    /// `stage=stream reason=quarantined`, the honest client's `reason=quarantined`.
    @Test func anotherVirtualHostUnderAnIPRuleQuarantinesNothing() throws {
        let server = try VhostServer(["--cert", Self.pair("leaf-ip"), "--vhost", "other.pinproxy.test=\(Self.pair("leaf-other-name"))"])
        defer { server.stop() }
        let rules = "rules:\n  - ip: 127.0.0.1\n    pins: [\"\(Self.leafIP)\"]"
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: rules))
        let attacker = try Self.attack(proxy) {
            try Self.sClient(proxy: proxy.port, connect: "127.0.0.1:\(server.port)", ["-servername", "other.pinproxy.test", "-tls1_3"])
        }
        #expect(server.served.contains("vhost:other.pinproxy.test"), "\(server.served)")
        try Self.expectNoIncident(proxy, attacker: attacker, honest: Self.honestCurl(proxy, host: "127.0.0.1", port: server.port))
    }

    // MARK: 5. The pinned name in upper case

    /// SNI `API.PINPROXY.TEST` (pinproxy's names are case-insensitive, so the SNI check passes) to
    /// a server that matches virtual-host names exactly: the hello lands on its default host
    /// (other.pinproxy.test). Before the incident rule (a same-hello disagreement): `interception_suspected stage=mirror reason=hostname_mismatch`
    /// (chain.0.spki leaf-other-name's) and a quarantine; the attacker's tunnels end
    /// `stage=mirror reason=hostname_mismatch` or `stage=stream reason=quarantined`, the honest
    /// client's `reason=quarantined`.
    @Test func thePinnedNameInUpperCaseQuarantinesNothing() throws {
        let server = try VhostServer(["--cert", Self.pair("leaf-other-name"), "--vhost", "\(Self.host)=\(Self.pair("leaf-ec256"))"])
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.pinnedEC))
        let attacker = try Self.attack(proxy) {
            try Self.sClient(proxy: proxy.port, connect: "\(Self.host):\(server.port)", ["-servername", Self.host.uppercased(), "-tls1_3"])
        }
        #expect(server.served.contains("default"), "\(server.served)")
        try Self.expectNoIncident(proxy, attacker: attacker, honest: Self.honestCurl(proxy, port: server.port))
    }

    // MARK: 6. The ACME challenge certificate

    /// ALPN `acme-tls/1` (RFC 8737): the server answers it with its self-signed challenge
    /// certificate. Before the incident rule (a same-hello disagreement): `interception_suspected stage=mirror reason=chain_invalid
    /// detail="… self-signed certificate"` and a quarantine; the attacker's tunnels end
    /// `stage=mirror reason=chain_invalid` or `stage=stream reason=quarantined`, the honest
    /// client's `reason=quarantined`.
    @Test func theACMEChallengeCertificateQuarantinesNothing() throws {
        let server = try VhostServer(["--cert", Self.pair("leaf-ec256"), "--acme", "\(Paths.fixture("self-signed.pem")):\(Paths.fixture("self-signed.key.pem"))",
                                      "--alpn", "http/1.1"])
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.pinnedEC))
        let attacker = try Self.attack(proxy) {
            try Self.sClient(proxy: proxy.port, connect: "\(Self.host):\(server.port)", ["-servername", Self.host, "-tls1_3", "-alpn", "acme-tls/1"])
        }
        #expect(server.served.contains("acme"), "\(server.served)")
        try Self.expectNoIncident(proxy, attacker: attacker, honest: Self.honestCurl(proxy, port: server.port))
    }

    // MARK: 7. A warm cache and a server key change

    /// The server's key changes (restarted on its port with leaf-rotated, a CA-valid key the pins do
    /// not hold yet) while the probe's chain is cached: every tunnel is refused `pin_mismatch`
    /// (the first by its mirror, on the cached probe's word; later ones by the mirror or the probe),
    /// and no incident; once the pinned key is back, tunnels pass at once (no quarantine).
    /// Before the incident rule (a same-hello disagreement): the refusals are as said (`stage=mirror`, then 5 by the probe, no stage), but the first
    /// is also `interception_suspected stage=mirror reason=pin_mismatch` (chain.0.spki leaf-rotated's)
    /// with a quarantine: the pinned key back, the tunnels are refused `quarantined`.
    @Test func aServerKeyChangeUnderAWarmCacheQuarantinesNothing() throws {
        var server = try Upstream("leaf-ec256", name: "genuine", tls: "any")
        let port = server.port
        // One worker: one probe cache, so the first CONNECT after the change rests on it.
        let proxy = try ProxyProcess(config: policy(ports: [port], rules: Self.pinnedEC, proxy: "workers: 1"))
        #expect(try Self.honestCurl(proxy, port: port)().body == "hello from genuine\n")
        #expect(proxy.events("tunnel_closed", count: 1).first?["verify"] == "probe+mirror")
        server.stop()
        server = try Upstream("leaf-rotated", name: "rotated", tls: "any", port: port)
        let changed = 6
        let refused = try Self.attack(proxy, count: changed) { try Self.honestCurl(proxy, port: port)().body }
        #expect(refused.count == changed && refused.allSatisfy { $0["event"] == "tunnel_refused" && $0["reason"] == "pin_mismatch" && $0["chain.0.spki"] == Pins.leafRotated },
                "\(Self.tally(refused))")
        #expect(refused.first?["stage"] == "mirror", "the first CONNECT after the change rests on the cached probe: \(refused.first ?? [:])")
        #expect(Self.incidentLines(proxy).isEmpty, "incident: \(Self.incidentLines(proxy))")
        server.stop()
        server = try Upstream("leaf-ec256", name: "genuine", tls: "any", port: port)
        defer { server.stop() }
        let before = Self.ends(proxy).count
        var bodies: [String] = []
        for _ in 1...Self.honestRuns { bodies.append(try Self.honestCurl(proxy, port: port)().body) }
        let deadline = Date().addingTimeInterval(20)
        while Self.ends(proxy).count < before + Self.honestRuns && Date() < deadline { usleep(20_000) }
        let back = Array(Self.ends(proxy).dropFirst(before))
        #expect(bodies == Array(repeating: "hello from genuine\n", count: Self.honestRuns), "\(bodies); \(Self.tally(back))")
        #expect(back.count == Self.honestRuns && back.allSatisfy { $0["event"] == "tunnel_closed" && $0["verify"] == "probe+mirror" }, "\(Self.tally(back))")
        #expect(proxy.events("tunnel_refused").filter { $0["reason"] == "quarantined" }.count == 0, "\(Self.tally(Self.ends(proxy)))")
        #expect(Self.incidentLines(proxy).isEmpty, "incident: \(Self.incidentLines(proxy))")
    }

    // MARK: 8. Still caught: one hello, two looks, two chains

    /// An interceptor that sends every second connection to a rogue server (rogue-leaf, trusted by
    /// the proxy's CA file as after a CA compromise) and the others to the genuine one, with
    /// `mirror_checks: 2` and no probe cache (`verify_cache_ttl: 0s`, so every attempt is exactly
    /// four connections: the probe, an odd one, goes to the genuine server; of the three look-alike
    /// copies of the client's hello that follow, the 1st and 3rd to the rogue server, the 2nd to
    /// the genuine one). Whichever of the three is the client's, a mirror is shown the rogue chain,
    /// so every tunnel is refused and no client ever gets the rogue body; when the client's is a
    /// rogue one (2 in 3 tunnels, at random) the two mirrors are shown two chains for one hello,
    /// which no genuine server does; when it is the genuine one, both mirrors see the rogue chain and
    /// the confirming look (a fifth connection, genuine) sees the pinned one. Either way
    /// `interception_suspected` on the first attempt, and the host:port quarantined (the genuine
    /// server alone on the port is then refused `quarantined` to a TLS 1.3 client without a key log).
    @Test func anInterceptorThatAnswersOneHelloWithTwoChainsIsCaughtAndQuarantined() throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        defer { genuine.stop() }
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.3")
        defer { rogue.stop() }
        var interceptor: Interceptor? = try Interceptor(genuine: genuine.port, rogue: rogue.port, strategy: .every(2))
        let port = try #require(interceptor?.port)
        let rules = apiRule("    quarantine: 1h\n" + pinsLine(Pins.leafEC) + "\n    mirror_checks: 2")
        let proxy = try ProxyProcess(config: policy(ports: [port], rules: rules, proxy: "verify_cache_ttl: 0s"))
        let tries = 10
        var bodies: [String] = []
        for attempt in 1...tries {
            bodies.append(try curl(proxy: proxy.port, host: Self.host, port: port).body)
            let deadline = Date().addingTimeInterval(20)
            while Self.ends(proxy).count < attempt && Date() < deadline { usleep(20_000) }
            #expect(Self.ends(proxy).count == attempt, "attempt \(attempt): \(Self.ends(proxy))")
            // The catch's line may trail the tunnel's refusal.
            if proxy.waitFor("interception_suspected", timeout: 3) != nil { break }
        }
        let attempts = bodies.count
        let attackEnds = Self.ends(proxy)
        #expect(!bodies.contains { $0.contains("rogue") }, "\(bodies)")
        #expect(attackEnds.count == attempts && attackEnds.allSatisfy {
            $0["event"] == "tunnel_refused" && $0["stage"] == "mirror" && $0["reason"] == "pin_mismatch" && $0["chain.0.spki"] == Pins.rogueLeaf
        }, "\(attackEnds)")
        // The interceptor's own account: per attempt the probe (genuine), then one hello's three
        // copies, answered rogue, genuine, rogue. (What makes this test deterministic: should
        // pinproxy make another number of connections per CONNECT, the pattern shifts.)
        // When the client's copy was the genuine one, both mirrors were shown the rogue chain: the
        // tunnel is refused and pinproxy sends the hello once more (the confirming look, the 5th
        // connection, genuine), whose passing chain is the proof.
        let confirmed = proxy.events("interception_suspected").first?["detail"]?.contains("a second copy of the same ClientHello") == true
        let expected = 4 * attempts + (confirmed ? 1 : 0)
        let entries = interceptor?.waitForEntries(expected) ?? []
        let pattern = Array(repeating: [Interceptor.Entry.Decision.genuine, .rogue, .genuine, .rogue], count: attempts).flatMap { $0 } + (confirmed ? [.genuine] : [])
        #expect(entries.count == expected && entries.map(\.decision) == pattern,
                "not four connections per attempt (probe, tunnel, 2 mirrors) and the confirming look: \(entries.map { "\($0.index):\($0.decision.rawValue):\($0.shape ?? "-")" })")
        if confirmed, entries.count == expected { #expect(entries[expected - 1].shape == entries[expected - 2].shape) }
        for group in stride(from: 0, to: 4 * attempts - 3, by: 4) where group + 3 < entries.count {
            #expect(Set(entries[(group + 1)...(group + 3)].map(\.shape)).count == 1 && entries[group].shape != entries[group + 1].shape,
                    "\(entries.map { "\($0.index):\($0.decision.rawValue):\($0.shape ?? "-")" })")
        }
        let caught = proxy.events("interception_suspected")
        #expect(caught.count == 1, "\(Self.incidentLines(proxy))")
        if let line = caught.first {
            #expect(line["stage"] == "mirror" && line["chain.0.spki"] == Pins.rogueLeaf && line["probe_chain.0.spki"] == Pins.leafEC
                    && line["quarantined_until"] != nil && line["host"] == Self.host && line["port"] == String(port), "\(line)")
        }

        // The interceptor goes; the genuine server alone on its port: quarantined all the same.
        interceptor?.stop()
        interceptor = nil
        let back = try Upstream("leaf-ec256", name: "back", tls: "1.3", port: port)
        defer { back.stop() }
        let after = try curl(proxy: proxy.port, host: Self.host, port: port)
        #expect(after.body.isEmpty && after.connectStatus == 200, "\(after)")
        let refused = proxy.waitFor("tunnel_refused") { $0["reason"] == "quarantined" }
        #expect(refused?["host"] == Self.host && refused?["tls"] == "TLSv1.3", "\(String(describing: refused)); \(Self.ends(proxy).last ?? [:])")
    }
}
