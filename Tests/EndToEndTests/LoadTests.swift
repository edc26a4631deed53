import Foundation
import Testing
import TestSupport

@Suite(.serialized) struct LoadTests {
    /// A client that stops reading while the upstream would send 1 GiB: the proxy stops reading the
    /// upstream once 512 KiB are queued, so its memory stays flat, and the stalled tunnel ends at
    /// the idle timeout.
    @Test func backpressureKeepsMemoryBoundedAndIdleTimeoutEndsTheTunnel() throws {
        let server = try Upstream("leaf-ec256", name: "bulk", mode: "bulk")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "idle_timeout: 2s"))
        var proxyEnvironment = ProcessInfo.processInfo.environment
        proxyEnvironment["HTTPS_PROXY"] = "http://127.0.0.1:\(proxy.port)"
        let environment = proxyEnvironment
        let clientDone = DispatchSemaphore(value: 0)
        let output = LockedBox("")
        Thread.detachNewThread {
            let r = try? run("/usr/bin/env", ["python3", "\(Paths.scripts)/clients.py", "stall", "https://api.pinproxy.test:\(server.port)/",
                                              Paths.fixture("both-roots.pem"), "6"], environment: environment, timeout: 30)
            output.set(r?.stdout ?? "")
            clientDone.signal()
        }
        var peak = 0
        let deadline = Date().addingTimeInterval(15)
        while proxy.events("tunnel_closed").isEmpty && Date() < deadline {
            peak = max(peak, proxy.rssKiB)
            usleep(50_000)
        }
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(closed["close_reason"] == "idle_timeout")
        let down = Int(closed["bytes_down"] ?? "") ?? 0
        #expect(down > 512 * 1024 && down < 64 << 20, "bytes_down=\(down)")
        #expect(peak > 0 && peak < 64 * 1024 * AddressSanitizer.memoryFactor, "peak RSS \(peak) KiB")
        _ = clientDone.wait(timeout: .now() + 20)
        #expect(output.value.hasPrefix("STALLED "))  // it read its first record, then stopped
    }

    /// 200 tunnels at once all succeed, and afterwards every session object has been freed.
    @Test func twoHundredTunnelsAtOnce() throws {
        let server = try Upstream("leaf-ec256", name: "many")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "stats_interval: 250ms"))
        var environment = ProcessInfo.processInfo.environment
        environment["HTTPS_PROXY"] = "http://127.0.0.1:\(proxy.port)"
        let r = try run("/usr/bin/env", ["python3", "\(Paths.scripts)/clients.py", "many", "200", "https://api.pinproxy.test:\(server.port)/",
                                         Paths.fixture("both-roots.pem")], environment: environment, timeout: 120)
        #expect(r.stdout.hasPrefix("OK 200 0\n"), "\(r.stdout)\(r.stderr)")
        let settled = proxy.waitFor("stats", timeout: 20) {
            $0["accepted"] == "200" && $0["closed"] == "200" && $0["active_sessions"] == "0" && $0["live_session_objects"] == "0"
        }
        #expect(settled != nil, "\(proxy.events("stats").last ?? [:])")
        #expect(proxy.events("tunnel_allowed").count == 200)
        #expect(proxy.stop() == 0)
        let stopped = try #require(proxy.events("stopped").last)
        #expect(stopped["live_session_objects"] == "0" && stopped["allowed"] == "200")
    }
}

final class LockedBox<T>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: T
    init(_ value: T) { stored = value }
    var value: T { lock.withLock { stored } }
    func set(_ value: T) { lock.withLock { stored = value } }
}
