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
