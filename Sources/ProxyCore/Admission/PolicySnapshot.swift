import Foundation
import PinPolicy
import TLSInspection

/// A policy with the trust stores its rules name, made once per load and never changed: each
/// CONNECT keeps the snapshot it arrived under, and a reload swaps in a new one.
public final class PolicySnapshot: Sendable {
    public let policy: Policy
    public let loadedAt: Date
    private let system: TrustStore
    private let caFiles: [String: TrustStore]
    /// The CT log list, when `proxy.ct_log_list` is set.
    let ct: CTLogBook?

    /// Loads every `ca-file:` the policy names, in its rules and in `defaults.trust` (a failure is a
    /// load error, so a reload keeps the old policy), and shares the system store between snapshots.
    public init(policy: Policy, systemStore: TrustStore) throws {
        var files: [String: TrustStore] = [:]
        let paths = (policy.rules.map(\.trust) + [policy.defaults.trust]).compactMap { trust -> String? in
            if case .caFile(let path) = trust { return path }
            return nil
        }
        for path in Set(paths) {
            do {
                files[path] = try TrustStore.caFile(path)
            } catch {
                throw PolicyLoadError([PolicyError(file: policy.source, line: 0, column: 0, message: "cannot load the CA file \(path): \(error)")])
            }
        }
        self.policy = policy
        self.system = systemStore
        self.caFiles = files
        self.ct = try policy.proxy.ct.logList.map { _ throws(PolicyLoadError) in try CTLogBook(settings: policy.proxy.ct, policySource: policy.source) }
        self.loadedAt = Date()
    }

    /// Validates what a server presented under the rule's trust, judges its leaf's SCTs (embedded,
    /// and those `delivered` in the handshake) when CT applies, then evaluates the rule on both: the
    /// one judgement of a chain, whether it came from the proxy's probe, the stream, a key-log or
    /// mirror flight, or the CLI's probe.
    public func judge(_ presented: [Certificate], target: Target, rule: Rule, at now: Date,
                      debugBypassEnabled: Bool) -> (ChainValidation, Evaluation) {
        judge(presented, target: target, rule: rule, at: now, debugBypassEnabled: debugBypassEnabled, delivered: .none)
    }

    public func judge(_ presented: [Certificate], target: Target, rule: Rule, at now: Date, debugBypassEnabled: Bool,
                      delivered: DeliveredSCTs) -> (ChainValidation, Evaluation) {
        let validation = validate(presented, for: target, trust: rule.trust, pins: rule.pins)
        return (validation, policy.evaluate(validation, rule: rule, target: target, at: now, debugBypassEnabled: debugBypassEnabled,
                                            ct: ctStatus(presented, rule: rule, delivered: delivered, at: now)))
    }

    /// CT for a chain under `rule`: nil without a log list, `exempt` when the host's `ct` is off.
    func ctStatus(_ presented: [Certificate], rule: Rule, delivered: DeliveredSCTs, at now: Date) -> CTStatus? {
        guard let ct, !presented.isEmpty else { return nil }
        let mode = policy.ctMode(under: rule)
        guard mode != .off else { return .exempt }
        return .judged(ct.judge(presented, delivered: delivered, mode: mode, at: now))
    }

    public func validate(_ presented: [Certificate], for target: Target, trust: Trust, pins: [PinEntry]) -> ChainValidation {
        if TestFault.validation.isInjected {
            return .failed(ChainFailure(reason: .chainInvalid, detail: TestFault.detail), presented: presented.map(\.facts))
        }
        let store: TrustStore?
        switch trust {
        case .system: store = system
        case .caFile(let path): store = caFiles[path]
        case .pinsOnly: store = nil
        }
        let anchors = trust == .pinsOnly ? pins.map(\.pin) : nil
        let ttl = policy.proxy.verifyCacheTTL
        let key = ttl > 0 ? ValidationMemo.Key(chain: presented.map(\.der), target: target, trust: trust, anchors: anchors) : nil
        if let key, let remembered = memo.lookup(key, now: .now, date: Date()) { return remembered }
        let validation = ChainValidator.validate(presented: presented, target: target, store: store, pinsOnlyAnchors: anchors)
        if let key { memo.store(validation, for: key, ttl: ttl, now: .now) }
        return validation
    }

    /// Validations of byte-identical chains, for `verify_cache_ttl` (none when it is 0).
    let memo = ValidationMemo()
}

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

/// What probes saw, per target, addresses, SNI and parent hop, until each entry's deadline: bounded,
/// the oldest entry goes first. Only chains whose server proved its key are kept.
struct ProbeCache {
    private var entries: [ProbeHub.Key: (result: ProbeResult, at: ContinuousClock.Instant, until: ContinuousClock.Instant, stored: Int)] = [:]
    /// Keys in the order they were stored, with the store they belong to: an entry replaced or
    /// expired since leaves a stale pair behind, skipped when it reaches the front.
    private(set) var order: [(key: ProbeHub.Key, stored: Int)] = []
    private var stores = 0
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// The entry for `key` if it is still valid, was stored within `ttl` (the TTL in force now:
    /// a reload that shortens `verify_cache_ttl` applies to what is already cached) and is not
    /// `forgotten` since it was stored.
    mutating func lookup(_ key: ProbeHub.Key, at now: ContinuousClock.Instant, storedWithin ttl: Duration,
                         unless forgotten: (ContinuousClock.Instant) -> Bool = { _ in false }) -> ProbeResult? {
        guard let entry = entries[key] else { return nil }
        guard now < entry.until, now - entry.at < ttl, !forgotten(entry.at) else {
            entries[key] = nil
            return nil
        }
        return entry.result
    }

    mutating func store(_ result: ProbeResult, for key: ProbeHub.Key, at now: ContinuousClock.Instant, until: ContinuousClock.Instant) {
        stores += 1
        entries[key] = (result, now, until, stores)
        order.append((key, stores))
        while entries.count > capacity || order.count > 2 * capacity, !order.isEmpty {
            let oldest = order.removeFirst()
            if entries[oldest.key]?.stored == oldest.stored { entries[oldest.key] = nil }
        }
    }

    var count: Int { entries.count }

    /// Drops the entries whose key matches.
    mutating func removeAll(where matches: (ProbeHub.Key) -> Bool) {
        for key in entries.keys where matches(key) { entries[key] = nil }
    }
}
