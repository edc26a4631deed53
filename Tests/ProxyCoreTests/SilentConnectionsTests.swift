import PinPolicy
import Testing
@testable import ProxyCore

/// Which silent connections a worker closes in a flood, without a socket.
@Suite struct SilentConnectionsTests {
    let loopback = IPAddress("127.0.0.1")!
    let otherLoopback = IPAddress("127.45.6.7")!
    let remote = IPAddress("10.0.0.7")!
    let remote2 = IPAddress("10.0.0.8")!
    static let allIdle: @Sendable (Int) -> SilentConnections.Activity = { _ in .idle }

    @Test func underTheLimitNothingIsClosed() {
        var silent = SilentConnections(limit: 6)
        for id in 1...3 { #expect(silent.arrived(id, from: loopback, activity: Self.allIdle) == []) }
        #expect(silent.count == 3)
    }

    /// Past the limit the oldest goes first, never the newcomer; a connection that spoke is not silent.
    @Test func theOldestSilentConnectionIsClosedFirst() {
        var silent = SilentConnections(limit: 2)
        _ = silent.arrived(1, from: remote, activity: Self.allIdle)
        _ = silent.arrived(2, from: remote2, activity: Self.allIdle)
        silent.left(1)  // it sent its request
        #expect(silent.arrived(3, from: remote, activity: Self.allIdle) == [])
        #expect(silent.arrived(4, from: loopback, activity: Self.allIdle) == [2])
        #expect(silent.arrived(5, from: remote2, activity: Self.allIdle) == [3])
        #expect(!silent.contains(3) && silent.contains(4) && silent.contains(5) && silent.count == 2)
    }

    /// One client may hold half the limit: past it, its own oldest go, even when another client's
    /// connection is older. Every loopback address is one client (any local process can bind any).
    @Test func oneClientHoldsAtMostHalf() {
        var silent = SilentConnections(limit: 8)
        _ = silent.arrived(1, from: remote, activity: Self.allIdle)
        for id in 2...5 { #expect(silent.arrived(id, from: id % 2 == 0 ? loopback : otherLoopback, activity: Self.allIdle) == []) }
        #expect(silent.arrived(6, from: otherLoopback, activity: Self.allIdle) == [2])
        #expect(silent.contains(1))
    }

    /// A pinned tunnel still without its client's hello counts by the descriptors it holds: arriving
    /// with six, it makes the book shed the oldest idle members until the weight is within the
    /// limit; gone, its six are free again.
    @Test func aTunnelWithoutItsHelloCountsByItsDescriptors() {
        var silent = SilentConnections(limit: 14)
        for id in 1...6 { _ = silent.arrived(id, from: id % 2 == 0 ? remote : remote2, activity: Self.allIdle) }
        // Its client would hold 3 + 6, over its 7: its two oldest go.
        #expect(silent.arrived(7, from: remote, weight: 6, activity: Self.allIdle) == [2, 4])
        #expect(silent.weight == 10 && silent.count == 5)
        silent.left(7)
        #expect(silent.weight == 4 && silent.count == 4)
        // Never more than a client's share for one member (7 here), however many it holds.
        #expect(silent.arrived(8, from: loopback, weight: 40, activity: Self.allIdle) == [])
        #expect(silent.weight == 11)
    }

    /// A connection silent again (a tunnel back in the book after its CONNECT) is as new as its
    /// last arrival: its first arrival's place in the order is not its own any more.
    @Test func aConnectionSilentAgainIsAsNewAsItsLastArrival() {
        let remote3 = IPAddress("10.0.0.9")!
        var silent = SilentConnections(limit: 4)
        _ = silent.arrived(1, from: remote, activity: Self.allIdle)
        _ = silent.arrived(2, from: remote2, activity: Self.allIdle)
        silent.left(1)  // it spoke
        _ = silent.arrived(3, from: remote3, activity: Self.allIdle)
        _ = silent.arrived(1, from: remote, activity: Self.allIdle)  // silent again
        #expect(silent.arrived(4, from: remote2, activity: Self.allIdle) == [])
        #expect(silent.arrived(5, from: remote3, activity: Self.allIdle) == [2])
        #expect(silent.arrived(6, from: remote, activity: Self.allIdle) == [3])
        #expect(silent.arrived(7, from: remote2, activity: Self.allIdle) == [1])  // now the oldest
    }

    /// A connection whose request is arriving is spared — it stays in the book until it has
    /// spoken — and the next oldest goes.
    @Test func aConnectionWhoseRequestIsArrivingIsSpared() {
        var silent = SilentConnections(limit: 4)
        for (id, address) in [(1, remote), (2, remote2), (3, loopback), (4, loopback)] {
            _ = silent.arrived(id, from: address, activity: Self.allIdle)
        }
        let oneArrives: (Int) -> SilentConnections.Activity = { $0 == 1 ? .arriving : .idle }
        #expect(silent.arrived(5, from: remote, activity: oneArrives) == [2])  // 2 goes instead
        #expect(silent.contains(1) && silent.count == 4)
        #expect(silent.arrived(6, from: remote2, activity: oneArrives) == [3])
        #expect(silent.arrived(7, from: remote2, activity: Self.allIdle) == [1])  // still silent later: it goes
    }

    /// A slow client that has sent part of its head goes only after every connection that sent
    /// nothing; with none of those left, the oldest trickling one goes (a slowloris flood is bounded).
    @Test func tricklingConnectionsGoAfterIdleOnes() {
        var silent = SilentConnections(limit: 4)
        for id in 1...4 { _ = silent.arrived(id, from: id <= 2 ? remote : remote2, activity: Self.allIdle) }
        let slow: Set<Int> = [1, 3]
        let activity: (Int) -> SilentConnections.Activity = { slow.contains($0) ? .trickling : .idle }
        #expect(silent.arrived(5, from: loopback, activity: activity) == [2])
        #expect(silent.arrived(6, from: loopback, activity: activity) == [4])
        #expect(silent.arrived(7, from: IPAddress("10.9.9.9")!, activity: activity) == [5])
        let allSlow: (Int) -> SilentConnections.Activity = { _ in .trickling }
        #expect(silent.arrived(8, from: IPAddress("10.9.9.10")!, activity: allSlow) == [1])
    }

    /// A lower limit (the descriptor limit was lowered) is applied by the next arrival.
    @Test func aLowerLimitIsAppliedOnTheNextArrival() {
        var silent = SilentConnections(limit: 20)
        for id in 1...6 { _ = silent.arrived(id, from: remote, activity: Self.allIdle) }
        silent.setLimit(3)
        #expect(silent.arrived(7, from: remote2, activity: Self.allIdle) == [1, 2, 3, 4])
        #expect(silent.count == 3)
    }

    /// Thousands of connections that spoke, while one stays silent throughout, leave nothing behind:
    /// the storage stays near the number of members.
    @Test func aLongRunOfSpeakersLeavesNothingBehind() {
        var silent = SilentConnections(limit: 8)
        _ = silent.arrived(0, from: loopback, activity: Self.allIdle)
        for id in 1...10_000 {
            #expect(silent.arrived(id, from: loopback, activity: Self.allIdle) == [])
            silent.left(id)
        }
        #expect(silent.count == 1 && silent.contains(0) && silent.storedIds <= 2 + 64)
        silent.left(0)
        #expect(silent.count == 0 && silent.storedIds == 0)
    }

    /// A connection already answered (a 408, an alert, lingering while it is written) goes after
    /// those that sent nothing and before a slow client's half head.
    @Test func answeredConnectionsGoBetweenIdleAndTrickling() {
        var silent = SilentConnections(limit: 3)
        for id in 1...3 { _ = silent.arrived(id, from: IPAddress("10.0.0.\(id)")!, activity: Self.allIdle) }
        let kinds: [Int: SilentConnections.Activity] = [1: .trickling, 2: .answered, 3: .idle]
        #expect(silent.arrived(4, from: IPAddress("10.0.0.4")!) { kinds[$0] ?? .idle } == [3])
        #expect(silent.arrived(5, from: IPAddress("10.0.0.5")!) { kinds[$0] ?? .arriving } == [2])
        #expect(silent.arrived(6, from: IPAddress("10.0.0.6")!) { kinds[$0] ?? .arriving } == [1])
    }

    /// Only the oldest `window` candidates are looked at: a flood costs a bounded scan per arrival.
    @Test func theScanIsBoundedToTheOldest() {
        var silent = SilentConnections(limit: 200)
        for id in 1...200 { _ = silent.arrived(id, from: IPAddress("10.0.\(id / 250).\(id % 250)")!, activity: Self.allIdle) }
        var asked = 0
        let victims = silent.arrived(201, from: IPAddress("10.9.9.9")!) { id in
            asked += 1
            return id == 150 ? .idle : .arriving  // the only idle one is beyond the window
        }
        #expect(victims == [] && asked == SilentConnections.window)
    }
}
