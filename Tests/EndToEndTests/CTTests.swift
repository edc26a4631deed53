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

    // MARK: compliant chains

    /// Two SCTs from two operators for a certificate valid 90 days, three for one valid 398 days: the
    /// tunnel opens for an unpinned host under `defaults: ct: require`, and the client's own chain is
    /// checked again (stream on TLS 1.2, mirror on TLS 1.3).
    @Test(arguments: [("two-operators", ["a1", "b1"]), ("three-long", ["a1", "a2", "b1"]), ("interception-logged", ["a1", "b1"])],
          [("1.2", "probe+stream"), ("1.3", "probe+mirror")])
    func compliantChainsTunnel(leaf: (String, [String]), tls: (String, String)) throws {
        let server = try ct.serve(leaf.0, tls: tls.0)
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port]))
        let result = try ct.get(proxy, leaf.0, port: server.port)
        #expect(result.exitCode == 0 && result.body == "hello from \(leaf.0)\n", "\(result.stderr)")
        let line = try #require(proxy.waitFor("tunnel_unpinned"), "\(proxy.log)")
        #expect(line["ct"] == "compliant" && line["host"] == ct.host(leaf.0), "\(line)")
        try #expect(line["ct_scts"] == (try ct.scts(leaf.1, "embedded")), "\(line)")
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(closed["verify"] == tls.1 && closed["tls"] == "TLSv\(tls.0)", "\(closed)")
        #expect(proxy.events("tunnel_refused").isEmpty)
    }

    /// A server that sends only its leaf: the issuer pinproxy judges embedded SCTs with is the second
    /// certificate the server sent (docs/certificate-transparency.md, "Limits"), so there is none,
    /// no embedded SCT verifies, and the host is refused, each SCT named. (A browser would verify
    /// them with the issuer of the chain it built; when pinproxy does too, this test says so.)
    @Test(arguments: ["1.2", "1.3"])
    func aLeafSentAloneHasNoEmbeddedSCTThatVerifies(tls: String) throws {
        let server = try Upstream(chainPath: ct.certificate("two-operators"), keyPath: ct.key("two-operators"), name: "two-operators", tls: tls)
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port]))
        let raw = try connectResponse(proxy: proxy.port, target: "two-operators.ct.pinproxy.test:\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        let refused = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        let (a1, b1) = (try ct.logID("a1"), try ct.logID("b1"))
        #expect(refused["ct_detail"] == "0 valid embedded SCTs from 0 operators; 2 SCTs needed for a certificate valid 90 days and 2 operators needed"
                + " (ignored: SCT from \(a1): its signature does not verify for this certificate; SCT from \(b1): its signature does not verify for this certificate)",
                "\(refused)")
    }

    /// TLS 1.3 with the client's key log: the tunnel's own chain is read and judged (verify=probe+keylog).
    @Test func aCompliantChainReadWithTheKeyLog() throws {
        let path = try memoryDirectory() + "/keylog"
        let server = try ct.serve("two-operators", tls: "1.3")
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], proxy: "  keylog: { path: \(path), wait: 2s }"))
        let result = try ct.get(proxy, "two-operators", port: server.port, environment: ["SSLKEYLOGFILE": path])
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
        let server = try ct.serve(leaf)
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
                + "nothing is exempted by name: add a rule 'host: \(ct.host(leaf))' with ct: off", "\(line)")
        try #expect(line["ct_scts"] ?? "" == (try ct.scts(expected.counted(leaf), "embedded")), "\(line)")

        // curl sees the refusal as a failed CONNECT and reads nothing of the server's.
        let result = try ct.get(proxy, leaf, port: server.port)
        #expect(result.connectStatus == 502 && result.exitCode != 0 && result.body.isEmpty, "\(result)")
    }

    // MARK: rules

    /// `ct: off` exempts a host by name (a private CA that logs nothing); `ct: report` tunnels and logs
    /// the would-be refusal; hosts left to `defaults` are checked.
    @Test func offAndReportRules() throws {
        let unlogged = try ct.serve("no-sct")
        let intercepted = try ct.serve("intercepted")
        let rules = """
            rules:
              - host: no-sct.ct.pinproxy.test
                ct: off
              - host: intercepted.ct.pinproxy.test
                ct: report
            """
        let proxy = try ProxyProcess(config: ct.policy(ports: [unlogged.port, intercepted.port], rules: rules))
        #expect(try ct.get(proxy, "no-sct", port: unlogged.port).body == "hello from no-sct\n")
        let exempt = try #require(proxy.waitFor("tunnel_unpinned"))
        #expect(exempt["ct"] == "exempt" && exempt["host"] == "no-sct.ct.pinproxy.test" && exempt["ct_scts"] == nil, "\(exempt)")

        #expect(try ct.get(proxy, "intercepted", port: intercepted.port).body == "hello from intercepted\n")
        let bypassed = try #require(proxy.waitFor("tunnel_bypassed"), "\(proxy.log)")
        #expect(bypassed["host"] == "intercepted.ct.pinproxy.test" && bypassed["ct"] == "report" && bypassed["bypass"] == "ct_report", "\(bypassed)")
        #expect(bypassed["would_refuse"] == "true" && bypassed["reason"] == "ct_not_compliant", "\(bypassed)")
        try #expect(bypassed["ct_detail"] == (try CTExpectations(ct).detail("intercepted")), "\(bypassed)")
        #expect(proxy.events("tunnel_refused").isEmpty)
    }

    /// `require_keylog` is about pinned hosts: a host checked for CT only is verified by the mirror
    /// check when its client writes no key log, not refused.
    @Test func requireKeylogDoesNotApplyToHostsCheckedForCTOnly() throws {
        let path = try memoryDirectory() + "/keylog"
        let server = try ct.serve("two-operators", tls: "1.3")
        let yaml = ct.policy(ports: [server.port], proxy: "  keylog: { path: \(path), wait: 1s }")
            .replacingOccurrences(of: "  require_backup: off", with: "  require_backup: off\n  require_keylog: true")
        let proxy = try ProxyProcess(config: yaml)
        let result = try ct.get(proxy, "two-operators", port: server.port)
        #expect(result.exitCode == 0 && result.body == "hello from two-operators\n", "\(result.stderr) \(proxy.log)")
        let closed = try #require(proxy.waitFor("tunnel_closed"), "\(proxy.log)")
        #expect(closed["verify"] == "probe+mirror", "\(closed)")
    }

    /// Only TLS passes where CT looks: a host under `ct: require` that speaks plain HTTP is refused at
    /// the probe; exempt by name (`ct: off`), it is tunnelled.
    @Test func onlyTLSPassesWhereCTLooks() throws {
        let plain = try Upstream(chainPath: ct.chain("no-sct"), keyPath: ct.key("no-sct"), name: "plain", mode: "plain")
        let proxy = try ProxyProcess(config: ct.policy(ports: [plain.port]))
        let raw = try connectResponse(proxy: proxy.port, target: "no-sct.ct.pinproxy.test:\(plain.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 TLS Handshake Failed", "\(raw)")
        let refused = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        #expect(refused.refusal == .network(.tlsProtocolError) && refused["stage"] == nil, "\(refused)")

        let exempt = try ProxyProcess(config: ct.policy(ports: [plain.port], rules: "rules:\n  - host: no-sct.ct.pinproxy.test\n    ct: off"))
        let head = try rawResponseHead(port: exempt.port, send: Array("CONNECT no-sct.ct.pinproxy.test:\(plain.port) HTTP/1.1\r\n\r\n".utf8))
        #expect(statusLine(head) == "HTTP/1.1 200 Connection established", "\(head)")
    }

    /// The debug bypass lets a non-compliant chain through like a pin mismatch, and the line says
    /// what it let through (`ct=not_compliant`, not `report`: nothing was set to report).
    @Test func theDebugBypassLetsANonCompliantChainThroughAndSaysSo() throws {
        let server = try ct.serve("no-sct")
        let debug = "debug:\n  until: \"\(RFC3339Text.inSeconds(3600))\"\n  hosts: [no-sct.ct.pinproxy.test]"
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], extra: debug), arguments: ["--debug-bypass"])
        #expect(try ct.get(proxy, "no-sct", port: server.port).body == "hello from no-sct\n")
        let line = try #require(proxy.waitFor("tunnel_bypassed"), "\(proxy.log)")
        #expect(line["bypass"] == "debug_bypass" && line["would_refuse"] == "true" && line["reason"] == "ct_not_compliant", "\(line)")
        #expect(line["ct"] == "not_compliant", "\(line)")
        try #expect(line["ct_detail"] == (try CTExpectations(ct).detail("no-sct")), "\(line)")
    }

    /// A rule with `ct` and no pins only sets CT for its hosts: with `defaults: ct: off`, its host is
    /// checked and refused, another host is exempt (and says so: the policy has a log list).
    @Test func aCTOnlyRuleWithoutPins() throws {
        let unlogged = try ct.serve("no-sct")
        let other = try ct.serve("intercepted")
        let rules = "rules:\n  - host: no-sct.ct.pinproxy.test\n    ct: require\n    mirror_checks: 1\n    quarantine: 1m"
        let proxy = try ProxyProcess(config: ct.policy(ports: [unlogged.port, other.port], ct: "off", rules: rules))
        let raw = try connectResponse(proxy: proxy.port, target: "no-sct.ct.pinproxy.test:\(unlogged.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["reason"] == "ct_not_compliant" && refused["rule_line"] == "27", "\(refused)")
        // The host has a rule: the hint says to exempt it there, not to add one.
        #expect(refused["hint"]?.hasSuffix("is exempted by name: set ct: off in its rule at line 27 ('no-sct.ct.pinproxy.test')") == true, "\(refused)")

        #expect(try ct.get(proxy, "intercepted", port: other.port).body == "hello from intercepted\n")
        let exempt = try #require(proxy.waitFor("tunnel_unpinned"))
        #expect(exempt["ct"] == "exempt" && exempt["host"] == "intercepted.ct.pinproxy.test", "\(exempt)")
    }

    /// A CT-only rule's `trust:` is the store pinproxy builds its chain with, and the deny list is
    /// looked for in that chain: a server that sends only its leaf has its root found under
    /// `ca-file:` of that root (`denylisted_key`), not under `system`, where the chain is not built
    /// and only CT judges it (the leaf alone: `ct_not_compliant`). `check` accepts both.
    @Test func aCTOnlyRulesTrustIsTheStoreItsChainIsBuiltWith() throws {
        let leafOnly = try Upstream(chainPath: ct.certificate("two-operators"), keyPath: ct.key("two-operators"), name: "two-operators")
        let rootPin = try ct.pin(certificateFile: ct.path("ct-root.pem"))
        func yaml(_ trust: String) -> String {
            ct.policy(ports: [leafOnly.port], ct: "off", rules: "rules:\n  - host: two-operators.ct.pinproxy.test\n    ct: require\n    trust: \"\(trust)\"",
                      extra: "deny:\n  - \"\(rootPin)\"")
        }
        for (trust, status, reason) in [("ca-file:\(ct.path("ct-root.pem"))", "502 Certificate Key Denylisted", "denylisted_key"),
                                        ("system", "502 Certificate Transparency Not Compliant", "ct_not_compliant")] {
            let config = try temporaryFile(yaml(trust))
            let check = try run(Paths.pinproxy, ["check", "--config", config], timeout: 30)
            #expect(check.status == 0 && check.stdout.hasPrefix("\(config): OK\n"), "\(check)")
            let proxy = try ProxyProcess(config: yaml(trust))
            let raw = try connectResponse(proxy: proxy.port, target: "two-operators.ct.pinproxy.test:\(leafOnly.port)")
            #expect(statusLine(raw) == "HTTP/1.1 \(status)", "\(trust): \(raw)")
            let refused = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
            #expect(refused["reason"] == reason && refused["trust"] == trust, "\(refused)")
            #expect(proxy.stop() == 0)
        }
    }

    /// `mode: unpinned` with `ct: require` is the same as a CT-only rule: unpinned, and checked.
    @Test func anUnpinnedRuleWithCTIsChecked() throws {
        let server = try ct.serve("no-sct")
        let rules = "rules:\n  - host: no-sct.ct.pinproxy.test\n    mode: unpinned\n    ct: require"
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], ct: "off", rules: rules))
        let raw = try connectResponse(proxy: proxy.port, target: "no-sct.ct.pinproxy.test:\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw) \(proxy.log)")
        #expect(proxy.waitFor("tunnel_refused")?["reason"] == "ct_not_compliant", "\(proxy.log)")
    }

    /// A CT-only rule lets its hosts through `unpinned: deny` (they are unpinned by the rule) and checks them.
    @Test func aCTOnlyRuleUnderUnpinnedDeny() throws {
        let logged = try ct.serve("two-operators")
        let unlogged = try ct.serve("no-sct")
        let rules = "rules:\n  - host: two-operators.ct.pinproxy.test\n    ct: require\n  - host: no-sct.ct.pinproxy.test\n    ct: require"
        let yaml = ct.policy(ports: [logged.port, unlogged.port], ct: "off", rules: rules).replacingOccurrences(of: "unpinned: allow", with: "unpinned: deny")
        let proxy = try ProxyProcess(config: yaml)
        #expect(try ct.get(proxy, "two-operators", port: logged.port).body == "hello from two-operators\n")
        let line = try #require(proxy.waitFor("tunnel_unpinned"), "\(proxy.log)")
        #expect(line["ct"] == "compliant" && line["reason"] == "rule_unpinned", "\(line)")
        let raw = try connectResponse(proxy: proxy.port, target: "no-sct.ct.pinproxy.test:\(unlogged.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        // A host no rule names is still denied as unpinned.
        let other = try connectResponse(proxy: proxy.port, target: "intercepted.ct.pinproxy.test:\(unlogged.port)")
        #expect(statusLine(other).hasPrefix("HTTP/1.1 403"), "\(other)")
    }

    /// In a rule with pins, both must hold: a pin that matches does not excuse a chain without SCTs.
    @Test func pinsAndCTMustBothHold() throws {
        let unlogged = try ct.serve("no-sct")
        let logged = try ct.serve("two-operators")
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

        #expect(try ct.get(proxy, "two-operators", port: logged.port).body == "hello from two-operators\n")
        let allowed = try #require(proxy.waitFor("tunnel_allowed"))
        try #expect(allowed["ct"] == "compliant" && allowed["ct_scts"] == (try ct.scts(["a1", "b1"], "embedded")), "\(allowed)")
    }

    /// A pinned rule without `ct` takes `defaults: ct: require`; and `ct: report` softens CT only:
    /// a pin mismatch under it is still refused.
    @Test func aPinnedRuleTakesTheDefaultsCTAndReportDoesNotSoftenPins() throws {
        let unlogged = try ct.serve("no-sct")
        let intercepted = try ct.serve("intercepted")
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
        let unlogged = try ct.serve("two-operators-unlogged", tls: tls)
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
        let unlogged = try ct.serve("no-sct")
        let byExtension = try OpenSSLWebServer(certificate: ct.certificate("no-sct"), issuer: ct.path("ct-root.pem"), key: ct.key("no-sct"),
                                               ["-tls1_2", "-serverinfo", ct.serverinfo])
        let pin = try ct.pin("no-sct")
        func rules(_ mode: String) -> String {
            "rules:\n  - host: no-sct.ct.pinproxy.test\n    pins: [\"\(pin)\"]\n    mirror_checks: 0\n    ct: \(mode)"
        }
        let ports = [unlogged.port, byExtension.port]
        let proxy = try ProxyProcess(config: ct.policy(ports: ports, rules: rules("off")))
        #expect(try ct.get(proxy, "no-sct", port: unlogged.port).body == "hello from no-sct\n")
        #expect(try ct.get(proxy, "no-sct", port: byExtension.port).status == 200)
        #expect(proxy.events("tunnel_allowed", count: 2).allSatisfy { $0["ct"] == "exempt" }, "\(proxy.log)")

        try proxy.reload(ct.policy(ports: ports, rules: rules("require")))
        #expect(proxy.waitFor("policy_reloaded")?["changes"] == "rules +0 -0 ~1 (~no-sct.ct.pinproxy.test); pins +0 -0; deny +0 -0", "\(proxy.log)")
        let raw = try connectResponse(proxy: proxy.port, target: "no-sct.ct.pinproxy.test:\(unlogged.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        #expect(proxy.waitFor("tunnel_refused")?["reason"] == "ct_not_compliant", "\(proxy.log)")
        #expect(try ct.get(proxy, "no-sct", port: byExtension.port).status == 200, "\(proxy.log)")
        let allowed = proxy.events("tunnel_allowed", count: 3)
        try #expect(allowed.count == 3 && allowed.last?["ct"] == "compliant" && allowed.last?["ct_scts"] == (try ct.scts(["a1", "b1"], "tls_extension")), "\(proxy.log)")
    }

    /// `policy_reloaded` says what a reload did to CT: a rule's `ct` is a change to that rule, and
    /// `defaults.ct` is named with its new value.
    @Test func aReloadSaysWhatChangedInCT() throws {
        let rules = "rules:\n  - host: no-sct.ct.pinproxy.test\n    ct: off"
        let proxy = try ProxyProcess(config: ct.policy(ports: [443], ct: "report", rules: rules))
        try proxy.reload(ct.policy(ports: [443], ct: "require", rules: rules.replacingOccurrences(of: "ct: off", with: "ct: report")))
        let line = try #require(proxy.waitFor("policy_reloaded"), "\(proxy.log)")
        #expect(line["changes"] == "rules +0 -0 ~1 (~no-sct.ct.pinproxy.test); pins +0 -0; deny +0 -0; defaults ~1 (ct: require)", "\(line)")
        try proxy.reload(ct.policy(ports: [443], ct: "require", rules: rules.replacingOccurrences(of: "ct: off", with: "ct: report")))
        #expect(proxy.events("policy_reloaded", count: 2).last?["changes"] == "no change to rules, pins, deny or defaults", "\(proxy.log)")
        #expect(proxy.stop() == 0)
    }

    /// `check --probe` judges each rule's chain with CT as the proxy would, and says why in words;
    /// a CT-only rule is probed too.
    @Test func checkProbeJudgesCT() throws {
        let unlogged = try ct.serve("no-sct")
        let logged = try ct.serve("two-operators")
        let intercepted = try ct.serve("intercepted")
        let rules = """
            rules:
              - host: intercepted.ct.pinproxy.test
                ports: [\(intercepted.port)]
                ct: require
              - host: no-sct.ct.pinproxy.test
                ports: [\(unlogged.port)]
                pins: ["\(try ct.pin("no-sct"))"]
              - host: two-operators.ct.pinproxy.test
                ports: [\(logged.port)]
                pins: ["\(try ct.pin("two-operators"))"]
            """
        let yaml = ct.policy(ports: [unlogged.port, logged.port, intercepted.port], rules: rules)
        let lines = yaml.split(separator: "\n", omittingEmptySubsequences: false)
        func line(_ host: String) -> Int { (lines.firstIndex { $0.hasPrefix("  - host: \(host)") } ?? -1) + 1 }
        let config = try temporaryFile(yaml)
        let r = try run(Paths.pinproxy, ["check", "--config", config, "--probe"], timeout: 60)
        #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
        let detail = try CTExpectations(ct).detail("no-sct")
        #expect(r.stdout.contains("line \(line("no-sct")) no-sct.ct.pinproxy.test:\(unlogged.port): would be REFUSED: ct_not_compliant: \(detail) via 127.0.0.1\n"), "\(r.stdout)")
        #expect(r.stdout.contains("line \(line("two-operators")) two-operators.ct.pinproxy.test:\(logged.port): matches ("), "\(r.stdout)")
        // A CT-only rule is probed too: its host is checked as the proxy would check it.
        #expect(r.stdout.contains("line \(line("intercepted")) intercepted.ct.pinproxy.test:\(intercepted.port): would be REFUSED: ct_not_compliant: \(detail) via 127.0.0.1\n"), "\(r.stdout)")
    }
}
