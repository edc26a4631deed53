import Foundation
import Testing
@testable import ProxyCore

/// The rotation warnings' limits, on made-up dates: once per target a day, a week's streak before a
/// rule is called without backup, the bypass banner hourly, and bounded tables.
@Suite struct RotationBookTests {
    let start = Date(timeIntervalSince1970: 1_800_000_000)
    let day: TimeInterval = 86400

    @Test func anExpiringLeafIsReportedOncePerTargetADay() {
        var book = RotationBook()
        let notAfter = start.addingTimeInterval(20 * day)
        let r1 = book.leafSeen(target: "a:443", notAfter: notAfter, at: start)
        #expect(r1)
        let r2 = book.leafSeen(target: "a:443", notAfter: notAfter, at: start.addingTimeInterval(day - 1))
        #expect(!r2)
        let r3 = book.leafSeen(target: "b:443", notAfter: notAfter, at: start.addingTimeInterval(60))
        #expect(r3)
        let r4 = book.leafSeen(target: "a:443", notAfter: notAfter, at: start.addingTimeInterval(day))
        #expect(r4)
        let r5 = book.leafSeen(target: "a:8443", notAfter: start.addingTimeInterval(31 * day), at: start)
        #expect(!r5)
        let r6 = book.leafSeen(target: "a:8443", notAfter: start.addingTimeInterval(31 * day), at: start.addingTimeInterval(1.5 * day))
        #expect(r6)
    }

    /// `tunnel_warning reason=no_real_backup`: once per rule a day, whichever host it was for.
    @Test func noRealBackupIsSaidOncePerRuleADay() {
        var book = RotationBook()
        let first = book.noRealBackupDue(rule: "5 **.a.test", at: start)
        let again = book.noRealBackupDue(rule: "5 **.a.test", at: start.addingTimeInterval(day - 1))
        let other = book.noRealBackupDue(rule: "9 b.test", at: start.addingTimeInterval(60))
        let nextDay = book.noRealBackupDue(rule: "5 **.a.test", at: start.addingTimeInterval(day))
        #expect(first && !again && other && nextDay)
    }

    @Test func aClockSteppedBackFarDoesNotSilenceAWarning() {
        var book = RotationBook()
        let notAfter = start.addingTimeInterval(20 * day)
        let r7 = book.leafSeen(target: "a:443", notAfter: notAfter, at: start)
        #expect(r7)
        let r8 = book.leafSeen(target: "a:443", notAfter: notAfter, at: start.addingTimeInterval(-3600))
        #expect(!r8)
        let r9 = book.leafSeen(target: "a:443", notAfter: notAfter, at: start.addingTimeInterval(-2 * day))
        #expect(r9)
    }

    @Test func pinsOnOneChainForAWeekAreReportedThenDaily() {
        var book = RotationBook()
        let key = RotationBook.StreakKey(ruleLine: 12, rule: "api.example.com", target: "api.example.com:443")
        let r10 = book.pinsMatched(key, allPinsOnOneChain: true, pin: "p", at: start)
        #expect(r10 == nil)
        let r11 = book.pinsMatched(key, allPinsOnOneChain: true, pin: "p", at: start.addingTimeInterval(7 * day - 1))
        #expect(r11 == nil)
        let r12 = book.pinsMatched(key, allPinsOnOneChain: true, pin: "p", at: start.addingTimeInterval(7 * day))
        #expect(r12 == start)
        let r13 = book.pinsMatched(key, allPinsOnOneChain: true, pin: "p", at: start.addingTimeInterval(7.5 * day))
        #expect(r13 == nil)
        let r14 = book.pinsMatched(key, allPinsOnOneChain: true, pin: "p", at: start.addingTimeInterval(8 * day))
        #expect(r14 == start)
    }

    @Test func aChainWithoutOneOfThePinsEndsTheStreak() {
        var book = RotationBook()
        let key = RotationBook.StreakKey(ruleLine: 12, rule: "api.example.com", target: "api.example.com:443")
        _ = book.pinsMatched(key, allPinsOnOneChain: true, pin: "p", at: start)
        _ = book.pinsMatched(key, allPinsOnOneChain: false, pin: "p", at: start.addingTimeInterval(3 * day))
        let r15 = book.pinsMatched(key, allPinsOnOneChain: true, pin: "p", at: start.addingTimeInterval(8 * day))
        #expect(r15 == nil)
        let r16 = book.pinsMatched(key, allPinsOnOneChain: true, pin: "p", at: start.addingTimeInterval(15 * day)) == start.addingTimeInterval(8 * day)
        #expect(r16)
        // Another pin matching now: a new chain, a new streak.
        let r17 = book.pinsMatched(key, allPinsOnOneChain: true, pin: "q", at: start.addingTimeInterval(30 * day))
        #expect(r17 == nil)
    }

    @Test func theBypassBannerIsHourlyWhileActive() {
        var book = RotationBook()
        let until = start.addingTimeInterval(3 * 3600)
        let r18 = book.bypassCheck(until: until, at: start)
        #expect(r18)
        let r19 = book.bypassCheck(until: until, at: start.addingTimeInterval(3599))
        #expect(!r19)
        let r20 = book.bypassCheck(until: until, at: start.addingTimeInterval(3600))
        #expect(r20)
        let r21 = book.bypassCheck(until: until, at: start.addingTimeInterval(3 * 3600))
        #expect(!r21)
        let r22 = book.bypassCheck(until: nil, at: start.addingTimeInterval(3 * 3600))
        #expect(!r22)
        // A new bypass after the first ended announces itself at once.
        let r23 = book.bypassCheck(until: start.addingTimeInterval(10 * 3600), at: start.addingTimeInterval(3 * 3600 + 1))
        #expect(r23)
    }

    @Test func theTablesAreBounded() {
        var book = RotationBook(capacity: 8)
        let notAfter = start.addingTimeInterval(day)
        for i in 0..<100 {
            let reported = book.leafSeen(target: "h\(i):443", notAfter: notAfter, at: start.addingTimeInterval(Double(i)))
            #expect(reported)
        }
        // The newest are remembered, the oldest forgotten (so reported again).
        let r24 = book.leafSeen(target: "h99:443", notAfter: notAfter, at: start.addingTimeInterval(100))
        #expect(!r24)
        let r25 = book.leafSeen(target: "h0:443", notAfter: notAfter, at: start.addingTimeInterval(101))
        #expect(r25)
    }
}

/// The histogram's buckets are cumulative and end in +Inf.
@Suite struct ProbeLatencyTests {
    @Test func bucketsAreCumulative() {
        var latency = ProbeLatency()
        for seconds in [0.0005, 0.001, 0.003, 0.2, 7.0] { latency.record(seconds: seconds) }
        let buckets = Dictionary(uniqueKeysWithValues: latency.cumulative.map { ($0.bound, $0.count) })
        #expect(buckets["0.001"] == 2 && buckets["0.0025"] == 2 && buckets["0.005"] == 3 && buckets["0.25"] == 4 && buckets["5"] == 4)
        #expect(buckets["+Inf"] == 5 && latency.count == 5)
        #expect(latency.cumulative.map(\.bound).last == "+Inf" && latency.cumulative.count == ProbeLatency.bounds.count + 1)
        #expect(abs(latency.sum - 7.2045) < 1e-9)
    }
}
