import Testing
@testable import ProxyCore

/// `accept_failed` is logged at most once per 10 s, with the failures in between counted.
@Suite struct LogThrottleTests {
    /// Occurrences at these offsets (seconds) → what each returns.
    @Test(arguments: [
        ([0.0], [0 as Int?]),
        ([0, 1, 2, 3], [0, nil, nil, nil]),
        ([0, 1, 2, 10], [0, nil, nil, 2]),            // the line at 10 s stands for the two unlogged
        ([0, 9.999, 10, 11, 25], [0, nil, 1, nil, 1]),
        ([0, 30, 60], [0, 0, 0]),                     // rare failures are each logged, none suppressed
    ])
    func onceEveryTenSeconds(offsets: [Double], expected: [Int?]) {
        var throttle = LogThrottle(interval: .seconds(10))
        let start = ContinuousClock.now
        let results = offsets.map { throttle.note(at: start.advanced(by: .milliseconds(Int($0 * 1000)))) }
        #expect(results == expected)
    }
}
