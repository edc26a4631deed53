import Foundation
import Testing
import TestSupport

/// Real TLS servers, the real proxy process, curl and urllib: allowed chains reach the intended
/// server, forged ones are refused with a reason that curl, Python and the log all show.
@Suite(.serialized) struct PinningTests {
    @Test(arguments: [("leaf-ec256", "1.3"), ("leaf-ec256", "1.2"), ("leaf-rsa2048", "1.3"), ("leaf-rsa2048", "1.2")])
    func goodChainReachesTheServer(leaf: String, tls: String) throws {
        let server = try Upstream(leaf, name: "good \(leaf) \(tls)", tls: tls)
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC, Pins.leafRSA))))
        let r = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port)
        #expect(r.exitCode == 0, "\(r.stderr)")
        #expect(r.connectStatus == 200 && r.status == 200)
        #expect(r.body == "hello from good \(leaf) \(tls)\n")
        let allowed = try #require(proxy.waitFor("tunnel_allowed"))
        #expect(allowed["tls"] == "TLSv\(tls)")
        #expect(allowed["pin"] == (leaf == "leaf-ec256" ? Pins.leafEC : Pins.leafRSA))
        #expect(allowed["pin_position"] == "0" && allowed["chain.2.spki"] == Pins.root && allowed["chain.2.anchor"] == "true")
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        // TLS 1.2: the client's own chain was judged in the stream too; TLS 1.3 encrypts it.
        #expect(closed["verdict"] == "allowed" && closed["verify"] == (tls == "1.2" ? "probe+stream" : "probe+mirror"))
        #expect(Int(closed["bytes_down"] ?? "") ?? 0 > 1000)
        #expect(try urllib(proxy: proxy.port, host: "api.pinproxy.test", port: server.port) == "OK 200 hello from good \(leaf) \(tls)")
        #expect(proxy.stop() == 0)
    }

    /// The attack: a certificate for the pinned name from a second CA that the machine (and here
    /// also the client) trusts.
    @Test(arguments: ["1.3", "1.2"])
    func rogueCAChainIsRefused(tls: String) throws {
        let rogue = try Upstream("rogue-leaf", name: "attacker", tls: tls)
        let proxy = try ProxyProcess(config: policy(ports: [rogue.port], rules: apiRule(pinsLine(Pins.leafEC, Pins.intermediate))))
        let r = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: rogue.port)
        #expect(r.exitCode == 56)
        #expect(r.connectStatus == 502)
        #expect(r.stderr.contains("CONNECT tunnel failed, response 502"))
        #expect(!r.body.contains("attacker"))
        #expect(try urllib(proxy: proxy.port, host: "api.pinproxy.test", port: rogue.port) == "ERROR Tunnel connection failed: 502 Certificate Pin Mismatch")
        let raw = try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(rogue.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Pin Mismatch")
        #expect(header("Proxy-Status", in: raw) == "pinproxy; error=tls_certificate_error; details=\"pin_mismatch\"")
        #expect(header("Connection", in: raw) == "close")
        #expect(!raw.contains(Pins.leafEC))  // expected pins never go to the client
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused.refusal == .policy(.pinMismatch) && refused["status"] == "502" && refused["tls"] == "TLSv\(tls)")
        #expect(refused["chain.0.spki"] == Pins.rogueLeaf && refused["chain_verified"] == "true")
        #expect(refused["leaf_issuer"] == "CN=rogue root,O=pinproxy tests")
        #expect(refused["expected.0.pin"] == Pins.leafEC && refused["expected.1.pin"] == Pins.intermediate)
        #expect(refused["rule"] == "api.pinproxy.test" && refused["address"] == "127.0.0.1" && refused["sni"] == "api.pinproxy.test")
        #expect(refused["hint"]?.contains("pinproxy pin api.pinproxy.test:\(rogue.port)") == true)
        #expect(proxy.stop() == 0)
    }

    @Test func renewalWithTheSameKeyKeepsMatchingTheSPKIPin() throws {
        let server = try Upstream("leaf-ec256-renewed", name: "renewed")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule("    pins:\n      - { pin: \"\(Pins.leafEC)\", at: leaf }")))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from renewed\n")
    }

    @Test func keyRotationNeedsTheBackupPin() throws {
        let server = try Upstream("leaf-rotated", name: "rotated")
        let withBackup = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(
            "    pins:\n      - { pin: \"\(Pins.leafEC)\", at: leaf }\n      - { pin: \"\(Pins.leafRotated)\", at: leaf, label: backup key }")))
        #expect(try curl(proxy: withBackup.port, host: "api.pinproxy.test", port: server.port).body == "hello from rotated\n")
        #expect(withBackup.waitFor("tunnel_allowed")?["pin_label"] == "backup key")
        let without = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule("    pins:\n      - { pin: \"\(Pins.leafEC)\", at: leaf }")))
        #expect(try curl(proxy: without.port, host: "api.pinproxy.test", port: server.port).connectStatus == 502)
        #expect(without.waitFor("tunnel_refused")?.refusal == .policy(.pinMismatch))
    }

    @Test func caPinOnTheIntermediateAndALeafPinThatMustNotMatchACA() throws {
        let server = try Upstream("leaf-ec256", name: "good")
        let ca = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule("    pins:\n      - { pin: \"\(Pins.intermediate)\", at: ca }")))
        #expect(try curl(proxy: ca.port, host: "api.pinproxy.test", port: server.port).body == "hello from good\n")
        #expect(ca.waitFor("tunnel_allowed")?["pin_position"] == "1")
        let leafOnly = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule("    pins:\n      - { pin: \"\(Pins.intermediate)\", at: leaf }")))
        #expect(try curl(proxy: leafOnly.port, host: "api.pinproxy.test", port: server.port).connectStatus == 502)
        #expect(leafOnly.waitFor("tunnel_refused")?.refusal == .policy(.pinMismatch))
    }

    @Test func denyListedKeyIsRefusedEvenWithAMatchingPinAndWithTheBypassOn() throws {
        let server = try Upstream("leaf-ec256", name: "good")
        let until = RFC3339Text.inSeconds(3600)
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)),
                                                    extra: "deny: [\"\(Pins.intermediate)\"]\ndebug:\n  until: \"\(until)\"\n  hosts: [api.pinproxy.test]"),
                                     arguments: ["--debug-bypass"])
        let raw = try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Key Denylisted")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused.refusal == .policy(.denylistedKey) && refused["denylisted_pin"] == Pins.intermediate)
    }

    @Test func selfSignedUpstreamUnderPinsOnlyAndUnderSystemTrust() throws {
        let server = try Upstream("self-signed", name: "self", chain: "self-signed.pem")
        let resolve = "  self.pinproxy.test: 127.0.0.1"
        let pinsOnly = try ProxyProcess(config: policy(ports: [server.port], rules: "rules:\n  - host: self.pinproxy.test\n    trust: pins-only\n\(pinsLine(Pins.selfSignedCert))", resolve: resolve))
        let ok = try curl(proxy: pinsOnly.port, host: "self.pinproxy.test", port: server.port, cacert: Paths.fixture("self-signed.pem"))
        #expect(ok.body == "hello from self\n", "\(ok.stderr)")
        #expect(pinsOnly.waitFor("tunnel_allowed")?["trust"] == "pins-only")
        let system = try ProxyProcess(config: policy(ports: [server.port], rules: "rules:\n  - host: self.pinproxy.test\n    trust: system\n\(pinsLine(Pins.selfSignedCert))", resolve: resolve))
        let raw = try connectResponse(proxy: system.port, target: "self.pinproxy.test:\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Invalid")
        let refused = try #require(system.waitFor("tunnel_refused"))
        #expect(refused.refusal == .policy(.chainInvalid) && refused["detail"]?.contains("self-signed certificate") == true)
        #expect(refused["chain_verified"] == "false" && refused["chain.0.cert"] == Pins.selfSignedCert)
    }

    /// `ca-file:` replaces the trust store: with only the good root, the rogue chain does not even
    /// validate (with both roots it validates and fails on the pin).
    @Test func caFileTrustIsTheOnlyTrust() throws {
        let rogue = try Upstream("rogue-leaf", name: "attacker")
        let proxy = try ProxyProcess(config: policy(ports: [rogue.port], rules: apiRule("    trust: \"ca-file:\(Paths.fixture("good-root.pem"))\"\n" + pinsLine(Pins.rogueLeaf))))
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(rogue.port)")) == "HTTP/1.1 502 Certificate Invalid")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused.refusal == .policy(.chainInvalid) && refused["detail"]?.contains("unable to get local issuer certificate") == true)
    }

    @Test func wrongHostnameIsRefused() throws {
        let server = try Upstream("leaf-other-name", name: "other")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.intermediate))))
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(server.port)")) == "HTTP/1.1 502 Certificate Invalid")
        #expect(proxy.waitFor("tunnel_refused")?.refusal == .policy(.hostnameMismatch))
    }
}

/// `pinproxy pin HOST:PORT`: the operator's first command, against the tests' own servers.
@Suite(.serialized) struct PinHostTests {
    @Test(arguments: ["1.2", "1.3"])
    func printsTheVerifiedChainsPinsAndARule(tls: String) throws {
        let server = try Upstream("leaf-ec256", name: "pinned", tls: tls)
        let config = try temporaryFile(policy(ports: [server.port]))
        let r = try run(Paths.pinproxy, ["pin", "api.pinproxy.test:\(server.port)", "--config", config], timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("# pinproxy pin api.pinproxy.test:\(server.port): 127.0.0.1 answered with TLSv\(tls)\n"))
        #expect(r.stdout.contains("# Take these pins only on a network you trust"))
        #expect(r.stdout.contains("# The chain is valid under trust ca-file:"))
        #expect(r.stdout.contains("position:  0 (leaf)\nsubject:   CN=api.pinproxy.test,O=pinproxy tests\n"))
        #expect(r.stdout.contains("spki pin:  \(Pins.leafEC)\n"))
        #expect(r.stdout.contains("spki pin:  \(Pins.intermediate)\n"))
        #expect(r.stdout.contains("position:  2 (CA)"))  // the anchor, though the server did not send it
        #expect(r.stdout.contains("spki pin:  \(Pins.root)\n"))
        #expect(r.stdout.contains("- host: \"api.pinproxy.test\"\n  pins:\n    - { pin: \"\(Pins.leafEC)\", at: leaf"))
        #expect(r.stdout.contains("    - { pin: \"\(Pins.intermediate)\", at: ca, label: \"CN=pinproxy good intermediate,O=pinproxy tests\", backup: true }\n"))
        #expect(r.stdout.contains("    # backup: true accepts the issuing CA as the backup: any key it certifies for the name passes.\n"))
    }

    @Test func connectToAndAnUnverifiableChain() throws {
        let rogue = try Upstream("rogue-leaf", name: "attacker")
        let r = try run(Paths.pinproxy, ["pin", "api.pinproxy.test:\(rogue.port)", "--connect-to", "127.0.0.1"], timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("# WARNING: the chain does NOT validate under trust system: unable to get local issuer certificate. Shown as presented."))
        #expect(r.stdout.contains("spki pin:  \(Pins.rogueLeaf)\n"))
    }

    @Test func failuresAreCleanErrors() throws {
        let closed = try freePort()
        let r = try run(Paths.pinproxy, ["pin", "api.pinproxy.test:\(closed)", "--connect-to", "127.0.0.1"], timeout: 30)
        #expect(r.status == 1)
        #expect(r.stderr.hasPrefix("pinproxy pin: api.pinproxy.test:\(closed): 127.0.0.1:\(closed): Connection refused"))
        let bad = try run(Paths.pinproxy, ["pin", "127.1:443"], timeout: 30)
        #expect(bad.status == 1 && bad.stderr.contains("non-canonical form"))
    }
}

@Suite(.serialized) struct CheckProbeTests {
    /// `pinproxy check --probe`: every pinned host with a concrete name is probed now; an enforced
    /// rule that would refuse fails the check.
    @Test func probeReportsMatchesAndRefusals() throws {
        let good = try Upstream("leaf-ec256", name: "good")
        let rogue = try Upstream("rogue-leaf", name: "attacker", port: good.port, extra: ["--bind", "127.0.0.2"])
        let rules = """
            rules:
              - host: api.pinproxy.test
            \(pinsLine(Pins.leafEC))
              - host: x.api.pinproxy.test
            \(pinsLine(Pins.leafEC))
              - host: "**.other.test"
            \(pinsLine(Pins.leafEC))
            """
        let config = try temporaryFile(policy(ports: [good.port], rules: rules, resolve: "  api.pinproxy.test: 127.0.0.1\n  x.api.pinproxy.test: 127.0.0.2"))
        let r = try run(Paths.pinproxy, ["check", "--config", config, "--probe"], timeout: 60)
        #expect(r.status == 1, "\(r.stdout)\(r.stderr)")
        #expect(r.stdout.contains("line 16 api.pinproxy.test:\(good.port): matches (\(Pins.leafEC) at position 0) via 127.0.0.1 TLSv1.3"))
        #expect(r.stdout.contains("line 18 x.api.pinproxy.test:\(good.port): would be REFUSED: pin_mismatch via 127.0.0.2"))
        #expect(r.stdout.contains("line 20 **.other.test: skipped (a pattern names no single host"))
        _ = rogue
    }
}
