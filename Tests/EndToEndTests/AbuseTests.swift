import Foundation
import Testing
import TestSupport

/// One local process must not be able to keep pinproxy from serving the others.
@Suite(.serialized) struct AbuseTests {
    /// Two processes open connections that never speak, 1,000 a second each (500 under ASan) and
    /// holding 3,000 each, far past the proxy's descriptor limit (lowered to 1,024 here), while a
    /// real client makes one pinned CONNECT after another. (The rate stays within what
    /// a debug build accepts on a shared 2-core machine: a flood faster than the proxy can accept
    /// fills the kernel's backlog, which no proxy can sort; `Benchmarks/silent-flood.sh` floods a
    /// release build as fast as it can.) The oldest silent connections are closed first, so the real client — which
    /// speaks within milliseconds — gets its tunnel; the reaping is said in a throttled line and in
    /// `stats`, and afterwards the descriptors return to where they were. The same holds when each
    /// flood connection sends one byte that pinproxy answers at once (0x16, a TLS record: it is
    /// answered with an alert, which a client that never reads leaves lingering).
    ///
    /// What is asserted does not depend on how fast the machine is. The client runs for the same
    /// time without the flood first, and during it must be served at least a tenth as often (the
    /// flooders and the reaping share the two cores with it), and never left without an answer for
    /// 25 s, far past a CONNECT's time alone even under ASan: starvation — what this test is for —
    /// served none, and left every client waiting. The descriptors stay within what the proxy's own
    /// limits allow. How long a CONNECT takes under a flood is a benchmark's to say
    /// (Benchmarks/soak.sh).
    ///
    /// The listener defers accepting (TCP_DEFER_ACCEPT), so a real client reaches a worker with its
    /// CONNECT already in the kernel: it is `arriving`, never the oldest that has sent nothing,
    /// even once every flood connection has sent its byte (before, the next arrival could reap it
    /// in the moment between its connect and its first byte: curl's "Proxy CONNECT aborted").
    /// `Benchmarks/silent-flood.sh` floods a release build at full speed against nginx's stream
    /// proxy.
    @Test(arguments: ["", "16"])
    func aFloodOfSilentConnectionsDoesNotStarveRealClients(firstBytes: String) throws {
        let server = try Upstream("leaf-ec256", name: "good")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "stats_interval: 500ms"))
        try proxy.limitDescriptors(soft: 1024, hard: nil)
        let before = proxy.openFileDescriptors
        let workers = try #require(proxy.waitFor("started")?["workers"].flatMap { Int($0) })
        let seconds: Double = AddressSanitizer.isActive ? 10 : 5
        // The machine's own pace: the same client without the flood.
        let alone = try Self.realClients(proxy: proxy, server: server, seconds: seconds)
        #expect(alone.served > 0 && alone.failures.isEmpty, "without the flood: \(alone)")
        // Each flood runs until it is stopped (600 s at most), so every attempt below meets it. Under
        // ASan, half the rate: the build accepts and reads several times slower.
        let rate = AddressSanitizer.isActive ? "500" : "1000"
        let flooders = try (0..<2).map { _ in
            try BackgroundRun("/usr/bin/env", ["python3", "\(Paths.scripts)/flood.py", "silent", String(proxy.port), "600", "3000", rate, firstBytes])
        }
        defer { for flooder in flooders where flooder.isRunning { _ = flooder.stop(timeout: 5) } }  // a throw below
        // The flood is past the limit once each process holds its 3,000 (3 s at 1,000 a second).
        let holding = Date().addingTimeInterval(60)
        while !flooders.allSatisfy({ $0.outputSoFar.hasPrefix("HOLDING 3000") }) && flooders.allSatisfy(\.isRunning) && Date() < holding {
            usleep(100_000)
        }
        #expect(flooders.allSatisfy { $0.outputSoFar.hasPrefix("HOLDING 3000") }, "\(flooders.map(\.outputSoFar))")
        let flood = try Self.realClients(proxy: proxy, server: server, seconds: seconds)
        let flooded = flooders.map { $0.stop() }
        // The flood went on through every attempt, and each process alone opened more than the
        // proxy's limit allows.
        let ends = flooded.map { $0.split(separator: "\n").last.map(String.init) ?? "" }
        #expect(ends.allSatisfy { $0.hasSuffix(" STOPPED") }, "\(flooded)")
        let opened = ends.map { Int($0.split(separator: " ").dropFirst().first ?? "") ?? 0 }
        #expect(opened.allSatisfy { $0 > 3000 }, "\(flooded)")
        // Served, and never starved.
        #expect(flood.served * 10 >= alone.served && flood.served > 0, "during the flood: \(flood); without it: \(alone)")
        #expect(flood.unanswered == 0, "during the flood: \(flood)")
        // Never out of descriptors. Silent connections that have sent nothing hold at most a quarter
        // of the limit, and accepted ones the workers have not taken yet at most
        // `Supervisor.maxWaitingHandOvers` (128) per worker, beside what the proxy held before and
        // the real client's few: so much whatever the speed. A connection whose byte waits unread
        // is spared (it may be a real client about to speak), so the one-byte flood holds as many as
        // the workers are behind in reading, which a loaded machine makes more: bounded by the
        // descriptor limit alone, and never reaching it.
        let bound = firstBytes.isEmpty ? before + 1024 / 4 + 128 * workers + 16 : 1024
        #expect(flood.mostDescriptors < bound, "the proxy held \(flood.mostDescriptors) of its 1,024 descriptors (\(before) before the flood)")
        #expect(proxy.events("accept_failed").isEmpty)

        let reaped = try #require(proxy.waitFor("silent_connections_reaped"))
        #expect(reaped["level"] == "warning" && Int(reaped["reaped"] ?? "") ?? 0 > 0 && reaped["client"] == "127.0.0.1")
        #expect(Int(reaped["limit"] ?? "") ?? 0 > 0 && Int(reaped["limit"] ?? "") ?? .max <= 256)
        let stats = try #require(proxy.waitFor("stats") { Int($0["silent_reaped"] ?? "") ?? 0 > 0 })
        #expect(stats["silent_reaped"] != nil)
        // Every flood connection is gone: the proxy holds what it held before (bounded wait).
        let deadline = Date().addingTimeInterval(15)
        while proxy.openFileDescriptors > before && Date() < deadline { usleep(100_000) }
        #expect(proxy.openFileDescriptors <= before)
    }

    /// What a real client saw making one pinned CONNECT after another.
    struct RealClients: CustomStringConvertible {
        var served = 0
        var seconds: [Double] = []
        var failures: [String] = []
        /// Attempts that had no answer (nor a close) within curl's 25 s.
        var unanswered = 0
        var mostDescriptors = 0
        var description: String {
            let median = seconds.sorted().dropFirst(seconds.count / 2).first ?? 0
            return "served \(served) of \(seconds.count) (median \(String(format: "%.2f", median)) s), failures \(failures)"
        }
    }

    /// CONNECTs one after another, each started within `seconds` (and 200 at most); each may take
    /// 25 s (curl's --max-time).
    static func realClients(proxy: ProxyProcess, server: Upstream, seconds: Double) throws -> RealClients {
        var seen = RealClients()
        let end = Date().addingTimeInterval(seconds)
        while Date() < end && seen.seconds.count < 200 {
            let started = Date()
            let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port, extra: ["--max-time", "25"])
            seen.seconds.append(Date().timeIntervalSince(started))
            if result.connectStatus == 200 && result.body == "hello from good\n" {
                seen.served += 1
            } else {
                seen.failures.append("curl \(result.exitCode) \(result.connectStatus): \(result.stderr.prefix(200))")
                if result.exitCode == 28 { seen.unanswered += 1 }  // CURLE_OPERATION_TIMEDOUT
            }
            seen.mostDescriptors = max(seen.mostDescriptors, proxy.openFileDescriptors)
        }
        return seen
    }

    /// Kept plain-HTTP connections waiting for their next request are silent too: 700 of them,
    /// each answered once and then idle (two descriptors each, the client's and the kept server
    /// connection), past a limit of 1,024 descriptors. The idlest are closed as new ones come, the
    /// proxy stays within its descriptors, and a pinned CONNECT is served meanwhile. The bound is the
    /// proxy's own: a quarter of the limit for silent clients, each with its kept server connection,
    /// and 128 accepted connections per worker waiting to be taken, whatever the machine's speed.
    @Test func keptConnectionsThatGoQuietAreBoundedToo() throws {
        let server = try Upstream("leaf-ec256", name: "good")
        let plain = try PlainHTTPTests.server()
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)),
                                                    proxy: "allowed_plain_ports: [\(plain.port)]\nstats_interval: 500ms"))
        try proxy.limitDescriptors(soft: 1024, hard: nil)
        let before = proxy.openFileDescriptors
        let workers = try #require(proxy.waitFor("started")?["workers"].flatMap { Int($0) })
        // The keeper opens its 700 one after another, says KEPT, and holds them 10 s more.
        let keeper = try BackgroundRun("/usr/bin/env", ["python3", "\(Paths.scripts)/flood.py", "keepalive", String(proxy.port), String(plain.port), "700", "10"])
        var mostDescriptors = 0
        let opening = Date().addingTimeInterval(120)
        while !keeper.outputSoFar.hasPrefix("KEPT") && keeper.isRunning && Date() < opening {
            mostDescriptors = max(mostDescriptors, proxy.openFileDescriptors)
            usleep(100_000)
        }
        #expect(keeper.outputSoFar.hasPrefix("KEPT 700"), "\(keeper.outputSoFar)")  // every one was answered before it went quiet
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port, extra: ["--max-time", "25"])
        #expect(result.connectStatus == 200 && result.body == "hello from good\n", "\(result.stderr)")
        mostDescriptors = max(mostDescriptors, proxy.openFileDescriptors)
        _ = keeper.output(timeout: 60)
        let bound = before + 2 * (1024 / 4) + 128 * workers + 16
        #expect(mostDescriptors < bound, "the proxy held \(mostDescriptors) of its 1,024 descriptors (\(before) before)")
        #expect(proxy.events("accept_failed").isEmpty)
        #expect(proxy.waitFor("silent_connections_reaped") != nil)
    }
}
