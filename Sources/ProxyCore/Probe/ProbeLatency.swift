/// How long probes took, from the first TCP connect to the TLS judgement's input (or the failure),
/// as a Prometheus histogram: counts per bucket, their sum and count. A value; the probe hub adds to
/// it, the metrics text reads it.
struct ProbeLatency: Sendable, Equatable {
    /// Upper bounds in seconds: a loopback handshake takes about a millisecond, a far upstream a few
    /// hundred; `probe_timeout` defaults to 10 s, beyond the last bound (`+Inf` catches it).
    static let bounds: [Double] = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5]

    /// Observations per bucket (not cumulative); the last one is above every bound.
    private(set) var buckets = [Int](repeating: 0, count: ProbeLatency.bounds.count + 1)
    private(set) var sum: Double = 0
    private(set) var count = 0

    mutating func record(seconds: Double) {
        let index = Self.bounds.firstIndex { seconds <= $0 } ?? Self.bounds.count
        buckets[index] += 1
        sum += seconds
        count += 1
    }

    /// Two histograms added up (one per worker, for the scrape).
    static func + (a: Self, b: Self) -> Self {
        var sum = a
        for index in sum.buckets.indices { sum.buckets[index] += b.buckets[index] }
        sum.sum += b.sum
        sum.count += b.count
        return sum
    }

    /// Cumulative counts per upper bound, `+Inf` last (equal to `count`), as the format wants them.
    var cumulative: [(bound: String, count: Int)] {
        var running = 0
        return buckets.enumerated().map { index, n in
            running += n
            return (index < Self.bounds.count ? MetricsText.number(Self.bounds[index]) : "+Inf", running)
        }
    }
}
