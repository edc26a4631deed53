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

    /// A reload forgets every cached chain: the next CONNECT probes again and is judged by the
    /// policy in force (a reload that removes its pin refuses it).
    @Test func aReloadForgetsTheCachedChains() throws {
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.2")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.apiPinned, proxy: "workers: 1"))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from good\n")
        try proxy.reload(policy(ports: [server.port], rules: apiRule(pinsLine(Pins.backup)), proxy: "workers: 1"))
        #expect(proxy.waitFor("policy_reloaded") != nil)
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(server.port)")) == "HTTP/1.1 502 Certificate Pin Mismatch")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["cached"] == "false" && refused.refusal == .policy(.pinMismatch))
    }

    /// No refusal is cached: after the stream check caught the selective attacker's rogue chain in
    /// the tunnel, the next CONNECT probes again (and meets the rogue server there).
    @Test func aCaughtTunnelLeavesNoCachedChain() throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.2")
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.2")
        let attacker = try Replayer(genuine: genuine.port, abort: "none", then: rogue.port)
        let proxy = try ProxyProcess(config: policy(ports: [attacker.port], rules: Self.apiPinned, proxy: "workers: 1"))
        let first = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: attacker.port)
        #expect(first.connectStatus == 200 && first.exitCode == 35 && !first.body.contains("rogue"))
        let second = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: attacker.port)
        #expect(second.connectStatus == 502 && !second.body.contains("rogue"))
        let refused = proxy.events("tunnel_refused", count: 2)
        #expect(refused.count == 2 && refused.first?["stage"] == "stream" && refused.first?.refusal == .stream(.policy(.pinMismatch)))
        #expect(refused.last?["stage"] == nil && refused.last?.refusal == .policy(.pinMismatch) && refused.last?["cached"] == "false")
        #expect(proxy.events("tunnel_allowed", count: 2).map { $0["cached"] ?? "?" } == ["false"])
    }

    /// Workers agree: a refusal on one worker drops the chain every worker cached for that
    /// host:port. After a legitimate key change to a key not yet pinned, the first CONNECT is
    /// admitted on its worker's cached chain and refused when its mirror meets the new chain
    /// (the same chain again on a confirming look: no incident); every CONNECT after it, on either
    /// worker, probes afresh and gets a clean 502 at the probe, never the other worker's cached
    /// verdict (which used to end in a mirror's refusal, and before the incident rule in a quarantine).
    @Test func aRefusalOnOneWorkerDropsEveryWorkersCachedChain() throws {
        var server = try Upstream("leaf-ec256", name: "good")
        let port = server.port
        let proxy = try ProxyProcess(config: policy(ports: [port], rules: Self.apiPinned, proxy: "workers: 2"))
        for _ in 0..<2 { #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: port).body == "hello from good\n") }
        #expect(proxy.events("tunnel_allowed", count: 2).map { "\($0["worker"] ?? "?")/\($0["cached"] ?? "?")" } == ["0/false", "1/false"])

        server.stop()
        server = try Upstream("leaf-rotated", name: "rotated", port: port)
        defer { server.stop() }
        let first = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: port)
        #expect(first.connectStatus == 200 && !first.body.contains("rotated"))
        for _ in 0..<3 { #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: port).connectStatus == 502) }
        let refused = proxy.events("tunnel_refused", count: 4)
        #expect(refused.first?["stage"] == "mirror" && refused.first?.refusal == .stream(.policy(.pinMismatch)), "\(refused.first ?? [:])")
        // Round robin: the second and fourth land on the worker that did not refuse the first.
        #expect(refused.dropFirst().map { "\($0["cached"] ?? "?")/\($0["stage"] ?? "probe")/\($0["reason"] ?? "?")" }
                == Array(repeating: "false/probe/pin_mismatch", count: 3), "\(refused)")
        #expect(proxy.waitFor("confirming_look")?["outcome"] == "same_chain")
        #expect(proxy.events("interception_suspected").isEmpty)
    }
}
