import PinPolicy
import TLSInspection

/// Concurrent CONNECTs to the same target and addresses share one probe in flight, and a CONNECT
/// within `verify_cache_ttl` of a probe that saw a chain reuses what it saw instead of a new
/// handshake. What is shared is only what the server presented and proved; every CONNECT validates
/// and decides under its own snapshot (a cache of facts, never of verdicts), and the stream check
/// still judges the tunnel's own chain.
final class ProbeHub {
    struct Key: Hashable {
        let serverName: String?
        let port: UInt16
        let addresses: [IPAddress]
        /// Through the parent proxy: its CONNECT for the target (then `addresses` are not dialled).
        var parent: ParentHop? = nil
    }

    final class Waiter {
        fileprivate var callback: ((ProbeResult) -> Void)?
        /// The session no longer wants the result (the client hung up).
        func cancel() { callback = nil }
    }

    private final class Flight {
        var waiters: [Waiter] = []
        var connector: Connector?
        var probe: Probe?
        let startedAt = ContinuousClock.now
    }

    private let loop: EventLoop
    /// What any worker forgot: a chain cached here before that is not used.
    private let forgotten: ForgottenChains
    private let context = ProbeTLSContext()
    private var flights: [Key: Flight] = [:]
    private var cache = ProbeCache(capacity: 4096)
    private(set) var started = 0
    /// CONNECTs answered from the cache.
    private(set) var cacheHits = 0
    /// How long the probes that ended took.
    private(set) var latency = ProbeLatency()
    /// Told when a probe has ended (its latency recorded): a worker copies the counters for `stats`.
    var probeEnded: (() -> Void)?

    init(loop: EventLoop, forgotten: ForgottenChains = ForgottenChains()) {
        self.loop = loop
        self.forgotten = forgotten
    }

    /// Calls back with a chain a probe saw within `verify_cache_ttl` at once (inside this call), or
    /// once the probe in flight for `key` (started now if none) ends. Not `cacheable`: a probe made
    /// now (a rule without mirrors, whose TLS 1.3 tunnels rest on it), or one already in flight.
    func probe(_ key: Key, settings: ProxySettings, cacheable: Bool = true, _ callback: @escaping (ProbeResult) -> Void) -> Waiter {
        let waiter = Waiter()
        let ttl = Duration.milliseconds(Int(settings.verifyCacheTTL * 1000))
        if settings.verifyCacheTTL > 0, cacheable,
           var cached = cache.lookup(key, at: .now, storedWithin: ttl, unless: { [forgotten] in forgotten.isForgotten(key, storedAt: $0) }) {
            cacheHits += 1
            cached.cached = true
            callback(cached)
            return waiter
        }
        waiter.callback = callback
        if let flight = flights[key] {
            flight.waiters.append(waiter)
            return waiter
        }
        let flight = Flight()
        flight.waiters = [waiter]
        flights[key] = flight
        started += 1
        let addresses = key.parent.map { [$0.parent.address] } ?? key.addresses.map { SocketAddress(ip: $0, port: key.port) }
        flight.connector = Connector(loop: loop, addresses: addresses, perAddress: settings.connectTimeout,
                                     total: settings.connectTotalTimeout, through: key.parent) { [weak self] outcome in
            guard let self else { return }
            switch outcome {
            case .failed(let refusal):
                deliver(key, ProbeResult(outcome: .failed(refusal), address: nil, tlsVersion: nil))
            case .connected(let fd, let address):
                let startedAt = flight.startedAt
                flight.probe = Probe(loop: loop, context: context, fd: fd, address: address, serverName: key.serverName,
                                     timeout: settings.probeTimeout) { [weak self] result in
                    guard let self else { return }
                    if case .chain = result.outcome, settings.verifyCacheTTL > 0 {
                        // Stored as of the probe's start: a forget made while it ran (a refusal
                        // on any worker) covers what it saw.
                        cache.store(result, for: key, at: startedAt, until: startedAt + ttl)
                    }
                    deliver(key, result)
                }
            }
        }
        return waiter
    }

    /// Forgets every cached chain (a reload: what was seen is looked at again under the new policy).
    func forgetAll() { cache.removeAll { _ in true } }

    /// Forgets the cached chains for `authority`, here and on every worker (a refusal or a caught
    /// interception: the next CONNECT looks again instead of judging what it saw).
    func forget(target authority: Authority) {
        forgotten.forget(authority)
        cache.removeAll { key in
            guard key.port == authority.port else { return false }
            switch authority.target {
            case .name(let name): return key.serverName == name
            case .ip(let address): return key.serverName == nil && key.addresses == [address]
            }
        }
    }

    private func deliver(_ key: Key, _ result: ProbeResult) {
        guard let flight = flights.removeValue(forKey: key) else { return }
        latency.record(seconds: (ContinuousClock.now - flight.startedAt).seconds)
        probeEnded?()
        for waiter in flight.waiters {
            let callback = waiter.callback
            waiter.callback = nil
            callback?(result)
        }
    }
}
