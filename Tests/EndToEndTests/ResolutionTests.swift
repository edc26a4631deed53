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
        #expect(refused["address"] == "127.0.0.2" && refused["reason"] == "pin_mismatch")
        _ = rogue
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
        #expect(refused["address"] == "127.0.0.2" && refused["reason"] == "pin_mismatch")
        _ = rogue
    }

    /// A server that wants a client certificate aborts after sending its chain (TLS 1.2) or after
    /// the handshake (TLS 1.3); pinproxy judges it on the chain it sent.
    @Test(arguments: ["1.2", "1.3"])
    func aServerRequiringAClientCertificateIsJudgedOnItsChain(tls: String) throws {
        let good = try Upstream("leaf-ec256", name: "mtls", tls: tls, mode: "clientcert")
        let proxy = try ProxyProcess(config: policy(ports: [good.port], rules: apiRule(pinsLine(Pins.leafEC))))
        let raw = try rawExchange(port: proxy.port, send: Array("CONNECT api.pinproxy.test:\(good.port) HTTP/1.1\r\n\r\n".utf8), timeout: 1)
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
    @Test func concurrentConnectsShareOneProbe() throws {
        let slow = try Upstream("leaf-ec256", name: "slow", mode: "slow")
        let proxy = try ProxyProcess(config: policy(ports: [slow.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "stats_interval: 200ms"))
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
        let proxy = try ProxyProcess(config: policy(ports: [slow.port], rules: apiRule(pinsLine(Pins.leafEC))))
        let first = try OpenConnection(port: proxy.port, send: "CONNECT api.pinproxy.test:\(slow.port) HTTP/1.1\r\n\r\n")
        usleep(300_000)  // the CONNECT has arrived; its probe waits for the slow handshake
        try policy(ports: [slow.port], rules: apiRule(pinsLine(Pins.backup))).write(toFile: proxy.configPath, atomically: true, encoding: .utf8)
        proxy.signal(SIGHUP)
        #expect(proxy.waitFor("policy_reloaded") != nil)
        #expect(proxy.waitFor("tunnel_allowed")?["pin"] == Pins.leafEC)  // judged by the old policy
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(slow.port)")) == "HTTP/1.1 502 Certificate Pin Mismatch")
        first.close()

        try "version: 1\nrules: [\n".write(toFile: proxy.configPath, atomically: true, encoding: .utf8)
        proxy.signal(SIGHUP)
        let failed = try #require(proxy.waitFor("policy_reload_failed"))
        #expect(failed["detail"]?.contains("not valid YAML") == true)
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(slow.port)")) == "HTTP/1.1 502 Certificate Pin Mismatch")
        #expect(proxy.events("tunnel_refused", count: 2).count == 2)
    }
}
