import Foundation
import PinPolicy
import Testing
import TestSupport

/// Certificate Transparency end to end (issue 19): real TLS servers on loopback serving the test
/// PKI's leaves (CTFixtures: SCTs made the real way by test logs of two operators), real clients
/// through the real proxy, each outcome asserted exactly: the CONNECT's status and Proxy-Status,
/// the decision line's event, reason, `ct=`, `ct_scts` and detail.
@Suite(.serialized) struct CTTests {
    let ct: CTFixtures
    init() throws { ct = try CTFixtures.made() }

    func serve(_ leaf: String, tls: String = "any") throws -> Upstream {
        try Upstream(chainPath: ct.chain(leaf), keyPath: ct.key(leaf), name: leaf, tls: tls)
    }

    func get(_ proxy: ProxyProcess, _ leaf: String, port: UInt16, environment: [String: String] = [:]) throws -> CurlResult {
        try curl(proxy: proxy.port, host: ct.host(leaf), port: port, cacert: ct.roots, environment: environment)
    }

    /// `ct_scts` for these logs' SCTs (made a day before the fixtures), delivered so.
    func scts(_ logs: [String], _ delivery: String) throws -> String {
        let time = try CTExpectations(ct).sctTime
        return logs.map { "\(CTExpectations.description($0)) (\(CTExpectations.operatorName($0))) \(time) \(delivery)" }.joined(separator: "; ")
    }

    // MARK: compliant chains

    /// Two SCTs from two operators for a certificate valid 90 days, three for one valid 398 days: the
    /// tunnel opens for an unpinned host under `defaults: ct: require`, and the client's own chain is
    /// checked again (stream on TLS 1.2, mirror on TLS 1.3).
    @Test(arguments: [("two-operators", ["a1", "b1"]), ("three-long", ["a1", "a2", "b1"]), ("interception-logged", ["a1", "b1"])],
          [("1.2", "probe+stream"), ("1.3", "probe+mirror")])
    func compliantChainsTunnel(leaf: (String, [String]), tls: (String, String)) throws {
        let server = try serve(leaf.0, tls: tls.0)
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port]))
        let result = try get(proxy, leaf.0, port: server.port)
        #expect(result.exitCode == 0 && result.body == "hello from \(leaf.0)\n", "\(result.stderr)")
        let line = try #require(proxy.waitFor("tunnel_unpinned"), "\(proxy.log)")
        #expect(line["ct"] == "compliant" && line["host"] == ct.host(leaf.0), "\(line)")
        try #expect(line["ct_scts"] == (try scts(leaf.1, "embedded")), "\(line)")
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(closed["verify"] == tls.1 && closed["tls"] == "TLSv\(tls.0)", "\(closed)")
        #expect(proxy.events("tunnel_refused").isEmpty)
    }

    /// A server that sends only its leaf (its issuer is the root, which servers leave out): the chain
    /// verifies with the root from the trust store, and the embedded SCTs verify with that root's
    /// key as their issuer, as a browser judges them on the chain it built.
    @Test(arguments: ["1.2", "1.3"])
    func aLeafSentAloneIsJudgedWithTheIssuerTheChainWasVerifiedWith(tls: String) throws {
        let server = try Upstream(chainPath: ct.certificate("two-operators"), keyPath: ct.key("two-operators"), name: "two-operators", tls: tls)
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port]))
        let result = try get(proxy, "two-operators", port: server.port)
        #expect(result.exitCode == 0 && result.body == "hello from two-operators\n", "\(result.stderr) \(proxy.log)")
        let line = try #require(proxy.waitFor("tunnel_unpinned"), "\(proxy.log)")
        try #expect(line["ct"] == "compliant" && line["ct_scts"] == (try scts(["a1", "b1"], "embedded")), "\(line)")
    }

    /// TLS 1.3 with the client's key log: the tunnel's own chain is read and judged (verify=probe+keylog).
    @Test func aCompliantChainReadWithTheKeyLog() throws {
        let path = try memoryDirectory() + "/keylog"
        let server = try serve("two-operators", tls: "1.3")
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], proxy: "  keylog: { path: \(path), wait: 2s }"))
        let result = try get(proxy, "two-operators", port: server.port, environment: ["SSLKEYLOGFILE": path])
        #expect(result.exitCode == 0 && result.body == "hello from two-operators\n", "\(result.stderr)")
        #expect(proxy.waitFor("tunnel_unpinned")?["ct"] == "compliant")
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(closed["verify"] == "probe+keylog" && closed["tls"] == "TLSv1.3", "\(closed)")
    }

    // MARK: refused chains

    /// Each chain that falls short of Chrome's policy is refused at the CONNECT with the shortfall in words.
    @Test(arguments: ["intercepted", "no-sct", "one-operator", "wrong-cert", "unlisted-log", "retired-log", "two-long", "future"])
    func nonCompliantChainsAreRefused(leaf: String) throws {
        let expected = try CTExpectations(ct)
        let server = try serve(leaf)
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port]))
        let raw = try connectResponse(proxy: proxy.port, target: "\(ct.host(leaf)):\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        #expect(header("Proxy-Status", in: raw) == "pinproxy; error=tls_certificate_error; details=\"ct_not_compliant\"")
        let line = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        #expect(line["reason"] == "ct_not_compliant" && line["ct"] == "not_compliant" && line["status"] == "502", "\(line)")
        try #expect(line["detail"] == (try expected.refusalDetail(leaf)), "\(line)")
        try #expect(line["ct_detail"] == (try expected.detail(leaf)), "\(line)")
        #expect(line["hint"] == "a publicly trusted certificate is logged in Certificate Transparency; one that is not was likely minted by an "
                + "interception root (check which root issued it: ct_scts and the chain). An internal host with a private CA that logs "
                + "nothing is exempted by name: a rule 'host: \(ct.host(leaf))' with ct: off", "\(line)")
        try #expect(line["ct_scts"] ?? "" == (try scts(expected.counted(leaf), "embedded")), "\(line)")

        // curl sees the refusal as a failed CONNECT and reads nothing of the server's.
        let result = try get(proxy, leaf, port: server.port)
        #expect(result.connectStatus == 502 && result.exitCode != 0 && result.body.isEmpty, "\(result)")
    }

    // MARK: rules

    /// `ct: off` exempts a host by name (a private CA that logs nothing); `ct: report` tunnels and logs
    /// the would-be refusal; hosts left to `defaults` are checked.
    @Test func offAndReportRules() throws {
        let unlogged = try serve("no-sct")
        let intercepted = try serve("intercepted")
        let rules = """
            rules:
              - host: no-sct.ct.pinproxy.test
                ct: off
              - host: intercepted.ct.pinproxy.test
                ct: report
            """
        let proxy = try ProxyProcess(config: ct.policy(ports: [unlogged.port, intercepted.port], rules: rules))
        #expect(try get(proxy, "no-sct", port: unlogged.port).body == "hello from no-sct\n")
        let exempt = try #require(proxy.waitFor("tunnel_unpinned"))
        #expect(exempt["ct"] == "exempt" && exempt["host"] == "no-sct.ct.pinproxy.test" && exempt["ct_scts"] == nil, "\(exempt)")

        #expect(try get(proxy, "intercepted", port: intercepted.port).body == "hello from intercepted\n")
        let bypassed = try #require(proxy.waitFor("tunnel_bypassed"), "\(proxy.log)")
        #expect(bypassed["host"] == "intercepted.ct.pinproxy.test" && bypassed["ct"] == "report" && bypassed["bypass"] == "ct_report", "\(bypassed)")
        #expect(bypassed["would_refuse"] == "true" && bypassed["reason"] == "ct_not_compliant", "\(bypassed)")
        try #expect(bypassed["ct_detail"] == (try CTExpectations(ct).detail("intercepted")), "\(bypassed)")
        #expect(proxy.events("tunnel_refused").isEmpty)
    }

    /// A rule with `ct` and no pins only sets CT for its hosts: with `defaults: ct: off`, its host is
    /// checked and refused, another host is exempt (and says so: the policy has a log list).
    @Test func aCTOnlyRuleWithoutPins() throws {
        let unlogged = try serve("no-sct")
        let other = try serve("intercepted")
        let rules = "rules:\n  - host: no-sct.ct.pinproxy.test\n    ct: require\n    mirror_checks: 1"
        let proxy = try ProxyProcess(config: ct.policy(ports: [unlogged.port, other.port], ct: "off", rules: rules))
        let raw = try connectResponse(proxy: proxy.port, target: "no-sct.ct.pinproxy.test:\(unlogged.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["reason"] == "ct_not_compliant" && refused["rule_line"] != nil, "\(refused)")

        #expect(try get(proxy, "intercepted", port: other.port).body == "hello from intercepted\n")
        let exempt = try #require(proxy.waitFor("tunnel_unpinned"))
        #expect(exempt["ct"] == "exempt" && exempt["host"] == "intercepted.ct.pinproxy.test", "\(exempt)")
    }

    /// In a rule with pins, both must hold: a pin that matches does not excuse a chain without SCTs.
    @Test func pinsAndCTMustBothHold() throws {
        let unlogged = try serve("no-sct")
        let logged = try serve("two-operators")
        let rules = """
            rules:
              - host: no-sct.ct.pinproxy.test
                pins: ["\(try ct.pin("no-sct"))"]
                ct: require
              - host: two-operators.ct.pinproxy.test
                pins: ["\(try ct.pin("two-operators"))"]
                ct: require
            """
        let proxy = try ProxyProcess(config: ct.policy(ports: [unlogged.port, logged.port], ct: "off", rules: rules))
        let raw = try connectResponse(proxy: proxy.port, target: "no-sct.ct.pinproxy.test:\(unlogged.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["reason"] == "ct_not_compliant" && refused["ct"] == "not_compliant", "\(refused)")
        try #expect(refused["chain.0.spki"] == (try ct.pin("no-sct")), "\(refused)")

        #expect(try get(proxy, "two-operators", port: logged.port).body == "hello from two-operators\n")
        let allowed = try #require(proxy.waitFor("tunnel_allowed"))
        try #expect(allowed["ct"] == "compliant" && allowed["ct_scts"] == (try scts(["a1", "b1"], "embedded")), "\(allowed)")
    }

    /// A pinned rule without `ct` takes `defaults: ct: require`; and `ct: report` softens CT only:
    /// a pin mismatch under it is still refused.
    @Test func aPinnedRuleTakesTheDefaultsCTAndReportDoesNotSoftenPins() throws {
        let unlogged = try serve("no-sct")
        let intercepted = try serve("intercepted")
        let rules = """
            rules:
              - host: no-sct.ct.pinproxy.test
                pins: ["\(try ct.pin("no-sct"))"]
              - host: intercepted.ct.pinproxy.test
                pins: ["\(try ct.pin("two-operators"))"]
                ct: report
            """
        let proxy = try ProxyProcess(config: ct.policy(ports: [unlogged.port, intercepted.port], rules: rules))
        let raw = try connectResponse(proxy: proxy.port, target: "no-sct.ct.pinproxy.test:\(unlogged.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["reason"] == "ct_not_compliant" && refused["ct"] == "not_compliant" && refused["mode"] == "enforce", "\(refused)")

        let mismatch = try connectResponse(proxy: proxy.port, target: "intercepted.ct.pinproxy.test:\(intercepted.port)")
        #expect(statusLine(mismatch) == "HTTP/1.1 502 Certificate Pin Mismatch", "\(mismatch)")
        let pinRefusal = try #require(proxy.waitFor("tunnel_refused") { $0["host"] == "intercepted.ct.pinproxy.test" })
        #expect(pinRefusal.refusal == .policy(.pinMismatch), "\(pinRefusal)")
        #expect(proxy.events("tunnel_bypassed").isEmpty, "\(proxy.log)")
    }

    /// An exemption is scoped to the CONNECT's host: a tunnel to a `ct: off` host whose ClientHello
    /// names a host that CT covers (here reaching an unlogged chain for that name) is closed at the
    /// ClientHello, before a byte reaches the server, as for a pinned name.
    @Test(arguments: ["1.2", "1.3"])
    func anExemptHostNeverLendsItsExemptionToAnotherSNI(tls: String) throws {
        let unlogged = try serve("two-operators-unlogged", tls: tls)
        let rules = "rules:\n  - host: no-sct.ct.pinproxy.test\n    ct: off"
        let proxy = try ProxyProcess(config: ct.policy(ports: [unlogged.port], rules: rules))
        let out = try run("/usr/bin/env", ["python3", "\(Paths.scripts)/clients.py", "sni", String(proxy.port), "no-sct.ct.pinproxy.test:\(unlogged.port)",
                                           "two-operators.ct.pinproxy.test", ct.roots]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(out == "CLOSED" || out.hasPrefix("ERROR"), "the unlogged chain was reached: \(out)")
        #expect(!out.contains("hello"))
        let line = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        #expect(line.refusal == .stream(.sniMismatch) && line["host"] == "no-sct.ct.pinproxy.test" && line["bytes_up"] == "0", "\(line)")
    }

    /// A verdict cached while a pinned host was exempt does not carry over when a reload requires CT:
    /// the unlogged chain is refused, and the chain whose SCTs came by TLS extension stays compliant
    /// (what the server delivered is judged again, not forgotten with the exemption).
    @Test func aReloadThatRequiresCTJudgesCachedChainsAgain() throws {
        let unlogged = try serve("no-sct")
        let byExtension = try OpenSSLWebServer(certificate: ct.certificate("no-sct"), issuer: ct.path("ct-root.pem"), key: ct.key("no-sct"),
                                               ["-tls1_2", "-serverinfo", ct.serverinfo])
        let pin = try ct.pin("no-sct")
        func rules(_ mode: String) -> String {
            "rules:\n  - host: no-sct.ct.pinproxy.test\n    pins: [\"\(pin)\"]\n    mirror_checks: 0\n    ct: \(mode)"
        }
        let ports = [unlogged.port, byExtension.port]
        let proxy = try ProxyProcess(config: ct.policy(ports: ports, rules: rules("off")))
        #expect(try get(proxy, "no-sct", port: unlogged.port).body == "hello from no-sct\n")
        #expect(try get(proxy, "no-sct", port: byExtension.port).status == 200)
        #expect(proxy.events("tunnel_allowed", count: 2).allSatisfy { $0["ct"] == "exempt" }, "\(proxy.log)")

        try ct.policy(ports: ports, rules: rules("require")).write(toFile: proxy.configPath, atomically: true, encoding: .utf8)
        proxy.signal(SIGHUP)
        #expect(proxy.waitFor("policy_reloaded") != nil, "\(proxy.log)")
        let raw = try connectResponse(proxy: proxy.port, target: "no-sct.ct.pinproxy.test:\(unlogged.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        #expect(proxy.waitFor("tunnel_refused")?["reason"] == "ct_not_compliant", "\(proxy.log)")
        #expect(try get(proxy, "no-sct", port: byExtension.port).status == 200, "\(proxy.log)")
        let allowed = proxy.events("tunnel_allowed", count: 3)
        try #expect(allowed.count == 3 && allowed.last?["ct"] == "compliant" && allowed.last?["ct_scts"] == (try scts(["a1", "b1"], "tls_extension")), "\(proxy.log)")
    }

    // MARK: SCTs by TLS extension and OCSP (openssl s_server: one connection at a time, so mirror_checks: 0)

    static let sServerRule = "rules:\n  - host: no-sct.ct.pinproxy.test\n    ct: require\n    mirror_checks: 0"

    /// The probe asks for the SCT extension: a leaf without embedded SCTs whose server sends two from
    /// two operators in its ServerHello (TLS 1.2) or its leaf's CertificateEntry (TLS 1.3) is compliant.
    @Test(arguments: ["1.2", "1.3"])
    func sctsByTLSExtensionOnTheProbe(tls: String) throws {
        let info = tls == "1.2" ? ct.serverinfo : ct.serverinfoV2
        let server = try OpenSSLWebServer(certificate: ct.certificate("no-sct"), issuer: ct.path("ct-root.pem"), key: ct.key("no-sct"), ["-tls\(tls == "1.2" ? "1_2" : "1_3")", "-serverinfo", info])
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], rules: Self.sServerRule))
        let result = try get(proxy, "no-sct", port: server.port)
        #expect(result.connectStatus == 200 && result.status == 200, "\(result) \(proxy.log)")
        let line = try #require(proxy.waitFor("tunnel_unpinned"), "\(proxy.log)")
        try #expect(line["ct"] == "compliant" && line["ct_scts"] == (try scts(["a1", "b1"], "tls_extension")), "\(line)")
    }

    /// The probe asks for OCSP stapling: SCTs in the stapled response (a2 and b1) count.
    @Test(arguments: ["1.2", "1.3"])
    func stapledOCSPSCTs(tls: String) throws {
        let server = try OpenSSLWebServer(certificate: ct.certificate("no-sct"), issuer: ct.path("ct-root.pem"), key: ct.key("no-sct"),
                                          ["-tls\(tls == "1.2" ? "1_2" : "1_3")", "-status_file", ct.ocspResponse])
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], rules: Self.sServerRule))
        let result = try get(proxy, "no-sct", port: server.port)
        #expect(result.connectStatus == 200 && result.status == 200, "\(result) \(proxy.log)")
        let line = try #require(proxy.waitFor("tunnel_unpinned"), "\(proxy.log)")
        try #expect(line["ct"] == "compliant" && line["ct_scts"] == (try scts(["a2", "b1"], "ocsp")), "\(line)")
    }

    /// Without either, the same server is refused: the SCTs above are what made it compliant.
    @Test func theSameServerWithoutSCTsIsRefused() throws {
        let server = try OpenSSLWebServer(certificate: ct.certificate("no-sct"), issuer: ct.path("ct-root.pem"), key: ct.key("no-sct"), [])
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], rules: Self.sServerRule))
        let raw = try connectResponse(proxy: proxy.port, target: "no-sct.ct.pinproxy.test:\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        #expect(proxy.waitFor("tunnel_refused")?["reason"] == "ct_not_compliant")
    }

    // MARK: the selective server: a logged chain for the probe, an unlogged one (same name) for the tunnel

    /// TLS 1.2: the tunnel's Certificate is read in the stream and judged again; a compliant probe
    /// does not excuse it. Nothing of the server's reaches the client.
    @Test func theSelectiveServerIsRefusedInTheStreamOnTLS12() throws {
        let logged = try serve("two-operators", tls: "1.2")
        let unlogged = try serve("two-operators-unlogged", tls: "1.2")
        let selective = try Replayer(genuine: logged.port, abort: "none", then: unlogged.port)
        let proxy = try ProxyProcess(config: ct.policy(ports: [selective.port]))
        let result = try get(proxy, "two-operators", port: selective.port)
        #expect(result.connectStatus == 200, "the probe met the logged chain: \(result)")
        #expect(result.exitCode != 0 && !result.body.contains("unlogged"), "\(result)")
        #expect(proxy.waitFor("tunnel_unpinned")?["ct"] == "compliant")
        let refused = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        #expect(refused["stage"] == "stream" && refused["reason"] == "ct_not_compliant" && refused["tls"] == "TLSv1.2", "\(refused)")
        #expect(refused["detail"] == "the chain the server sent in the tunnel fails the rule: ct_not_compliant", "\(refused)")
        try #expect(refused["ct_detail"] == (try CTExpectations(ct).detail("two-operators-unlogged")), "\(refused)")
        #expect(refused["ct"] == "not_compliant" && refused["ct_scts"] == nil, "\(refused)")
        #expect(refused["bytes_down"] == "0", "\(refused)")
        // The probe's chain passed and the tunnel's did not: what only an interceptor shows.
        let caught = try #require(proxy.waitFor("interception_suspected"), "\(proxy.log)")
        try #expect(caught["stage"] == "stream" && caught["chain.0.spki"] == (try ct.pin("two-operators-unlogged")), "\(caught)")
    }

    /// Under `ct: report` the stream's finding is a warning, and the tunnel stands (as report mode
    /// does for pins).
    @Test func underReportTheSelectiveServerIsAWarning() throws {
        let logged = try serve("two-operators", tls: "1.2")
        let unlogged = try serve("two-operators-unlogged", tls: "1.2")
        let selective = try Replayer(genuine: logged.port, abort: "none", then: unlogged.port)
        let rules = "rules:\n  - host: two-operators.ct.pinproxy.test\n    ct: report"
        let proxy = try ProxyProcess(config: ct.policy(ports: [selective.port], rules: rules))
        #expect(try get(proxy, "two-operators", port: selective.port).body == "hello from two-operators-unlogged\n")
        let warning = try #require(proxy.waitFor("tunnel_warning") { $0["stage"] == "stream" }, "\(proxy.log)")
        #expect(warning["reason"] == "ct_not_compliant" && warning["would_refuse"] == "true" && warning["bypass"] == "ct_report", "\(warning)")
        try #expect(warning["ct_detail"] == (try CTExpectations(ct).detail("two-operators-unlogged")), "\(warning)")
        #expect(proxy.events("tunnel_refused").isEmpty, "\(proxy.log)")
    }

    /// TLS 1.3: the chain is read with the client's key log (curl's SSLKEYLOGFILE), or by the mirror
    /// check when the client writes none; either way the unlogged chain is refused.
    @Test(arguments: [true, false])
    func theSelectiveServerIsRefusedOnTLS13(keyLog: Bool) throws {
        let path = try memoryDirectory() + "/keylog"
        let logged = try serve("two-operators", tls: "1.3")
        let unlogged = try serve("two-operators-unlogged", tls: "1.3")
        let selective = try Replayer(genuine: logged.port, abort: "none", then: unlogged.port)
        let proxy = try ProxyProcess(config: ct.policy(ports: [selective.port], proxy: "  keylog: { path: \(path), wait: 2s }"))
        let result = try get(proxy, "two-operators", port: selective.port, environment: keyLog ? ["SSLKEYLOGFILE": path] : [:])
        #expect(result.connectStatus == 200, "the probe met the logged chain: \(result)")
        #expect(result.exitCode != 0 && !result.body.contains("unlogged"), "\(result)")
        let refused = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        #expect(refused["stage"] == (keyLog ? "stream" : "mirror") && refused["reason"] == "ct_not_compliant", "\(refused)")
        #expect(refused["tls"] == "TLSv1.3", "\(refused)")
        let shown = keyLog ? "in the tunnel" : "on the mirror check"
        #expect(refused["detail"] == "the chain the server sent \(shown) fails the rule: ct_not_compliant", "\(refused)")
        try #expect(refused["ct_detail"] == (try CTExpectations(ct).detail("two-operators-unlogged")), "\(refused)")
        #expect(refused["ct"] == "not_compliant" && refused["ct_scts"] == nil, "\(refused)")
        let caught = try #require(proxy.waitFor("interception_suspected"), "\(proxy.log)")
        // With a key log the mirror runs beside the tunnel and sees the same chain: either may be first.
        #expect(caught["stage"] == refused["stage"] || (keyLog && caught["stage"] == "mirror"), "\(caught)")
        try #expect(caught["chain.0.spki"] == (try ct.pin("two-operators-unlogged")), "\(caught)")
        #expect(caught["quarantined_until"] != nil, "\(caught)")
    }
}

/// What the test PKI's logs, SCTs and shortfalls look like in pinproxy's log lines, from the
/// generator's own outputs (log_list.json, expected.txt) and Chrome's rules.
struct CTExpectations {
    let ct: CTFixtures
    let list: [String: Any]
    /// expected.txt: `leaf delivery logIDhex timestampMs good|bad`.
    let facts: [[String]]

    init(_ ct: CTFixtures) throws {
        self.ct = ct
        list = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: ct.logList))) as? [String: Any] ?? [:]
        facts = try String(contentsOfFile: ct.path("expected.txt"), encoding: .utf8).split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
    }

    static func description(_ log: String) -> String { "Test Operator \(log.prefix(1).uppercased()) '\(log)' log" }
    static func operatorName(_ log: String) -> String { "Test Operator \(log.prefix(1).uppercased())" }

    /// When the logs saw the precertificates, as pinproxy writes a time.
    var sctTime: String {
        let ms = Double(facts.first { $0[1] == "embedded" && $0.count == 5 }?[3] ?? "0") ?? 0
        return RFC3339.format(Date(timeIntervalSince1970: ms / 1000))
    }

    /// The logs whose SCTs count toward the shortfall, in the certificate's order.
    func counted(_ leaf: String) -> [String] {
        switch leaf {
        case "one-operator": ["a1", "a2"]
        case "two-long": ["a1", "b1"]
        case "wrong-cert", "unlisted-log", "retired-log", "future": ["a1"]
        default: []
        }
    }

    /// A refusal's `detail`: the host and the policy, then the shortfall.
    func refusalDetail(_ leaf: String) throws -> String {
        "the certificate of \(ct.host(leaf)) does not meet Chrome's Certificate Transparency policy: " + (try detail(leaf))
    }

    /// `ct_detail`: the shortfall in words for this leaf.
    func detail(_ leaf: String) throws -> String {
        let none = "0 valid embedded SCTs from 0 operators; 2 SCTs needed for a certificate valid 90 days and 2 operators needed"
        let one = "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 90 days and 2 operators needed"
        switch leaf {
        case "intercepted", "no-sct", "two-operators-unlogged": return none
        case "one-operator": return "2 valid embedded SCTs from 1 operator; 2 operators needed"
        case "two-long": return "2 valid embedded SCTs from 2 operators; 3 SCTs needed for a certificate valid 398 days"
        case "wrong-cert": return one + " (ignored: SCT from \(try ct.logID("b1")): its signature does not verify for this certificate)"
        case "unlisted-log": return one + " (ignored: SCT from \(try ct.logID("unlisted")): its log is in no log list)"
        case "retired-log": return one + " (ignored: SCT from \(try ct.logID("b2")): its log retired \(retiredAt), before the certificate's earliest SCT)"
        case "future":
            // expected.txt lists future's SCTs in the certificate's order: a1's, then b1's ten years ahead.
            let ms = Double(facts.filter { $0[0] == "future" }.last?[3] ?? "0") ?? 0
            let when = RFC3339.format(Date(timeIntervalSince1970: ms / 1000))
            return one + " (ignored: SCT from \(try ct.logID("b1")): its timestamp \(when) is in the future)"
        default: throw HelperError(message: "no expected detail for \(leaf)")
        }
    }

    /// b2's retirement, as the list gives it.
    var retiredAt: String {
        let operators = list["operators"] as? [[String: Any]] ?? []
        let logs = operators.flatMap { $0["logs"] as? [[String: Any]] ?? [] }
        let b2 = logs.first { ($0["description"] as? String) == Self.description("b2") }
        return ((b2?["state"] as? [String: Any])?["retired"] as? [String: Any])?["timestamp"] as? String ?? "?"
    }
}
