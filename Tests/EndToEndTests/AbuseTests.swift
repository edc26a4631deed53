import Foundation
import Testing
import TestSupport

/// One local process must not be able to keep pinproxy from serving the others.
@Suite(.serialized) struct AbuseTests {
    /// Two processes open connections that never speak, as fast as they can, far past the proxy's
    /// descriptor limit (lowered to 1,024 here), while a real client makes a pinned CONNECT every
    /// quarter second. The oldest silent connections are closed first, so the real client — which
    /// speaks within milliseconds — gets its tunnel; the reaping is said in a throttled line and in
    /// `stats`, and afterwards the descriptors return to where they were.
    @Test func aFloodOfSilentConnectionsDoesNotStarveRealClients() throws {
        let server = try Upstream("leaf-ec256", name: "good")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "stats_interval: 500ms"))
        try proxy.limitDescriptors(soft: 1024, hard: nil)
        let before = proxy.openFileDescriptors
        let flooders = try (0..<2).map { _ in
            try BackgroundRun("/usr/bin/env", ["python3", "\(Paths.scripts)/flood.py", "silent", String(proxy.port), "12", "1500"])
        }
        usleep(1_000_000)  // the flood is under way
        var served = 0, attempts = 0
        let until = Date().addingTimeInterval(9)
        while Date() < until && attempts < 12 {
            attempts += 1
            let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port, extra: ["--max-time", "5"])
            if result.connectStatus == 200 && result.body == "hello from good\n" { served += 1 }
            usleep(250_000)
        }
        let flooded = flooders.map { $0.output(timeout: 30) }
        // The flood really went past the limit: each process alone opened more than it allows.
        let opened = flooded.map { Int($0.split(separator: " ").dropFirst().first ?? "") ?? 0 }
        #expect(opened.allSatisfy { $0 > 1024 }, "\(flooded)")
        #expect(attempts >= 4 && Double(served) >= 0.9 * Double(attempts), "served \(served) of \(attempts) CONNECTs during the flood")

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
}
