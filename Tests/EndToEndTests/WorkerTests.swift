import Foundation
import Testing
import TestSupport

/// `proxy.workers`: the supervisor hands connections to the workers in turn (so with two workers the
/// first CONNECT lands on worker 0, the second on worker 1, and so on); every decision line names its
/// `worker`. What the workers share — `max_tunnels`, the TLS 1.2 resumption ledger, the key log — must
/// behave as one proxy's.
@Suite(.serialized) struct WorkerTests {
    static let two = "workers: 2"

    /// A CONNECT held open (its tunnel counts against max_tunnels) until `close()`.
    static func hold(_ proxy: ProxyProcess, _ target: String) throws -> OpenConnection {
        try OpenConnection(port: proxy.port, send: "CONNECT \(target) HTTP/1.1\r\n\r\n")
    }

    /// 40 tunnels at once with two workers: 20 decided on each (round robin), all succeed, and the
    /// merged `stats` count them all and say `workers=2`.
    @Test func manyConcurrentTunnelsAreSpreadOverBothWorkers() throws {
        let server = try Upstream("leaf-ec256", name: "spread")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)),
                                                    proxy: "\(Self.two)\nstats_interval: 250ms"))
        var environment = ProcessInfo.processInfo.environment
        environment["HTTPS_PROXY"] = "http://127.0.0.1:\(proxy.port)"
        let r = try run("/usr/bin/env", ["python3", "\(Paths.scripts)/clients.py", "many", "40", "https://api.pinproxy.test:\(server.port)/",
                                         Paths.fixture("both-roots.pem")], environment: environment, timeout: 120)
        #expect(r.stdout.hasPrefix("OK 40 0\n"), "\(r.stdout)\(r.stderr)")
        let allowed = proxy.events("tunnel_allowed", count: 40)
        #expect(allowed.filter { $0["worker"] == "0" }.count == 20 && allowed.filter { $0["worker"] == "1" }.count == 20,
                "\(allowed.map { $0["worker"] ?? "?" })")
        let settled = proxy.waitFor("stats", timeout: 20) {
            $0["accepted"] == "40" && $0["allowed"] == "40" && $0["closed"] == "40" && $0["active_sessions"] == "0"
                && $0["live_session_objects"] == "0" && $0["tunnels"] == "0" && $0["workers"] == "2"
        }
        #expect(settled != nil, "\(proxy.events("stats").last ?? [:])")
        #expect(proxy.stop() == 0)
    }

    /// `max_tunnels: 4` with two workers: four tunnels held, two on each worker, and the fifth
    /// CONNECT is a 503 whichever worker takes it; once one ends, a CONNECT fits again.
    @Test func maxTunnelsIsOneBudgetAcrossWorkers() throws {
        let server = try Upstream("leaf-ec256", name: "budget")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)),
                                                    proxy: "\(Self.two)\nmax_tunnels: 4"))
        // Unpinned tunnels: a pinned one still without its client's hello would give its slot up.
        let target = "127.0.0.1:\(server.port)"
        var held: [OpenConnection] = []
        defer { held.forEach { $0.close() } }
        for _ in 0..<4 { held.append(try Self.hold(proxy, target)) }
        let allowed = proxy.events("tunnel_unpinned", count: 4)
        #expect(allowed.map { $0["worker"] ?? "?" }.sorted() == ["0", "0", "1", "1"], "\(allowed)")
        // The fifth and the sixth land on different workers: both are over the one budget.
        for _ in 0..<2 {
            let response = try connectResponse(proxy: proxy.port, target: target)
            #expect(statusLine(response) == "HTTP/1.1 503 Too Many Tunnels")
            #expect(header("Proxy-Status", in: response) == "pinproxy; error=connection_limit_reached; details=\"connection_limit_reached\"")
        }
        let refused = proxy.events("tunnel_refused", count: 2)
        #expect(refused.count == 2 && refused.allSatisfy { $0.refusal == .network(.connectionLimitReached) })

        held.removeFirst().close()
        #expect(proxy.waitFor("tunnel_closed") != nil)
        held.append(try Self.hold(proxy, target))
        #expect(proxy.events("tunnel_unpinned", count: 5).count == 5)
    }

    /// A reload under load with two workers: 12 tunnels stream (six on each worker), the EC key is
    /// deny-listed, exactly its 4 tunnels close, and `policy_reloaded` carries the sums over both
    /// workers (checked 12, closed 4).
    @Test func aReloadUnderLoadClosesExactlyTheDenyListedTunnelsOnBothWorkers() throws {
        let ec = try Upstream("leaf-ec256", name: "ec", tls: "1.2", mode: "bulk", extra: ["--bulk-bytes", String(4 << 20)])
        let rsa = try Upstream("leaf-rsa2048", name: "rsa", tls: "1.2", mode: "bulk", extra: ["--bulk-bytes", String(4 << 20)])
        let rules = "rules:\n  - host: api.pinproxy.test\n    ports: [\(ec.port)]\n\(pinsLine(Pins.leafEC))\n"
            + "  - host: api.pinproxy.test\n    ports: [\(rsa.port)]\n\(pinsLine(Pins.leafRSA))\n"
        let ports = [ec.port, rsa.port]
        let proxy = try ProxyProcess(config: policy(ports: ports, rules: rules, proxy: Self.two))
        let targets = Array(repeating: "api.pinproxy.test:\(ec.port)", count: 4) + Array(repeating: "api.pinproxy.test:\(rsa.port)", count: 8)
        let streams = try BackgroundRun("/usr/bin/env", ["python3", "\(Paths.scripts)/clients.py", "streams", String(proxy.port),
                                                         Paths.fixture("both-roots.pem"), "6"] + targets)
        let allowed = proxy.events("tunnel_allowed", count: 12)
        #expect(allowed.filter { $0["worker"] == "0" }.count == 6 && allowed.filter { $0["worker"] == "1" }.count == 6)
        let ecOnBoth = Set(allowed.filter { $0["port"] == String(ec.port) }.compactMap { $0["worker"] })

        try proxy.reload(policy(ports: ports, rules: rules, extra: "deny: [\"\(Pins.leafEC)\"]"))
        let reloaded = try #require(proxy.waitFor("policy_reloaded"))
        #expect(reloaded["tunnels_checked"] == "12" && reloaded["tunnels_closed"] == "4", "\(reloaded)")

        let results = streams.output(timeout: 40).split(separator: "\n").map(String.init)
        #expect(results.filter { $0.hasSuffix(" complete") }.count == 8, "\(results)")
        #expect(results.filter { $0.hasSuffix(" cut") && $0.hasPrefix("api.pinproxy.test:\(ec.port) ") }.count == 4, "\(results)")
        let byReload = proxy.events("tunnel_closed", count: 12).filter { $0["close_reason"] == "policy_reload" }
        #expect(byReload.count == 4 && byReload.allSatisfy { $0["reason"] == "denylisted_key" && $0["port"] == String(ec.port) })
        // Which worker held the EC tunnels depends on the clients' connect order; the sums above
        // are over both whenever they were split.
        #expect(!ecOnBoth.isEmpty)
    }

    /// A TLS 1.2 session verified in a tunnel on one worker resumes through a tunnel on the other:
    /// the resumption ledger is shared.
    @Test(arguments: [false, true])
    func aTLS12SessionVerifiedOnOneWorkerResumesOnTheOther(tickets: Bool) throws {
        let directory = try temporaryDirectory()
        let good = try Upstream("leaf-ec256", name: "good", tls: "1.2")
        let proxy = try ProxyProcess(config: policy(ports: [good.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: Self.two))
        let check = StreamCheckTests()
        let first = try check.sClient(proxy: proxy.port, port: good.port, session: "\(directory)/good.pem", resume: false, tickets: tickets)
        #expect(first.contains("New, TLSv1.2") && first.contains("hello from good"), "\(first)")
        let again = try check.sClient(proxy: proxy.port, port: good.port, session: "\(directory)/good.pem", resume: true, tickets: tickets)
        #expect(again.contains("Reused, TLSv1.2"), "\(again)")
        let allowed = proxy.events("tunnel_allowed", count: 2)
        #expect(allowed.map { $0["worker"] ?? "?" } == ["0", "1"], "\(allowed)")
        let closed = proxy.events("tunnel_closed", count: 2)
        #expect(closed.count == 2 && closed.allSatisfy { $0["verify"] == "probe+stream" }, "\(closed)")
        #expect(proxy.events("tunnel_refused").isEmpty)
    }

    /// The key log is read on a thread of its own; a TLS 1.3 tunnel waiting for its line lives on
    /// a worker: on either worker it is opened with the client's secret.
    @Test func aKeyLogTLS13TunnelIsVerifiedOnEitherWorker() throws {
        let path = try KeyLogTests.keyLogPath()
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.3")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: KeyLogTests.apiPinned,
                                                    proxy: "keylog: { path: \(path), wait: 2s }\n\(Self.two)"))
        for _ in 0..<4 {
            let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port, environment: KeyLogTests.writing(path))
            #expect(result.body == "hello from good\n", "\(result.stderr)")
        }
        let allowed = proxy.events("tunnel_allowed", count: 4)
        #expect(allowed.map { $0["worker"] ?? "?" } == ["0", "1", "0", "1"], "\(allowed)")
        let closed = proxy.events("tunnel_closed", count: 4)
        #expect(closed.count == 4 && closed.allSatisfy { $0["verify"] == "probe+keylog" && $0["tls"] == "TLSv1.3" }, "\(closed)")
        let stats = try #require(proxy.stop() == 0 ? proxy.events("stopped").last : nil)
        #expect(stats["keylog_kept"] == "8" && stats["keylog_watches"] == "0", "\(stats)")
    }

    /// SIGTERM with a tunnel open on each worker: both drain (their streams complete), and
    /// `stopped` comes after both close lines, with the merged counts.
    @Test func sigtermDrainsEveryWorker() throws {
        let server = try Upstream("leaf-ec256", name: "bulk", tls: "1.2", mode: "bulk", extra: ["--bulk-bytes", String(2 << 20)])
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)),
                                                    proxy: "\(Self.two)\ndrain_timeout: 20s"))
        let target = "api.pinproxy.test:\(server.port)"
        let streams = try BackgroundRun("/usr/bin/env", ["python3", "\(Paths.scripts)/clients.py", "streams", String(proxy.port),
                                                         Paths.fixture("both-roots.pem"), "3", target, target])
        let allowed = proxy.events("tunnel_allowed", count: 2)
        #expect(allowed.map { $0["worker"] ?? "?" }.sorted() == ["0", "1"], "\(allowed)")
        proxy.signal(SIGTERM)
        #expect(proxy.waitFor("stopping")?["tunnels"] == "2")
        let results = streams.output(timeout: 40).split(separator: "\n").map(String.init)
        #expect(results.count == 2 && results.allSatisfy { $0.hasSuffix(" complete") }, "\(results)")
        #expect(proxy.waitForExit() == 0)
        let events = proxy.lines.compactMap { $0["event"] }
        let stopped = try #require(events.lastIndex(of: "stopped"))
        #expect(events.indices.filter { events[$0] == "tunnel_closed" }.count == 2)
        #expect(events.indices.filter { events[$0] == "tunnel_closed" }.allSatisfy { $0 < stopped })
        let last = try #require(proxy.events("stopped").last)
        #expect(last["allowed"] == "2" && last["closed"] == "2" && last["live_session_objects"] == "0" && last["workers"] == "2", "\(last)")
    }

    /// The verification cache is per worker: with two workers, the first CONNECT on each probes and
    /// the later ones on it reuse what its own probe saw.
    @Test func eachWorkerProbesOnceAndThenUsesItsOwnCache() throws {
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.2")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)),
                                                    proxy: "\(Self.two)\nstats_interval: 100ms"))
        for _ in 0..<4 { #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from good\n") }
        let allowed = proxy.events("tunnel_allowed", count: 4)
        #expect(allowed.map { "\($0["worker"] ?? "?")/\($0["cached"] ?? "?")" } == ["0/false", "1/false", "0/true", "1/true"])
        #expect(proxy.waitFor("stats") { $0["probes"] == "2" && $0["probe_cache_hits"] == "2" } != nil)
    }

    /// A worker count out of range or not a whole number is a load error with its line and column.
    @Test(arguments: [("0", "'0'"), ("65", "'65'"), ("two", "'two'"), ("1.5", "'1.5'")])
    func aWorkerCountOutOfRangeIsALoadError(value: String, quoted: String) throws {
        let yaml = policy(ports: [443], proxy: "workers: \(value)")
        let line = try #require(yaml.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.hasPrefix("  workers: ") }) + 1
        let path = try temporaryFile(yaml)
        let r = try run(Paths.pinproxy, ["check", "--config", path], timeout: 20)
        #expect(r.status == 1)
        let text = r.stdout + r.stderr
        #expect(text.contains("\(path):\(line):12: error: proxy.workers must be a whole number from 1 to 64, not \(quoted)"), "\(text)")
    }

    /// A changed worker count is read but needs a restart: said so, and the running count stays.
    @Test func aChangedWorkerCountNeedsARestart() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: Self.two))
        #expect(proxy.events("started").last?["workers"] == "2")
        try proxy.reload(policy(ports: [443], proxy: "workers: 1"))
        let line = try #require(proxy.waitFor("restart_required"))
        #expect(line["setting"] == "proxy.workers" && line["level"] == "warning")
        #expect(proxy.waitFor("policy_reloaded")?["tunnels_checked"] == "0")
        #expect(proxy.stop() == 0)
        #expect(proxy.events("stopped").last?["workers"] == "2")
    }
}
