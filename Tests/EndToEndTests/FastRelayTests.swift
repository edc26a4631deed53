import Foundation
import Testing
import TestSupport

/// The fast relay (`proxy.relay: copy | splice`) that carries a tunnel once the stream check is done
/// with both sides: every test runs with each method, through plain TCP in an unpinned tunnel (the
/// check is done after the first bytes each way), and the close line says which relay carried it.
@Suite(.serialized) struct FastRelayTests {
    static let methods = ["copy", "splice"]

    /// Starts the proxy with `relay: method`, whatever PINPROXY_TEST_RELAY the suite runs with.
    static func proxy(_ method: String, ports: [UInt16], settings: String = "") throws -> ProxyProcess {
        try ProxyProcess(config: policy(ports: ports, proxy: "relay: \(method)" + (settings.isEmpty ? "" : "\n" + settings)),
                         environment: relayEnvironment(method))
    }

    func relayClient(_ scenario: String, proxy: ProxyProcess, upstream: Upstream, bytes: Int) throws -> String {
        let r = try run("/usr/bin/env", ["python3", "\(Paths.scripts)/relay.py", scenario, String(proxy.port),
                                         "api.pinproxy.test:\(upstream.port)", String(bytes)], timeout: 90)
        return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines) + r.stderr
    }

    /// 64 MiB each way, read and written at once, arrive byte-exact; the client's half-close reaches
    /// the upstream after its last byte, and the upstream's after the last echoed byte.
    @Test(arguments: methods) func sixtyFourMiBEchoAreByteExact(method: String) throws {
        let echo = try Upstream(mode: "echo")
        let proxy = try Self.proxy(method, ports: [echo.port])
        let size = 64 << 20
        #expect(try relayClient("echo", proxy: proxy, upstream: echo, bytes: size) == "OK \(size)")
        let closed = proxy.waitFor("tunnel_closed")
        #expect(closed?["relay"] == method)
        #expect(closed?["close_reason"] == "eof")
        #expect(closed?["bytes_up"] == String(size) && closed?["bytes_down"] == String(size))
        #expect(proxy.stop() == 0)
    }

    /// The upstream half-closes first: its EOF reaches the client after every byte, and the client's
    /// direction keeps flowing until the client half-closes too.
    @Test(arguments: methods) func theUpstreamHalfClosesFirst(method: String) throws {
        let size = 8 << 20
        let talker = try Upstream(mode: "talkfirst", extra: ["--bulk-bytes", String(size)])
        let proxy = try Self.proxy(method, ports: [talker.port])
        #expect(try relayClient("talkfirst", proxy: proxy, upstream: talker, bytes: size) == "OK \(size)")
        let closed = proxy.waitFor("tunnel_closed")
        #expect(closed?["relay"] == method)
        #expect(closed?["close_reason"] == "eof")
        #expect(closed?["bytes_up"] == String(size + 1) && closed?["bytes_down"] == String(size))
        #expect(proxy.stop() == 0)
    }

    /// The stage before the fast relay carries bulk too: an upstream that speaks first to a silent
    /// client (the check waits for the client's first bytes, so the bufferevents carry the tunnel)
    /// and half-closes before the client says anything (so no fast relay takes over). Its bytes go
    /// straight to the client's socket while nothing waits before them and through the output
    /// buffer when the socket is full (the client reads only after a pause): every byte arrives once
    /// and in order, and its EOF after the last one; then the client's bytes cross the other way.
    @Test func aServerThatSpeaksFirstCrossesTheBuffereventStageWhole() throws {
        let size = 8 << 20
        let greeter = try Upstream(mode: "greetfirst", extra: ["--bulk-bytes", String(size)])
        let proxy = try Self.proxy("copy", ports: [greeter.port])
        #expect(try relayClient("listenfirst", proxy: proxy, upstream: greeter, bytes: size) == "OK \(size)")
        let closed = proxy.waitFor("tunnel_closed")
        #expect(closed?["relay"] == "bufferevent")
        #expect(closed?["close_reason"] == "eof")
        #expect(closed?["bytes_up"] == String(size) && closed?["bytes_down"] == String(size))
        #expect(proxy.stop() == 0)
    }

    /// A client that resets in the middle of a bulk stream ends the tunnel at once, and its
    /// descriptors (and pipes) are closed with it.
    @Test(arguments: methods) func aResetMidStreamEndsTheTunnel(method: String) throws {
        let flood = try Upstream(mode: "flood", extra: ["--bulk-bytes", String(1 << 30)])
        let proxy = try Self.proxy(method, ports: [flood.port], settings: "idle_timeout: 60s\nstats_interval: 200ms")
        #expect(proxy.waitFor("stats") != nil)
        let baselineFDs = proxy.openFileDescriptors
        for _ in 0..<5 {
            #expect(try relayClient("resetmid", proxy: proxy, upstream: flood, bytes: 4 << 20) == "RESET \(4 << 20)")
        }
        let closed = proxy.events("tunnel_closed", count: 5)
        #expect(closed.count == 5)
        #expect(closed.allSatisfy { $0["relay"] == method && $0["close_reason"] == "client_reset" }, "\(closed)")
        #expect(proxy.waitFor("stats", timeout: 10) { $0["tunnels"] == "0" && $0["active_sessions"] == "0" } != nil)
        let deadline = Date().addingTimeInterval(10)
        while proxy.openFileDescriptors > baselineFDs && Date() < deadline { usleep(50_000) }
        // Splice pipes: pooled while splice tunnels are open, closed with the last one.
        #expect(proxy.openFileDescriptors == baselineFDs)
        #expect(proxy.stop() == 0)
    }
}

/// The environment for a proxy that must use `method`: PINPROXY_TEST_RELAY (debug builds) would
/// override the policy's `proxy.relay`, so it is set to the same method.
func relayEnvironment(_ method: String) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["PINPROXY_TEST_RELAY"] = method
    return environment
}
