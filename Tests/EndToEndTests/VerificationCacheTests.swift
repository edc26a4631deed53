import Foundation
import Testing
import TestSupport

/// The verification cache: a CONNECT within `verify_cache_ttl` of a probe that saw a chain is
/// judged on that chain without a handshake of its own — facts, never verdicts: each CONNECT still
/// validates and decides under the policy in force, and the stream check still judges the tunnel.
@Suite(.serialized) struct VerificationCacheTests {
    static let apiPinned = apiRule(pinsLine(Pins.leafEC))

    /// One worker: the cache is per worker (`WorkerTests` shows two workers probing once each).
    @Test func aSecondConnectReusesTheProbesChain() throws {
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.2")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.apiPinned, proxy: "stats_interval: 100ms\nworkers: 1"))
        for _ in 0..<3 { #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from good\n") }
        let allowed = proxy.events("tunnel_allowed", count: 3)
        #expect(allowed.map { $0["cached"] ?? "?" } == ["false", "true", "true"])
        #expect(proxy.waitFor("stats") { $0["probes"] == "1" && $0["probe_cache_hits"] == "2" } != nil)
        #expect(proxy.events("tunnel_closed", count: 3).allSatisfy { $0["verify"] == "probe+stream" })
    }

    @Test func aTTLOfZeroProbesEveryConnect() throws {
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.2")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.apiPinned, proxy: "verify_cache_ttl: 0s"))
        for _ in 0..<2 { #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from good\n") }
        #expect(proxy.events("tunnel_allowed", count: 2).map { $0["cached"] ?? "?" } == ["false", "false"])
    }

    /// A cached chain is judged by the policy in force: a reload that removes its pin refuses it
    /// at once, without a new handshake.
    @Test func aCachedChainIsJudgedByTheReloadedPolicy() throws {
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.2")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.apiPinned, proxy: "workers: 1"))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from good\n")
        try policy(ports: [server.port], rules: apiRule(pinsLine(Pins.backup)), proxy: "workers: 1").write(toFile: proxy.configPath, atomically: true, encoding: .utf8)
        proxy.signal(SIGHUP)
        #expect(proxy.waitFor("policy_reloaded") != nil)
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(server.port)")) == "HTTP/1.1 502 Certificate Pin Mismatch")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["cached"] == "true" && refused.refusal == .policy(.pinMismatch))
    }

    /// A warm cache never weakens the stream check: the selective attacker's rogue chain in the
    /// tunnel is refused whether the CONNECT probed or not.
    @Test func theStreamCheckStillJudgesTheTunnelOnACacheHit() throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.2")
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.2")
        let attacker = try Replayer(genuine: genuine.port, abort: "none", then: rogue.port)
        let proxy = try ProxyProcess(config: policy(ports: [attacker.port], rules: Self.apiPinned, proxy: "workers: 1"))
        for _ in 0..<2 {
            let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: attacker.port)
            #expect(result.connectStatus == 200 && result.exitCode == 35 && !result.body.contains("rogue"))
        }
        let refused = proxy.events("tunnel_refused", count: 2)
        #expect(refused.count == 2 && refused.allSatisfy { $0["stage"] == "stream" && $0.refusal == .stream(.policy(.pinMismatch)) })
        #expect(proxy.events("tunnel_allowed", count: 2).map { $0["cached"] ?? "?" } == ["false", "true"])
    }
}
