import Foundation
import Testing
import TestSupport

/// `stats` is written when a counter moved, not every interval: an idle proxy writes the baseline
/// after its first interval and then nothing (until an hour has passed, `StatsGate`'s unit test).
@Suite(.serialized) struct StatsTests {
    @Test func anIdleProxyWritesOneStatsLineAndABusyOneAnotherPerChange() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: "stats_interval: 50ms"))
        #expect(proxy.waitFor("stats") { $0["accepted"] == "0" } != nil)
        usleep(1_000_000)  // twenty intervals, idle
        #expect(proxy.events("stats").count == 1)
        _ = try rawExchange(port: proxy.port, send: Array("GET / HTTP/1.1\r\n\r\n".utf8))
        #expect(proxy.waitFor("stats") { $0["rejected"] == "1" && $0["active_sessions"] == "0" && $0["live_session_objects"] == "0" } != nil)
        let afterChange = proxy.events("stats").count
        usleep(500_000)  // ten more intervals, idle again
        #expect(proxy.events("stats").count == afterChange)
        #expect(proxy.stop() == 0)
    }
}
