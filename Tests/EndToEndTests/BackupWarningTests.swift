import Foundation
import Testing
import TestSupport

/// Warnings that mean something: the rule `pinproxy pin` recommends (the leaf and its issuing CA,
/// marked `backup: true`) is silent; the same rule without the mark is said once per rule a day
/// (and by `check` as `no_real_backup`), never once per CONNECT. A TLS version other than the
/// probe's is a warning only when a client that offered TLS 1.3 got less from a 1.3 server.
@Suite(.serialized) struct BackupWarningTests {
    static func rule(marked: Bool) -> String {
        apiRule("    pins:\n      - { pin: \"\(Pins.leafEC)\", at: leaf }\n      - { pin: \"\(Pins.intermediate)\", at: ca, label: issuing CA\(marked ? ", backup: true" : "") }")
    }

    static func proxy(_ server: Upstream, marked: Bool) throws -> ProxyProcess {
        try ProxyProcess(config: policy(ports: [server.port], rules: rule(marked: marked))
            .replacingOccurrences(of: "require_backup: off", with: "require_backup: warn"))
    }

    static func tunnels(_ proxy: ProxyProcess, _ server: Upstream, count: Int) throws {
        for _ in 0..<count {
            #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from leaf-ec256\n")
        }
        #expect(proxy.events("tunnel_closed", count: count).count == count)
    }

    @Test func anUnmarkedCAPinIsSaidOnceNotPerConnect() throws {
        let server = try Upstream("leaf-ec256")
        let proxy = try Self.proxy(server, marked: false)
        let lint = try #require(proxy.waitFor("policy_warning"))
        #expect(lint["code"] == "no_real_backup" && lint["rule_line"] == "15")
        try Self.tunnels(proxy, server, count: 3)
        let warnings = proxy.events("tunnel_warning").filter { $0["reason"] == "no_real_backup" }
        #expect(warnings.count == 1)
        #expect(warnings.first?["level"] == "warning" && warnings.first?["rule"] == "api.pinproxy.test")
        #expect(warnings.first?["detail"] == "every pin of the rule matched this one chain, so none of them is a real backup (said once a day per rule)")
        #expect(warnings.first?["hint"] == "add a backup to the rule at line 15: a real backup is a key not in the served chain (a spare kept offline: '{ file: next-key.pub.pem, at: leaf, label: backup }') or a CA pin marked 'backup: true' (then any key that CA certifies for the name passes)")
        #expect(proxy.stop() == 0)
    }

    @Test func theRecommendedRuleIsSilent() throws {
        let server = try Upstream("leaf-ec256")
        let proxy = try Self.proxy(server, marked: true)
        try Self.tunnels(proxy, server, count: 3)
        #expect(proxy.events("tunnel_allowed").count == 3)
        #expect(proxy.events("tunnel_warning").isEmpty && proxy.events("policy_warning").isEmpty)
        #expect(proxy.stop() == 0)
    }

    /// `curl --tls-max 1.2` against a server that speaks 1.3: what the client asked for, at info.
    @Test func aClientThatDidNotOfferTLS13IsNoWarning() throws {
        let server = try Upstream("leaf-ec256")
        let proxy = try Self.proxy(server, marked: true)
        let r = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port, extra: ["--tls-max", "1.2"])
        #expect(r.body == "hello from leaf-ec256\n")
        let line = try #require(proxy.waitFor("tunnel_warning") { $0["reason"] == "tls_version_changed" })
        #expect(line["level"] == "info" && line["tls"] == "TLSv1.2" && line["probe_tls"] == "TLSv1.3")
        #expect(line["detail"] == "the tunnel negotiated TLSv1.2, the probe TLSv1.3: the client did not offer TLS 1.3")
        #expect(proxy.events("tunnel_closed", count: 1).count == 1)
        #expect(proxy.lines.filter { $0["level"] == "warning" }.isEmpty)
        #expect(proxy.stop() == 0)
    }
}

/// A name that does not exist, in Linux words rather than libevent's BSD ones, and a hint that says
/// a client's own `curl --resolve` does not reach through a proxy.
@Suite(.serialized) struct DNSRefusalWordingTests {
    @Test func aMissingNameSaysSoAndPointsAtResolve() throws {
        let server = try Upstream("leaf-ec256")
        let dns = try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/dns.py", "api.pinproxy.test", "127.0.0.1"])
        let proxy = try ProxyProcess(config: policy(ports: [server.port], resolve: "  {}",
                                                    proxy: "dns: { nameservers: [\"127.0.0.1:\(dns.port)\"], hosts_file: none }")
                                        .replacingOccurrences(of: "  dns: { nameservers: [], hosts_file: none }\n", with: ""))
        // curl's own mapping is ignored through a proxy: the CONNECT carries the name.
        let r = try curl(proxy: proxy.port, host: "nowhere.pinproxy.test", port: server.port,
                         extra: ["--resolve", "nowhere.pinproxy.test:\(server.port):127.0.0.1"])
        #expect(r.connectStatus == 502)
        let line = try #require(proxy.waitFor("tunnel_refused"))
        #expect(line.refusal == .network(.dnsError) && line["detail"] == "nowhere.pinproxy.test did not resolve: no such name, or no address for it, in DNS")
        #expect(line["hint"] == "check proxy.dns (nameservers, hosts_file) or map the name in the policy's resolve: (pinproxy resolves every CONNECT name itself; a client's own mapping, such as curl --resolve, does not reach through a proxy)")
        #expect(proxy.stop() == 0)
    }
}
