import Testing
@testable import ProxyCore

/// The supervisor's and the workers' counters add up field by field into what `stats` reports.
@Suite struct CountersTests {
    /// Every field set to a value of its own, so a field `+` forgets shows as a wrong sum.
    static func distinct(_ base: Int) -> Counters {
        var c = Counters()
        c.accepted = base + 1; c.rejected = base + 2; c.refused = base + 3; c.allowed = base + 4
        c.bypassed = base + 5; c.unpinned = base + 6; c.closed = base + 7; c.bytesUp = base + 8
        c.bytesDown = base + 9; c.closedByReload = base + 10; c.liveSessionObjects = base + 11
        c.silentReaped = base + 12; c.reloadsSucceeded = base + 13; c.reloadsFailed = base + 14
        c.interceptionsSuspected = base + 17; c.unverifiedResumptions = base + 18; c.mirrorsUnavailable = base + 19
        c.withoutClientHello = base + 20; c.silentClosed = base + 21
        c.refusedByReason = [.decision(.policy(.pinMismatch)): base + 15, .decision(.network(.dnsError)): base + 16]
        return c
    }

    /// Reads every `Int` field by name, so a field added later is checked without naming it here.
    static func intFields(_ c: Counters) -> [String: Int] {
        Dictionary(uniqueKeysWithValues: Mirror(reflecting: c).children.compactMap { child in
            (child.value as? Int).map { (child.label!, $0) }
        })
    }

    @Test func theSumAddsEveryFieldAndMergesTheReasons() {
        let a = Self.distinct(0), b = Self.distinct(100)
        // A field `distinct` does not set would be 0 + 0 and prove nothing: set it there first.
        #expect(Self.intFields(a).filter { $0.value == 0 }.isEmpty)
        let sum = a + b
        let fields = Self.intFields(sum), left = Self.intFields(a), right = Self.intFields(b)
        #expect(fields.count == 19)
        for (name, value) in fields { #expect(value == left[name]! + right[name]!, "\(name)") }
        #expect(sum.refusedByReason == [.decision(.policy(.pinMismatch)): 15 + 115, .decision(.network(.dnsError)): 16 + 116])
    }

    @Test func reasonsSeenOnOneSideOnlyAreKept() {
        var a = Counters(), b = Counters()
        a.countRefusal(.decision(.policy(.pinMismatch)))
        b.countRefusal(.decision(.network(.outOfFileDescriptors)))
        b.countRefusal(.decision(.policy(.pinMismatch)))
        b.countRefusal(.stream(.policy(.pinMismatch)))
        let sum = a + b
        #expect(sum.refused == 4)
        #expect(sum.refusedByReason == [.decision(.policy(.pinMismatch)): 2, .decision(.network(.outOfFileDescriptors)): 1,
                                        .stream(.policy(.pinMismatch)): 1])
    }

    @Test func theZeroSetIsNeutral() {
        let a = Self.distinct(7)
        #expect(a + Counters() == a)
        #expect(Counters() + a == a)
    }
}
