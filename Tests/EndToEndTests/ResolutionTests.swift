import Foundation
import Testing
import TestSupport

@Suite(.serialized) struct ResolutionTests {
    /// The tunnel goes to the address the probe verified. A DNS answer that changes between queries
    /// (first the genuine server, then the attacker's) must not redirect the tunnel.
    @Test func theTunnelGoesToTheProbedAddress() throws {
        let good = try Upstream("leaf-ec256", name: "genuine")
        let rogue = try Upstream("rogue-leaf", name: "attacker", port: good.port, extra: ["--bind", "127.0.0.2"])
        let dns = try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/dns.py", "api.pinproxy.test", "127.0.0.1", "127.0.0.2"])
        let proxy = try ProxyProcess(config: policy(ports: [good.port], rules: apiRule(pinsLine(Pins.leafEC)), resolve: "  {}",
                                                    proxy: "dns: { nameservers: [\"127.0.0.1:\(dns.port)\"], hosts_file: none }")
                                        .replacingOccurrences(of: "  dns: { nameservers: [], hosts_file: none }\n", with: ""))
        // One CONNECT resolves once: the probe and the tunnel both use the first answer. Were the tunnel
        // to resolve again, it would reach the attacker, who answers "hello from attacker".
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port).body == "hello from genuine\n")
        #expect(proxy.waitFor("tunnel_closed")?["address"] == "127.0.0.1")
        // The next CONNECT gets the attacker's address, probes it, and is refused there.
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port).connectStatus == 502)
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["address"] == "127.0.0.2" && refused.refusal == .policy(.pinMismatch))
        _ = rogue
    }

    /// A nameserver that never answers (a UDP socket nobody reads) is a timeout: 504 `dns_timeout`,
    /// with the default `dns_timeout`, for a CONNECT and for a plain-HTTP request alike — not a 502
    /// `dns_error` because evdns gave up its own retries first.
    @Test func aNameserverThatNeverAnswersIsADNSTimeout() throws {
        let (blackHole, port) = try boundLoopbackSocket(type: Int32(SOCK_DGRAM.rawValue))
        defer { close(blackHole) }
        let proxy = try ProxyProcess(config: policy(ports: [443], resolve: "  {}", proxy: "dns: { nameservers: [\"127.0.0.1:\(port)\"], hosts_file: none }")
                                        .replacingOccurrences(of: "  dns: { nameservers: [], hosts_file: none }\n", with: ""))
        let response = try connectResponse(proxy: proxy.port, target: "silent.pinproxy.test:443")
        #expect(statusLine(response) == "HTTP/1.1 504 DNS Timeout")
        #expect(header("Proxy-Status", in: response)?.hasPrefix("pinproxy; error=dns_timeout") == true, "\(response)")
        #expect(proxy.waitFor("tunnel_refused")?.refusal == .network(.dnsTimeout))
        let plain = try rawExchange(port: proxy.port, send: Array("GET http://silent.pinproxy.test/ HTTP/1.1\r\nConnection: close\r\n\r\n".utf8))
        #expect(statusLine(plain) == "HTTP/1.1 504 DNS Timeout", "\(plain)")
    }

    @Test func aRefusedConnectionMovesOnToTheNextAddress() throws {
        let good = try Upstream("leaf-ec256", name: "second")
        let proxy = try ProxyProcess(config: policy(ports: [good.port], rules: apiRule(pinsLine(Pins.leafEC)),
                                                    resolve: "  api.pinproxy.test: [127.0.0.3, 127.0.0.1]"))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port).body == "hello from second\n")
        #expect(proxy.waitFor("tunnel_allowed")?["address"] == "127.0.0.1")
    }

    /// A verification failure never falls through to the next address.
    @Test func aRogueFirstAddressIsRefusedWithoutFallingThrough() throws {
        let good = try Upstream("leaf-ec256", name: "genuine")
        let rogue = try Upstream("rogue-leaf", name: "attacker", port: good.port, extra: ["--bind", "127.0.0.2"])
        let proxy = try ProxyProcess(config: policy(ports: [good.port], rules: apiRule(pinsLine(Pins.leafEC)),
                                                    resolve: "  api.pinproxy.test: [127.0.0.2, 127.0.0.1]"))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port).connectStatus == 502)
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["address"] == "127.0.0.2" && refused.refusal == .policy(.pinMismatch))
        _ = rogue
    }

    /// A server that wants a client certificate aborts after sending its chain (TLS 1.2) or after
    /// the handshake (TLS 1.3); pinproxy judges it on the chain it sent.
    @Test(arguments: ["1.2", "1.3"])
    func aServerRequiringAClientCertificateIsJudgedOnItsChain(tls: String) throws {
        let good = try Upstream("leaf-ec256", name: "mtls", tls: tls, mode: "clientcert")
        let proxy = try ProxyProcess(config: policy(ports: [good.port], rules: apiRule(pinsLine(Pins.leafEC))))
        let raw = try rawResponseHead(port: proxy.port, send: Array("CONNECT api.pinproxy.test:\(good.port) HTTP/1.1\r\n\r\n".utf8))
        #expect(raw.hasPrefix("HTTP/1.1 200 Connection established"))
        #expect(proxy.waitFor("tunnel_allowed")?["pin"] == Pins.leafEC)

        let rogue = try Upstream("rogue-leaf", name: "mtls-rogue", tls: tls, mode: "clientcert")
        let rules = "rules:\n  - host: api.pinproxy.test\n\(pinsLine(Pins.leafEC))"
        let second = try ProxyProcess(config: policy(ports: [rogue.port], rules: rules))
        #expect(statusLine(try connectResponse(proxy: second.port, target: "api.pinproxy.test:\(rogue.port)")) == "HTTP/1.1 502 Certificate Pin Mismatch")
    }
}

@Suite(.serialized) struct SharedProbeTests {
    /// Concurrent CONNECTs to the same target share one probe; each still gets its own verdict line.
    /// (On one worker: probes in flight are shared per worker.)
    @Test func concurrentConnectsShareOneProbe() throws {
        let slow = try Upstream("leaf-ec256", name: "slow", mode: "slow")
        let proxy = try ProxyProcess(config: policy(ports: [slow.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "stats_interval: 200ms\nworkers: 1"))
        let clients = try (0..<3).map { _ in try OpenConnection(port: proxy.port, send: "CONNECT api.pinproxy.test:\(slow.port) HTTP/1.1\r\n\r\n") }
        #expect(proxy.waitFor("tunnel_allowed") { _ in proxy.events("tunnel_allowed").count == 3 } != nil)
        #expect(proxy.waitFor("stats") { $0["probes"] == "1" && $0["allowed"] == "3" } != nil, "\(proxy.events("stats").last ?? [:])")
        clients.forEach { $0.close() }
    }

    /// Shown as skipped (not passed) on a machine whose loopback has no IPv6.
    @Test(.enabled(if: FileManager.default.contents(atPath: "/proc/net/if_inet6").map { !$0.isEmpty } ?? false, "no IPv6 loopback"))
    func listensOnIPv6Loopback() throws {
        let server = try Upstream("leaf-ec256", name: "v6")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC))), listen: ["[::1]:0"])
        #expect(proxy.waitFor("started")?["listen"]?.hasPrefix("[::1]:") == true)
        let r = try run("/usr/bin/curl", ["-sS", "--max-time", "10", "--proxy", "http://[::1]:\(proxy.port)", "--cacert", Paths.fixture("both-roots.pem"),
                                          "https://api.pinproxy.test:\(server.port)/"])
        #expect(r.stdout == "hello from v6\n", "\(r.stderr)")
    }
}

@Suite(.serialized) struct ReloadTests {
    /// SIGHUP swaps the policy; a CONNECT whose probe is in flight keeps the snapshot it arrived
    /// under, the next CONNECT gets the new one, and an invalid file changes nothing.
    @Test func eachConnectIsJudgedByThePolicyInForceWhenItArrived() throws {
        let slow = try Upstream("leaf-ec256", name: "slow", mode: "slow")  // its handshake starts after 1 s
        let proxy = try ProxyProcess(config: policy(ports: [slow.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "stats_interval: 50ms"))
        let first = try OpenConnection(port: proxy.port, send: "CONNECT api.pinproxy.test:\(slow.port) HTTP/1.1\r\n\r\n")
        // The CONNECT has arrived (it holds a tunnel slot); its probe waits for the slow handshake.
        #expect(proxy.waitFor("stats") { $0["tunnels"] == "1" } != nil)
        try proxy.reload(policy(ports: [slow.port], rules: apiRule(pinsLine(Pins.backup))))
        #expect(proxy.waitFor("policy_reloaded") != nil)
        #expect(proxy.waitFor("tunnel_allowed")?["pin"] == Pins.leafEC)  // judged by the old policy
        // ... and, the reload having come while it was set up, judged again at once under the new one
        let reloaded = try #require(proxy.waitFor("tunnel_closed"))
        #expect(reloaded["close_reason"] == "policy_reload" && reloaded["reason"] == "pin_mismatch")
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(slow.port)")) == "HTTP/1.1 502 Certificate Pin Mismatch")
        first.close()

        try proxy.reload("version: 1\nrules: [\n")
        let failed = try #require(proxy.waitFor("policy_reload_failed"))
        #expect(failed["detail"]?.contains("not valid YAML") == true)
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(slow.port)")) == "HTTP/1.1 502 Certificate Pin Mismatch")
        #expect(proxy.events("tunnel_refused", count: 2).count == 2)
    }
}

/// A reload re-judges the tunnels already open, on the chains already verified for them.
@Suite(.serialized) struct ReloadUnderLoadTests {
    /// 20 tunnels stream across three SIGHUPs: one that changes an unrelated rule and one with a
    /// broken file leave every byte intact; one that deny-lists the key behind 5 of them closes
    /// exactly those 5 (`close_reason=policy_reload reason=denylisted_key`), the other 15 finish.
    @Test func reloadClosesOnlyTheTunnelsTheNewPolicyRefuses() throws {
        let ec = try Upstream("leaf-ec256", name: "ec", tls: "1.2", mode: "bulk", extra: ["--bulk-bytes", String(4 << 20)])
        let rsa = try Upstream("leaf-rsa2048", name: "rsa", tls: "1.2", mode: "bulk", extra: ["--bulk-bytes", String(4 << 20)])
        func rules(_ extra: String = "") -> String {
            "rules:\n  - host: api.pinproxy.test\n    ports: [\(ec.port)]\n\(pinsLine(Pins.leafEC))\n"
                + "  - host: api.pinproxy.test\n    ports: [\(rsa.port)]\n\(pinsLine(Pins.leafRSA))\n" + extra
        }
        let ports = [ec.port, rsa.port]
        let proxy = try ProxyProcess(config: policy(ports: ports, rules: rules()))
        let targets = Array(repeating: "api.pinproxy.test:\(ec.port)", count: 5) + Array(repeating: "api.pinproxy.test:\(rsa.port)", count: 15)
        let streams = try BackgroundRun("/usr/bin/env", ["python3", "\(Paths.scripts)/clients.py", "streams", String(proxy.port),
                                                             Paths.fixture("both-roots.pem"), "6"] + targets)
        #expect(proxy.events("tunnel_allowed", count: 20).count == 20)

        // (a) an unrelated rule added
        try proxy.reload(policy(ports: ports, rules: rules("  - host: other.pinproxy.test\n    pins: [\"\(Pins.backup)\"]\n")))
        let unrelated = try #require(proxy.waitFor("policy_reloaded"))
        #expect(unrelated["tunnels_checked"] == "20" && unrelated["tunnels_closed"] == "0")
        #expect(unrelated["changes"] == "rules +1 -0 ~0 (+other.pinproxy.test); pins +1 -0; deny +0 -0")

        // (b) a broken file
        try proxy.reload("version: 1\nrules: [\n")
        #expect(proxy.waitFor("policy_reload_failed") != nil)

        // (c) the EC key deny-listed
        try proxy.reload(policy(ports: ports, rules: rules(), extra: "deny: [\"\(Pins.leafEC)\"]"))
        let denied = try #require(proxy.waitFor("policy_reloaded") { $0["changes"]?.contains("deny +1") == true })
        #expect(denied["tunnels_closed"] == "5")

        let results = streams.output(timeout: 40).split(separator: "\n").map(String.init)
        #expect(results.count == 20, "\(results)")
        let complete = results.filter { $0.hasSuffix(" complete") }, cut = results.filter { $0.hasSuffix(" cut") }
        #expect(complete.count == 15 && complete.allSatisfy { $0.hasPrefix("api.pinproxy.test:\(rsa.port) \(4 << 20) ") }, "\(results)")
        #expect(cut.count == 5 && cut.allSatisfy { $0.hasPrefix("api.pinproxy.test:\(ec.port) ") }, "\(results)")
        let closed = proxy.events("tunnel_closed", count: 20)
        let byReload = closed.filter { $0["close_reason"] == "policy_reload" }
        #expect(byReload.count == 5 && byReload.allSatisfy { $0["reason"] == "denylisted_key" && $0["port"] == String(ec.port) && $0["level"] == "warning" })
        #expect(closed.filter { $0["close_reason"] == "eof" }.count == 15)
    }

    /// A key log added by a reload cannot be followed without a restart: said so, naming the key.
    @Test func aSettingOnlyARestartAppliesIsNamed() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443]))
        let directory = try memoryDirectory()
        try proxy.reload(policy(ports: [443], proxy: "keylog: { path: \(directory)/keylog }"))
        let line = try #require(proxy.waitFor("restart_required"))
        #expect(line["setting"] == "proxy.keylog" && line["level"] == "warning")
        #expect(proxy.waitFor("policy_reloaded") != nil)
    }
}
