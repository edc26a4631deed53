import Testing
@testable import ProxyCore

/// Which ClientHello randoms count as replayed, without a socket.
@Suite struct SeenHellosTests {
    static func random(_ n: Int) -> [UInt8] { (0..<32).map { UInt8(truncatingIfNeeded: n >> (8 * ($0 % 4))) ^ UInt8($0) } }

    @Test func aRandomSeenBeforeIsAReplay() {
        let seen = SeenHellos(capacity: 8)
        #expect(seen.note(Self.random(1)))
        #expect(seen.note(Self.random(2)))
        #expect(!seen.note(Self.random(1)))
        #expect(!seen.note(Self.random(2)))
    }

    /// The book keeps the last `capacity` randoms: the oldest leaves as the next comes, and a
    /// replay older than that passes as a new hello.
    @Test func theOldestRandomLeavesPastTheCapacity() {
        let seen = SeenHellos(capacity: 3)
        for n in 1...3 { #expect(seen.note(Self.random(n))) }
        #expect(seen.note(Self.random(4)))  // 1 leaves
        #expect(!seen.note(Self.random(2)) && !seen.note(Self.random(3)) && !seen.note(Self.random(4)))
        #expect(seen.note(Self.random(1)))  // forgotten: new again (and 2 leaves)
        #expect(seen.note(Self.random(2)))
    }
}
