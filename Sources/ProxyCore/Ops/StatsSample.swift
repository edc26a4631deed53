/// One `stats` line's values, typed: what the line writes and what `/metrics` serves, taken at one
/// instant and added up over the supervisor and every worker. The line's keys and their order live
/// in `keys` alone, and the metrics name their series by key path, so a series cannot go missing
/// by a misspelt key.
struct StatsSample: Equatable {
    var counters = Counters()
    /// Client connections open now, tunnels or not.
    var activeSessions = 0
    /// Tunnels open now (counted against `max_tunnels`).
    var tunnels = 0
    var probes = 0
    var probeCacheHits = 0
    /// The key-log intake's counters (all 0 without `proxy.keylog`, so the keys are always there).
    var keyLog = KeyLogBook.Counters()
    var keyLogWatches = 0
    var workers = 0
    /// Host:ports quarantined now after a caught interception.
    var quarantined = 0

    /// The `stats` line: its keys in their order, each with the value it reports.
    static let keys: [(name: String, value: any KeyPath<StatsSample, Int> & Sendable)] = [
        ("accepted", \.counters.accepted), ("active_sessions", \.activeSessions), ("tunnels", \.tunnels),
        ("allowed", \.counters.allowed), ("refused", \.counters.refused), ("bypassed", \.counters.bypassed),
        ("unpinned_total", \.counters.unpinned), ("rejected", \.counters.rejected), ("closed", \.counters.closed),
        ("bytes_up", \.counters.bytesUp), ("bytes_down", \.counters.bytesDown), ("probes", \.probes),
        ("probe_cache_hits", \.probeCacheHits), ("live_session_objects", \.counters.liveSessionObjects),
        ("silent_reaped", \.counters.silentReaped), ("silent_closed", \.counters.silentClosed),
        ("keylog_lines", \.keyLog.lines), ("keylog_kept", \.keyLog.kept), ("keylog_dropped", \.keyLog.dropped),
        ("keylog_unparsable", \.keyLog.unparsable), ("keylog_too_long", \.keyLog.tooLong), ("keylog_watches", \.keyLogWatches),
        ("keylog_watches_refused", \.keyLog.watchesRefused), ("keylog_skipped_bytes", \.keyLogSkippedBytes),
        ("workers", \.workers),
        ("interceptions_suspected", \.counters.interceptionsSuspected), ("quarantined", \.quarantined),
        ("resumptions_unverified", \.counters.unverifiedResumptions), ("mirrors_unavailable", \.counters.mirrorsUnavailable),
        ("no_client_hello", \.counters.withoutClientHello),
    ]

    /// The `stats` line's fields.
    var fields: [(String, LogValue)] {
        Self.keys.map { ($0.name, .int(self[keyPath: $0.value])) }
    }

    var keyLogSkippedBytes: Int { Int(keyLog.skippedBytes) }
}
