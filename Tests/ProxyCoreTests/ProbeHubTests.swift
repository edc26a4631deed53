import Glibc
import PinPolicy
import Testing
import TestSupport
@testable import ProxyCore

/// The probe hub on a real loop against a loopback port whose server never answers the ClientHello
/// (the kernel accepts the connection; nobody reads it): every probe ends in `probe_timeout`, which
/// is how the tests see when a handshake was made and whether a result was shared or cached.
@Suite struct ProbeHubTests {
    static let settings = PolicySnapshot.loaded(from: """
        version: 1
        proxy: { allowed_ports: [443], probe_timeout: 200ms, verify_cache_ttl: 60s, dns: { nameservers: [], hosts_file: none } }
        defaults: { unpinned: allow, require_backup: off }
        """).policy.proxy

    /// A loop, a hub on it, and a silent server's key.
    final class Bench {
        let loop = EventLoop()
        let hub: ProbeHub
        let listener: Int32
        let key: ProbeHub.Key
        var results: [ProbeResult] = []

        init() throws {
            hub = ProbeHub(loop: loop)
            let (fd, port) = try boundLoopbackSocket()
            listener = fd
            guard listen(fd, 16) == 0 else { throw HelperError(message: "listen failed") }
            key = ProbeHub.Key(serverName: "api.pinproxy.test", port: port, addresses: [IPAddress("127.0.0.1")!])
        }

        deinit { close(listener) }

        func probe() -> ProbeHub.Waiter {
            hub.probe(key, settings: ProbeHubTests.settings) { [weak self] in self?.results.append($0) }
        }

        /// Runs the loop until `count` results are in (30 s at most).
        func run(until count: Int) {
            let watch = ProxyCore.Timer(loop: loop, after: 0.02, repeating: true) {
                if self.results.count >= count { self.loop.stop() }
            }
            let limit = ProxyCore.Timer(loop: loop, after: 30) { self.loop.stop() }
            loop.run()
            watch.cancel()
            limit.cancel()
        }

        /// Every result's refusal, in order; a result that is not one shows as `nil`.
        var refusals: [Refusal?] {
            results.map { if case .failed(let refusal) = $0.outcome { refusal } else { nil } }
        }
    }

    /// Two CONNECTs to the same target while a probe is in flight get that probe's one result.
    @Test func concurrentProbesOfOneTargetShareOneHandshake() throws {
        let bench = try Bench()
        let waiters = [bench.probe(), bench.probe()]
        #expect(bench.hub.started == 1)
        bench.run(until: 2)
        #expect(bench.refusals == [Refusal.probeTimeout, .probeTimeout])
        #expect(bench.hub.started == 1)
        #expect(bench.hub.latency.count == 1)
        withExtendedLifetime(waiters) {}
    }

    /// Only chains a server proved are cached: after a refusal the next CONNECT probes again.
    @Test func aRefusalIsNeverCached() throws {
        let bench = try Bench()
        let first = bench.probe()
        bench.run(until: 1)
        let second = bench.probe()
        #expect(bench.results.count == 1)  // not answered at once from a cache
        bench.run(until: 2)
        #expect(bench.refusals == [Refusal.probeTimeout, .probeTimeout])
        #expect(bench.hub.started == 2)
        #expect(bench.hub.cacheHits == 0)
        withExtendedLifetime((first, second)) {}
    }

    /// A client that hung up cancels its wait; the probe goes on for the others.
    @Test func aCancelledWaiterIsNotCalledAndTheOthersAre() throws {
        let bench = try Bench()
        let gone = bench.probe()
        let staying = bench.probe()
        gone.cancel()
        bench.run(until: 1)
        #expect(bench.refusals == [Refusal.probeTimeout])
        #expect(bench.hub.started == 1)
        withExtendedLifetime(staying) {}
    }
}
