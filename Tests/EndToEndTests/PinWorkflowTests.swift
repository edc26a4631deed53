import Foundation
import Testing
import TestSupport

/// The pin workflow, followed as an operator would: the rule `pin` prints is pasted and works, `pin
/// --config` says whether the server still matches the rule, a refusal's hint is a command that
/// runs, and `check --probe` probes every port a rule covers.
@Suite(.serialized) struct PinWorkflowTests {
    /// The rule below `# Ready-to-paste rule`, indented to sit under `rules:`.
    func pastedRule(_ stdout: String) -> String {
        stdout.components(separatedBy: "# Ready-to-paste rule").last!.split(separator: "\n").dropFirst()
            .filter { !$0.hasPrefix("#") }.map { "  " + $0 }.joined(separator: "\n")
    }

    /// Without a policy, the test PKI is not in the system store: the rule says `trust: pins-only`
    /// (else every CONNECT would be chain_invalid), and the port, not 443, comes with the
    /// allowed_ports line. Pasted into a policy with system trust, the rule lets the tunnel through.
    @Test func thePastedRuleWorksEvenWhenTheChainIsNotInTheSystemStore() throws {
        let server = try Upstream("leaf-ec256", name: "pasted")
        let r = try run(Paths.pinproxy, ["pin", "api.pinproxy.test:\(server.port)", "--connect-to", "127.0.0.1"], timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("""
            # Port \(server.port) is not in proxy.allowed_ports, so every CONNECT to it is refused (403 port_not_allowed); allow it:
            #   proxy:
            #     allowed_ports: [443, \(server.port)]
            # The chain does not validate under trust system (unable to get local issuer certificate): the rule says trust: pins-only, so the pinned certificates are its anchors (signatures, dates and the name are still checked).
            # Ready-to-paste rule (under rules:). Confirm these pins from a network you trust.
            - host: "api.pinproxy.test"
              trust: "pins-only"
              pins:
                - { pin: "\(Pins.leafEC)", at: leaf
            """))
        let config = """
            version: 1
            proxy:
              allowed_ports: [443, \(server.port)]
              deny_destinations: [link-local]
              dns: { nameservers: [], hosts_file: none }
              stats_interval: 0
            defaults: { unpinned: deny, trust: system }
            resolve:
              api.pinproxy.test: 127.0.0.1
            rules:
            \(pastedRule(r.stdout))
            """
        let proxy = try ProxyProcess(config: config)
        let through = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port)
        #expect(through.status == 200 && through.body == "hello from pasted\n", "\(through.stderr) \(proxy.log)")
        #expect(proxy.waitFor("tunnel_allowed")?["pin"] == Pins.leafEC)
        #expect(proxy.stop() == 0)
    }

    /// The policy's trust validates the chain: no `trust:` line, no port advice (the port is allowed).
    @Test func noTrustLineWhenThePolicysTrustValidatesTheChain() throws {
        let server = try Upstream("leaf-ec256", name: "plain")
        let config = try temporaryFile(policy(ports: [server.port]))
        let r = try run(Paths.pinproxy, ["pin", "api.pinproxy.test:\(server.port)", "--config", config], timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(!r.stdout.contains("\n  trust: "))
        #expect(!r.stdout.contains("allowed_ports"))
        #expect(!r.stdout.contains("MATCH"))  // no rule for it yet
    }

    /// `pin HOST --config`: the server's chain now, compared with the rule the policy has for it.
    @Test func pinWithConfigSaysWhetherTheServerMatchesTheRule() throws {
        let good = try Upstream("leaf-ec256", name: "good")
        let rogue = try Upstream("rogue-leaf", name: "rogue", port: good.port, extra: ["--bind", "127.0.0.2"])
        let rules = "rules:\n  - host: api.pinproxy.test\n\(pinsLine(Pins.leafEC, Pins.intermediate))\n  - host: x.api.pinproxy.test\n\(pinsLine(Pins.leafEC, Pins.intermediate))"
        let config = try temporaryFile(policy(ports: [good.port], rules: rules, resolve: "  api.pinproxy.test: 127.0.0.1\n  x.api.pinproxy.test: 127.0.0.2"))
        let matches = try run(Paths.pinproxy, ["pin", "api.pinproxy.test:\(good.port)", "--config", config], timeout: 30)
        #expect(matches.status == 0, "\(matches.stderr)")
        #expect(matches.stdout.contains("\n# MATCHES rule at line 16 (pin \(Pins.leafEC) at position 0).\n"))
        let differs = try run(Paths.pinproxy, ["pin", "x.api.pinproxy.test:\(good.port)", "--config", config], timeout: 30)
        #expect(differs.status == 0, "\(differs.stderr)")
        #expect(differs.stdout.contains("\n# DOES NOT MATCH rule at line 18 (pin_mismatch) — do not paste these pins unless you have confirmed the change out of band.\n"))
        #expect(differs.stdout.contains("spki pin:  \(Pins.rogueLeaf)\n"))
        _ = rogue
    }

    /// A refusal's hint names `--config` with the policy in force, so a name that only `resolve:`
    /// knows can be probed: the command in the hint runs as written.
    @Test func theHintIsACommandThatRuns() throws {
        let rogue = try Upstream("rogue-leaf", name: "rogue")
        let proxy = try ProxyProcess(config: policy(ports: [rogue.port], rules: apiRule(pinsLine(Pins.leafEC, Pins.intermediate)),
                                                    resolve: "  api.pinproxy.test: 127.0.0.1"))
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(rogue.port)")) == "HTTP/1.1 502 Certificate Pin Mismatch")
        let hint = try #require(proxy.waitFor("tunnel_refused")?["hint"])
        let command = "pinproxy pin api.pinproxy.test:\(rogue.port) --config \(proxy.configPath)"
        #expect(hint.contains("'\(command)'"), "\(hint)")
        // What a pager shows first: the target, the reason, the verdict and the hint.
        let line = try #require(proxy.log.split(separator: "\n").first { $0.contains("event=tunnel_refused") })
        #expect(line.contains(" level=warning event=tunnel_refused host=api.pinproxy.test port=\(rogue.port) reason=pin_mismatch verdict=refused hint=\""), "\(line)")
        #expect(proxy.stop() == 0)
        let r = try run(Paths.pinproxy, Array(command.split(separator: " ").dropFirst().map(String.init)), timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("# DOES NOT MATCH rule at line"))
    }

    /// Two `at: any` pins may be a key and its spare, or the key and its issuing CA: `check` says
    /// they may be no real backup, and `check --probe` sees the served chain and says it in the
    /// log's words.
    @Test func checkProbeSaysWhenNoPinIsARealBackup() throws {
        let server = try Upstream("leaf-ec256", name: "probed")
        let rules = "rules:\n  - host: api.pinproxy.test\n\(pinsLine(Pins.leafEC, Pins.intermediate))"
        let config = try temporaryFile(policy(ports: [server.port], rules: rules)
            .replacingOccurrences(of: "require_backup: off", with: "require_backup: warn"))
        let r = try run(Paths.pinproxy, ["check", "--config", config, "--probe"], timeout: 60)
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains(":15: warning[no_real_backup]: the rule for 'api.pinproxy.test' may have no real backup: its pins at: any (line 16) may be"))
        #expect(r.stdout.hasSuffix("""

            line 15 api.pinproxy.test:\(server.port): matches (\(Pins.leafEC) at position 0) via 127.0.0.1 TLSv1.3
            line 15 api.pinproxy.test:\(server.port): warning[no_real_backup]: every pin of the rule matched this one chain, so none of them is a real backup; a real backup is a key not in the served chain (a spare kept offline: '{ file: next-key.pub.pem, at: leaf, label: backup }') or a CA pin marked 'backup: true' (then any key that CA certifies for the name passes)

            """), "\(r.stdout)")
        // `pin HOST --config` says the same under its MATCHES line.
        let pin = try run(Paths.pinproxy, ["pin", "api.pinproxy.test:\(server.port)", "--config", config], timeout: 30)
        #expect(pin.stdout.contains("\n# MATCHES rule at line 15 (pin \(Pins.leafEC) at position 0).\n# warning[no_real_backup]: every pin of the rule matched this one chain, so none of them is a real backup; a real backup is a key not in the served chain"))
    }

    /// `check --probe` probes every port a rule covers (its `ports:`, else `allowed_ports`), and
    /// `--port` picks one.
    @Test func checkProbeProbesEachPortOfARule() throws {
        let first = try Upstream("leaf-ec256", name: "first")
        let second = try Upstream("rogue-leaf", name: "second")
        let rules = "rules:\n  - host: api.pinproxy.test\n\(pinsLine(Pins.leafEC, Pins.intermediate))\n  - host: x.api.pinproxy.test\n    ports: [\(first.port)]\n\(pinsLine(Pins.leafEC, Pins.intermediate))"
        let config = try temporaryFile(policy(ports: [first.port, second.port], rules: rules,
                                              resolve: "  api.pinproxy.test: 127.0.0.1\n  x.api.pinproxy.test: 127.0.0.1"))
        let all = try run(Paths.pinproxy, ["check", "--config", config, "--probe"], timeout: 60)
        #expect(all.status == 1, "\(all.stdout)\(all.stderr)")
        #expect(all.stdout.hasSuffix("""

            line 16 api.pinproxy.test: no ports:, so it applies on every port of proxy.allowed_ports; probing \(first.port), \(second.port) (--port N probes one)
            line 16 api.pinproxy.test:\(first.port): matches (\(Pins.leafEC) at position 0) via 127.0.0.1 TLSv1.3
            line 16 api.pinproxy.test:\(second.port): would be REFUSED: pin_mismatch via 127.0.0.1
            line 18 x.api.pinproxy.test:\(first.port): matches (\(Pins.leafEC) at position 0) via 127.0.0.1 TLSv1.3

            """), "\(all.stdout)")
        let one = try run(Paths.pinproxy, ["check", "--config", config, "--probe", "--port", String(first.port)], timeout: 60)
        #expect(one.status == 0, "\(one.stdout)\(one.stderr)")
        #expect(one.stdout.contains("line 16 api.pinproxy.test:\(first.port): matches"))
        #expect(one.stdout.contains("line 18 x.api.pinproxy.test:\(first.port): matches"))
        #expect(!one.stdout.contains(":\(second.port)"))
        let other = try run(Paths.pinproxy, ["check", "--config", config, "--probe", "--port", String(second.port)], timeout: 60)
        #expect(other.stdout.contains("line 18 x.api.pinproxy.test:\(first.port): skipped (it does not cover port \(second.port))"), "\(other.stdout)")
    }
}

/// `check --probe` where nothing listens: a port of a rule without `ports:` that no server
/// answers on (a lab that serves 8443 only while 443 is allowed) is said so, apart from a mismatch,
/// and fails nothing; a listening server whose chain the rule refuses still fails the check.
@Suite(.serialized) struct CheckProbeNothingListensTests {
    @Test func nothingListensIsNotAFailureOfThePolicy() throws {
        let server = try Upstream("leaf-ec256", name: "lab")
        let closed = try freePort()
        let rules = """
            rules:
              - host: api.pinproxy.test
                pins: [{ pin: "\(Pins.leafEC)", at: leaf }, { pin: "\(Pins.backup)", at: leaf }]
              - host: x.api.pinproxy.test
                ports: [\(closed)]
                pins: [{ pin: "\(Pins.leafEC)", at: leaf }, { pin: "\(Pins.backup)", at: leaf }]
            """
        let config = try temporaryFile(policy(ports: [closed, server.port], rules: rules,
                                              resolve: "  api.pinproxy.test: 127.0.0.1\n  x.api.pinproxy.test: 127.0.0.1"))
        let r = try run(Paths.pinproxy, ["check", "--config", config, "--probe"], timeout: 60)
        #expect(r.status == 0, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.hasSuffix("""
            \(config): OK
            2 rules (2 enforced, 0 report, 0 unpinned); 0 pinsets; 0 deny-listed keys; unpinned hosts: allow; listen: 127.0.0.1:3128

            line 16 api.pinproxy.test: no ports:, so it applies on every port of proxy.allowed_ports; probing \(closed), \(server.port) (--port N probes one)
            line 16 api.pinproxy.test:\(closed): nothing listens on api.pinproxy.test:\(closed) (127.0.0.1:\(closed): Connection refused): no chain to judge, not a failure of the policy
            line 16 api.pinproxy.test:\(server.port): matches (\(Pins.leafEC) at position 0) via 127.0.0.1 TLSv1.3
            line 18 x.api.pinproxy.test:\(closed): nothing listens on x.api.pinproxy.test:\(closed) (127.0.0.1:\(closed): Connection refused): no chain to judge, not a failure of the policy

            """), "\(r.stdout)")
        // A server that answers with a chain the rule refuses is still a failure.
        let rogue = try Upstream("rogue-leaf", name: "rogue", port: closed)
        let refused = try run(Paths.pinproxy, ["check", "--config", config, "--probe", "--port", String(closed)], timeout: 60)
        #expect(refused.status == 1, "\(refused.stdout)")
        #expect(refused.stdout.contains("line 18 x.api.pinproxy.test:\(closed): would be REFUSED: pin_mismatch via 127.0.0.1\n"), "\(refused.stdout)")
        rogue.stop()
    }
}

/// A self-signed server certificate that says CA:TRUE (what `openssl req -x509` makes, as in the
/// README's worked example): probed, its key is the leaf's, pinned once `at: leaf`.
@Suite struct SelfSignedCAServerTests {
    @Test func aProbedSelfSignedCAIsPinnedAtLeafOnce() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let made = try run("/usr/bin/openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30",
                                                "-subj", "/CN=local.test", "-addext", "subjectAltName=DNS:local.test",
                                                "-keyout", directory + "/local.key", "-out", directory + "/local.pem"])
        #expect(made.status == 0, "\(made.stderr)")
        let server = try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/upstream.py", "--name", "local", "--tls", "any", "--mode", "https",
                                                 "--port", "0", "--cert", directory + "/local.pem", "--key", directory + "/local.key",
                                                 "--ca", directory + "/local.pem"])
        defer { server.stop() }
        let r = try run(Paths.pinproxy, ["pin", "local.test:\(server.port)", "--connect-to", "127.0.0.1"], timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("key:       EC P-256 (CA certificate)\n"))
        let spki = try #require(r.stdout.split(separator: "\n").first { $0.hasPrefix("spki pin:  ") }).dropFirst("spki pin:  ".count)
        #expect(r.stdout.hasSuffix("""
            - host: "local.test"
              trust: "pins-only"
              pins:
                - { pin: "\(spki)", at: leaf, label: "CN=local.test" }
                # add a backup: a real backup is a key not in the served chain (a spare kept offline: '{ file: next-key.pub.pem, at: leaf, label: backup }') or a CA pin marked 'backup: true' (then any key that CA certifies for the name passes)

            """), "\(r.stdout)")
        // The same file given to --cert names a host: it is a server's, pinned at: leaf too.
        let file = try run(Paths.pinproxy, ["pin", "--cert", directory + "/local.pem"])
        #expect(file.stdout.contains("    - { pin: \"\(spki)\", at: leaf, label: \"CN=local.test\" }\n"))
    }
}
