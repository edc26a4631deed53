import Foundation
import Testing
import TestSupport

@Suite(.serialized) struct PolicyModeTests {
    @Test func unpinnedHostsUnderAllowAndDeny() throws {
        let server = try Upstream("leaf-ec256", name: "free")
        let allow = try ProxyProcess(config: policy(ports: [server.port], unpinned: "allow"))
        #expect(try curl(proxy: allow.port, host: "api.pinproxy.test", port: server.port).body == "hello from free\n")
        let line = try #require(allow.waitFor("tunnel_unpinned"))
        #expect(line["reason"] == "no_rule" && line["address"] == "127.0.0.1" && line["tls"] == nil)
        #expect(allow.waitFor("tunnel_closed")?["verify"] == "unpinned")
        #expect(allow.events("tunnel_allowed").isEmpty)  // no probe happened

        let deny = try ProxyProcess(config: policy(ports: [server.port], unpinned: "deny"))
        let raw = try connectResponse(proxy: deny.port, target: "api.pinproxy.test:\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 403 Forbidden by Pin Policy")
        #expect(header("Proxy-Status", in: raw) == "pinproxy; error=http_request_denied; details=\"unpinned_denied\"")
        #expect(raw.hasSuffix("pinproxy refused the tunnel to api.pinproxy.test: unpinned_denied (no rule pins api.pinproxy.test and defaults.unpinned is deny)\n"))
        #expect(try urllib(proxy: deny.port, host: "api.pinproxy.test", port: server.port) == "ERROR Tunnel connection failed: 403 Forbidden by Pin Policy")
        #expect(deny.waitFor("tunnel_refused")?.refusal == .policy(.unpinnedDenied))
    }

    @Test func unpinnedRuleExcludesANameFromABroaderRule() throws {
        let server = try Upstream("leaf-ec256", name: "excluded")
        let rules = "rules:\n  - host: \"**.pinproxy.test\"\n\(pinsLine(Pins.backup))\n  - host: api.pinproxy.test\n    mode: unpinned"
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: rules, unpinned: "deny"))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from excluded\n")
        let line = try #require(proxy.waitFor("tunnel_unpinned"))
        #expect(line["reason"] == "rule_unpinned" && line["rule_line"] == "17")
        #expect(proxy.waitFor("policy_warning")?["code"] == "weaker_rule_shadows_enforced")
    }

    @Test func reportModeTunnelsAndLogsWouldRefuse() throws {
        let rogue = try Upstream("rogue-leaf", name: "audited")
        let proxy = try ProxyProcess(config: policy(ports: [rogue.port], rules: apiRule("    mode: report\n" + pinsLine(Pins.leafEC))))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: rogue.port).body == "hello from audited\n")
        let line = try #require(proxy.waitFor("tunnel_bypassed"))
        #expect(line["level"] == "warning" && line["would_refuse"] == "true" && line.refusal == .policy(.pinMismatch))
        #expect(line["bypass"] == "report_mode" && line["chain.0.spki"] == Pins.rogueLeaf && line["expected.0.pin"] == Pins.leafEC)
        #expect(proxy.waitFor("tunnel_closed")?["verdict"] == "bypassed")
    }

    @Test func debugBypassNeedsTheFlag() throws {
        let rogue = try Upstream("rogue-leaf", name: "debugged")
        let debug = "debug:\n  until: \"\(RFC3339Text.inSeconds(3600))\"\n  hosts: [\"**.pinproxy.test\"]"
        let config = policy(ports: [rogue.port], rules: apiRule(pinsLine(Pins.leafEC)), extra: debug)

        let inert = try ProxyProcess(config: config)
        #expect(inert.waitFor("started")?["debug_bypass"] == "inert_without_flag")
        #expect(inert.waitFor("debug_bypass_inert") != nil)
        #expect(try curl(proxy: inert.port, host: "api.pinproxy.test", port: rogue.port).connectStatus == 502)

        let active = try ProxyProcess(config: config, arguments: ["--debug-bypass"])
        #expect(active.waitFor("started")?["debug_bypass"] == "active")
        #expect(active.waitFor("debug_bypass_active")?["level"] == "warning")
        #expect(try curl(proxy: active.port, host: "api.pinproxy.test", port: rogue.port).body == "hello from debugged\n")
        let line = try #require(active.waitFor("tunnel_bypassed"))
        #expect(line["bypass"] == "debug_bypass" && line["would_refuse"] == "true" && line.refusal == .policy(.pinMismatch))
    }

    @Test func anExpiredDebugSectionBypassesNothing() throws {
        let rogue = try Upstream("rogue-leaf", name: "late")
        let debug = "debug:\n  until: \"2020-01-01T00:00:00Z\"\n  hosts: [api.pinproxy.test]"
        let proxy = try ProxyProcess(config: policy(ports: [rogue.port], rules: apiRule(pinsLine(Pins.leafEC)), extra: debug), arguments: ["--debug-bypass"])
        #expect(proxy.waitFor("started")?["debug_bypass"] == "expired")
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: rogue.port).connectStatus == 502)
        #expect(proxy.waitFor("tunnel_refused")?.refusal == .policy(.pinMismatch))
    }

    /// A tunnel the bypass let through is closed when `until` passes, even if it is busy or idle.
    @Test func bypassedTunnelsCloseWhenTheBypassEnds() throws {
        let bypassEnds = Date().addingTimeInterval(4)
        let debug = "debug:\n  until: \"\(RFC3339Text.inSeconds(4))\"\n  hosts: [api.pinproxy.test]"
        let server = try Upstream("rogue-leaf", name: "held")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)), extra: debug), arguments: ["--debug-bypass"])
        // Open the tunnel and keep it open without sending anything: only the bypass end closes it.
        let response = try rawExchange(port: proxy.port, send: Array("CONNECT api.pinproxy.test:\(server.port) HTTP/1.1\r\n\r\n".utf8), timeout: 15)
        #expect(response == "HTTP/1.1 200 Connection established\r\n\r\n")
        let closed = try #require(proxy.waitFor("tunnel_closed", timeout: 60))
        #expect(closed["close_reason"] == "debug_bypass_expired" && closed["verdict"] == "bypassed")
        // Not before `until` (written to the second, so up to a second early); how long after it
        // depends on the machine, and the close reason already says what closed it.
        #expect(Date() > bypassEnds.addingTimeInterval(-1))
    }
}
