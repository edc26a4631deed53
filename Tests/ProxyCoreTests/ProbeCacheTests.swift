import PinPolicy
import Testing
@testable import ProxyCore

/// The probe cache as a value, on a clock the test moves: an entry lives until its deadline and
/// only as long as the TTL in force at lookup allows, and the oldest entry goes first when full.
@Suite struct ProbeCacheTests {
    static let start = ContinuousClock.now

    /// A result told apart from others by its `tlsVersion` (a wire value standing for a label).
    static func seen(_ label: UInt16) -> ProbeResult {
        ProbeResult(outcome: .failed(.probeTimeout), address: nil, tlsVersion: TLSVersion(wire: label))
    }

    static func key(_ name: String, port: UInt16 = 443) -> ProbeHub.Key {
        ProbeHub.Key(serverName: name, port: port, addresses: [IPAddress("127.0.0.1")!])
    }

    static func at(_ seconds: Int) -> ContinuousClock.Instant { start + .seconds(seconds) }

    @Test func anEntryIsFoundUntilItsDeadlineAndThenDropped() {
        var cache = ProbeCache(capacity: 8)
        cache.store(Self.seen(0xa), for: Self.key("a.test"), at: Self.at(0), until: Self.at(60))
        #expect(cache.lookup(Self.key("a.test"), at: Self.at(59), storedWithin: .seconds(60))?.tlsVersion?.wire == 0xa)
        #expect(cache.lookup(Self.key("a.test"), at: Self.at(60), storedWithin: .seconds(600)) == nil)
        #expect(cache.count == 0)  // the expired entry went at that lookup
    }

    /// A reload that shortens `verify_cache_ttl` applies to what is already cached.
    @Test func aShorterTTLAtLookupExpiresAnEntryBeforeItsDeadline() {
        var cache = ProbeCache(capacity: 8)
        cache.store(Self.seen(0xa), for: Self.key("a.test"), at: Self.at(0), until: Self.at(60))
        #expect(cache.lookup(Self.key("a.test"), at: Self.at(9), storedWithin: .seconds(10))?.tlsVersion?.wire == 0xa)
        #expect(cache.lookup(Self.key("a.test"), at: Self.at(10), storedWithin: .seconds(10)) == nil)
        #expect(cache.lookup(Self.key("a.test"), at: Self.at(11), storedWithin: .seconds(60)) == nil)  // dropped, not hidden
    }

    /// Name, port, addresses and parent hop are all part of the key: a chain seen for one is never
    /// handed to another.
    @Test func onlyTheSameTargetAddressesAndPortShareAnEntry() {
        var cache = ProbeCache(capacity: 8)
        cache.store(Self.seen(0xa), for: Self.key("a.test"), at: Self.at(0), until: Self.at(60))
        let otherAddress = ProbeHub.Key(serverName: "a.test", port: 443, addresses: [IPAddress("127.0.0.2")!])
        let noName = ProbeHub.Key(serverName: nil, port: 443, addresses: [IPAddress("127.0.0.1")!])
        for other in [Self.key("b.test"), Self.key("a.test", port: 8443), otherAddress, noName] {
            #expect(cache.lookup(other, at: Self.at(1), storedWithin: .seconds(60)) == nil)
        }
        #expect(cache.lookup(Self.key("a.test"), at: Self.at(1), storedWithin: .seconds(60))?.tlsVersion?.wire == 0xa)
    }

    @Test func aNewerResultReplacesTheOldOne() {
        var cache = ProbeCache(capacity: 8)
        cache.store(Self.seen(0x01d), for: Self.key("a.test"), at: Self.at(0), until: Self.at(60))
        cache.store(Self.seen(0xe0), for: Self.key("a.test"), at: Self.at(30), until: Self.at(90))
        #expect(cache.count == 1)
        #expect(cache.lookup(Self.key("a.test"), at: Self.at(70), storedWithin: .seconds(60))?.tlsVersion?.wire == 0xe0)
    }

    /// Full, the cache drops the entry stored longest ago; an entry stored again counts from its
    /// new store (the stale place it left in the order is skipped).
    @Test func theOldestStoreGoesFirstWhenFull() {
        var cache = ProbeCache(capacity: 2)
        cache.store(Self.seen(0xa), for: Self.key("a.test"), at: Self.at(0), until: Self.at(60))
        cache.store(Self.seen(0xb), for: Self.key("b.test"), at: Self.at(1), until: Self.at(60))
        cache.store(Self.seen(0xa2), for: Self.key("a.test"), at: Self.at(2), until: Self.at(60))
        cache.store(Self.seen(0xc), for: Self.key("c.test"), at: Self.at(3), until: Self.at(60))
        #expect(cache.count == 2)
        #expect(cache.lookup(Self.key("b.test"), at: Self.at(4), storedWithin: .seconds(60)) == nil)
        #expect(cache.lookup(Self.key("a.test"), at: Self.at(4), storedWithin: .seconds(60))?.tlsVersion?.wire == 0xa2)
        #expect(cache.lookup(Self.key("c.test"), at: Self.at(4), storedWithin: .seconds(60))?.tlsVersion?.wire == 0xc)
    }

    /// Storing the same key over and over keeps one entry and a bounded order list.
    @Test func restoringOneKeyStaysBounded() {
        var cache = ProbeCache(capacity: 4)
        for round in 0..<1_000 {
            cache.store(Self.seen(UInt16(round)), for: Self.key("a.test"), at: Self.at(round), until: Self.at(round + 60))
        }
        #expect(cache.count == 1)
        #expect(cache.order.count <= 2 * cache.capacity)
        #expect(cache.lookup(Self.key("a.test"), at: Self.at(1_000), storedWithin: .seconds(60))?.tlsVersion?.wire == 999)
    }

    /// What one worker forgets, every worker's cache forgets: an entry stored before the host:port
    /// was forgotten is not found, one stored after it is; other host:ports and ports keep theirs.
    @Test func aForgottenHostPortHidesEveryEntryStoredBefore() {
        let book = ForgottenChains()
        var cache = ProbeCache(capacity: 8)
        cache.store(Self.seen(0xa), for: Self.key("a.test"), at: Self.at(0), until: Self.at(60))
        cache.store(Self.seen(0xb), for: Self.key("b.test"), at: Self.at(0), until: Self.at(60))
        cache.store(Self.seen(0xc), for: Self.key("a.test", port: 8443), at: Self.at(0), until: Self.at(60))
        book.forget(Authority(target: .name("a.test"), port: 443), at: Self.at(5))
        func found(_ key: ProbeHub.Key) -> UInt16? {
            cache.lookup(key, at: Self.at(6), storedWithin: .seconds(60), unless: { book.isForgotten(key, storedAt: $0) })?.tlsVersion?.wire
        }
        #expect(found(Self.key("a.test")) == nil)
        #expect(found(Self.key("b.test")) == 0xb && found(Self.key("a.test", port: 8443)) == 0xc)
        cache.store(Self.seen(0xd), for: Self.key("a.test"), at: Self.at(7), until: Self.at(60))
        #expect(found(Self.key("a.test")) == 0xd)
    }

    /// An IP literal is forgotten by its address; past its capacity the book drops its oldest
    /// host:port and forgets everything stored up to then instead (a probe more, never a stale chain).
    @Test func theBookIsBoundedByForgettingMore() {
        let book = ForgottenChains(capacity: 2)
        let literal = ProbeHub.Key(serverName: nil, port: 443, addresses: [IPAddress("127.0.0.2")!])
        book.forget(Authority(target: .ip(IPAddress("127.0.0.2")!), port: 443), at: Self.at(1))
        #expect(book.isForgotten(literal, storedAt: Self.at(1)) && !book.isForgotten(literal, storedAt: Self.at(2)))
        #expect(!book.isForgotten(Self.key("c.test"), storedAt: Self.at(0)))
        book.forget(Authority(target: .name("a.test"), port: 443), at: Self.at(2))
        book.forget(Authority(target: .name("b.test"), port: 443), at: Self.at(3))
        #expect(book.count == 2)
        #expect(book.isForgotten(Self.key("c.test"), storedAt: Self.at(1)) && !book.isForgotten(Self.key("c.test"), storedAt: Self.at(2)))
        #expect(book.isForgotten(Self.key("b.test"), storedAt: Self.at(3)))
    }

    /// A forget a day old covers nothing a cache still holds: it goes, and the floor covers it.
    @Test func aDayOldForgetIsDropped() {
        let book = ForgottenChains()
        book.forget(Authority(target: .name("a.test"), port: 443), at: Self.at(10))
        book.forget(Authority(target: .name("b.test"), port: 443), at: Self.at(10 + 25 * 3600))
        #expect(book.count == 1)
        #expect(book.isForgotten(Self.key("c.test"), storedAt: Self.at(10)) && !book.isForgotten(Self.key("a.test"), storedAt: Self.at(11)))
    }
}
