import PinPolicy
import Testing
@testable import ProxyCore

/// Which silent connections a worker closes in a flood, without a socket.
@Suite struct SilentConnectionsTests {
    let loopback = IPAddress("127.0.0.1")!
    let other = IPAddress("10.0.0.7")!

    @Test func underTheLimitNothingIsClosed() {
        var silent = SilentConnections(limit: 3)
        #expect(silent.arrived(1, from: loopback) == [] && silent.arrived(2, from: loopback) == [] && silent.arrived(3, from: loopback) == [])
        #expect(silent.count == 3)
    }

    /// Past the limit the oldest goes first, never the newcomer; a connection that spoke is not silent.
    @Test func theOldestSilentConnectionIsClosedFirst() {
        var silent = SilentConnections(limit: 2)
        _ = silent.arrived(1, from: loopback)
        _ = silent.arrived(2, from: loopback)
        silent.left(1)  // it sent its request
        #expect(silent.arrived(3, from: loopback) == [])
        #expect(silent.arrived(4, from: loopback) == [2])
        #expect(silent.arrived(5, from: loopback) == [3])
        #expect(!silent.contains(3) && silent.contains(4) && silent.contains(5) && silent.count == 2)
    }

    /// The address that holds the most loses its oldest, even when another address's is older.
    @Test func theBusiestAddressPaysForTheFlood() {
        var silent = SilentConnections(limit: 4)
        _ = silent.arrived(1, from: other)
        for id in 2...4 { _ = silent.arrived(id, from: loopback) }
        #expect(silent.arrived(5, from: loopback) == [2])
        #expect(silent.contains(1))
        // A newcomer from a quiet address is spared; the busy address pays again.
        #expect(silent.arrived(6, from: other) == [3])
    }

    /// A lower limit (the descriptor limit was lowered) is applied by the next arrival.
    @Test func aLowerLimitIsAppliedOnTheNextArrival() {
        var silent = SilentConnections(limit: 10)
        for id in 1...6 { _ = silent.arrived(id, from: loopback) }
        silent.setLimit(3)
        #expect(silent.arrived(7, from: loopback) == [1, 2, 3, 4])
        #expect(silent.count == 3)
    }

    /// Thousands of connections that spoke leave nothing behind; the book stays consistent.
    @Test func aLongRunOfSpeakersLeavesNothingBehind() {
        var silent = SilentConnections(limit: 8)
        _ = silent.arrived(0, from: loopback)  // one stays silent throughout
        for id in 1...10_000 {
            #expect(silent.arrived(id, from: loopback) == [])
            silent.left(id)
        }
        #expect(silent.count == 1 && silent.contains(0))
        silent.left(0)
        #expect(silent.count == 0)
    }
}
