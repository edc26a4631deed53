import Foundation
import Testing
@testable import ProxyCore

/// `/metrics` rendered from a typed sample: every `stats` value has its series, and the text is the
/// exposition format byte for byte.
@Suite struct MetricsTextTests {
    /// Every value different, so a series reading the wrong field shows in the text.
    static var sample: MetricsSample {
        var counters = Counters()
        counters.accepted = 101; counters.rejected = 102; counters.refused = 103; counters.allowed = 104
        counters.bypassed = 105; counters.unpinned = 106; counters.closed = 107; counters.bytesUp = 108
        counters.bytesDown = 109; counters.closedByReload = 110; counters.liveSessionObjects = 111
        counters.silentReaped = 112; counters.reloadsSucceeded = 113; counters.reloadsFailed = 114
        counters.interceptionsSuspected = 115; counters.unverifiedResumptions = 116; counters.mirrorsUnavailable = 117
        counters.withoutClientHello = 118; counters.silentClosed = 119
        // A pin mismatch at the probe and one in the stream are one series (the line's `reason`).
        counters.refusedByReason = [.decision(.policy(.pinMismatch)): 2, .stream(.policy(.pinMismatch)): 1, .decision(.network(.dnsError)): 2,
                                    .decision(.network(.outOfFileDescriptors)): 1]
        var keyLog = KeyLogBook.Counters()
        keyLog.lines = 201; keyLog.kept = 202; keyLog.dropped = 203; keyLog.unparsable = 204; keyLog.tooLong = 205
        keyLog.watchesRefused = 206; keyLog.skippedBytes = 207
        let stats = StatsSample(counters: counters, activeSessions: 301, tunnels: 302, probes: 303, probeCacheHits: 304,
                                keyLog: keyLog, keyLogWatches: 305, workers: 4, quarantined: 306)
        var latency = ProbeLatency()
        latency.record(seconds: 0.003)
        latency.record(seconds: 0.3)
        latency.record(seconds: 20)
        return MetricsSample(stats: stats, probeLatency: latency, logLinesDropped: 401, metricsConnectionsRefused: 402,
                             startTime: Date(timeIntervalSince1970: 1_700_000_000.25))
    }

    @Test func everyStatsValueHasExactlyOneSeries() {
        let series = MetricsText.statsFamilies.flatMap { $0.samples.map { $0.value as AnyKeyPath } }
        let stats = StatsSample.keys.map { $0.value as AnyKeyPath }
        #expect(Set(series).count == series.count, "a value served twice")
        #expect(Set(series) == Set(stats))
    }

    /// The `stats` line's keys and their order, as the README's log reference and every parser of
    /// the line know them.
    @Test func theStatsLineKeepsItsKeysInOrder() {
        #expect(StatsSample().fields.map(\.0) == [
            "accepted", "active_sessions", "tunnels", "allowed", "refused", "bypassed", "unpinned_total", "rejected",
            "closed", "bytes_up", "bytes_down", "probes", "probe_cache_hits", "live_session_objects", "silent_reaped",
            "silent_closed", "keylog_lines", "keylog_kept", "keylog_dropped", "keylog_unparsable", "keylog_too_long", "keylog_watches",
            "keylog_watches_refused", "keylog_skipped_bytes", "workers", "interceptions_suspected", "quarantined",
            "resumptions_unverified", "mirrors_unavailable", "no_client_hello",
        ])
        let values = Self.sample.stats.fields.map { "\($0.0)=\($0.1.json)" }
        #expect(values.first == "accepted=101" && values.last == "no_client_hello=118" && values.contains("keylog_skipped_bytes=207"))
    }

    @Test func rendersTheExactText() {
        let text = MetricsText.render(Self.sample, version: "1.2.3 \"quoted\"\\")
        #expect(text == Self.expected)
    }

    static let expected = #"""
        # HELP pinproxy_connections_accepted_total Client connections accepted (allow_clients is checked after).
        # TYPE pinproxy_connections_accepted_total counter
        pinproxy_connections_accepted_total 101
        # HELP pinproxy_requests_rejected_total Requests that were not a CONNECT pinproxy accepts, and clients outside allow_clients (request_rejected).
        # TYPE pinproxy_requests_rejected_total counter
        pinproxy_requests_rejected_total 102
        # HELP pinproxy_tunnels_total Tunnels opened, by verdict.
        # TYPE pinproxy_tunnels_total counter
        pinproxy_tunnels_total{verdict="allowed"} 104
        pinproxy_tunnels_total{verdict="bypassed"} 105
        pinproxy_tunnels_total{verdict="unpinned"} 106
        # HELP pinproxy_tunnels_refused_total CONNECTs refused and tunnels closed by the stream check (tunnel_refused); by reason in pinproxy_refusals_total.
        # TYPE pinproxy_tunnels_refused_total counter
        pinproxy_tunnels_refused_total 103
        # HELP pinproxy_tunnels_closed_total Sessions closed without a refusal (tunnel_closed).
        # TYPE pinproxy_tunnels_closed_total counter
        pinproxy_tunnels_closed_total 107
        # HELP pinproxy_tunnels_active Tunnels open now (counted against max_tunnels).
        # TYPE pinproxy_tunnels_active gauge
        pinproxy_tunnels_active 302
        # HELP pinproxy_sessions_active Client connections open now, tunnels or not.
        # TYPE pinproxy_sessions_active gauge
        pinproxy_sessions_active 301
        # HELP pinproxy_session_objects_live Session objects not yet freed (0 when idle).
        # TYPE pinproxy_session_objects_live gauge
        pinproxy_session_objects_live 111
        # HELP pinproxy_silent_connections_reaped_total Connections closed before their first request head to make room in a flood of silent connections.
        # TYPE pinproxy_silent_connections_reaped_total counter
        pinproxy_silent_connections_reaped_total 112
        # HELP pinproxy_silent_connections_closed_total Connections that ended without sending a byte: they left, or stayed silent for header_timeout.
        # TYPE pinproxy_silent_connections_closed_total counter
        pinproxy_silent_connections_closed_total 119
        # HELP pinproxy_tunnel_bytes_total Bytes relayed by tunnels that have ended: up is client to upstream, down is upstream to client.
        # TYPE pinproxy_tunnel_bytes_total counter
        pinproxy_tunnel_bytes_total{direction="up"} 108
        pinproxy_tunnel_bytes_total{direction="down"} 109
        # HELP pinproxy_probes_total Probes started (TCP connect and TLS handshake to an upstream).
        # TYPE pinproxy_probes_total counter
        pinproxy_probes_total 303
        # HELP pinproxy_probe_cache_hits_total CONNECTs answered from the verification cache instead of a probe.
        # TYPE pinproxy_probe_cache_hits_total counter
        pinproxy_probe_cache_hits_total 304
        # HELP pinproxy_keylog_lines_total Key-log lines read.
        # TYPE pinproxy_keylog_lines_total counter
        pinproxy_keylog_lines_total 201
        # HELP pinproxy_keylog_kept_total Key-log lines handed to a waiting TLS 1.3 tunnel.
        # TYPE pinproxy_keylog_kept_total counter
        pinproxy_keylog_kept_total 202
        # HELP pinproxy_keylog_dropped_total Key-log lines dropped as read (no tunnel waits for them).
        # TYPE pinproxy_keylog_dropped_total counter
        pinproxy_keylog_dropped_total 203
        # HELP pinproxy_keylog_unparsable_total Key-log lines that are not LABEL RANDOM SECRET.
        # TYPE pinproxy_keylog_unparsable_total counter
        pinproxy_keylog_unparsable_total 204
        # HELP pinproxy_keylog_too_long_total Key-log lines over the line limit.
        # TYPE pinproxy_keylog_too_long_total counter
        pinproxy_keylog_too_long_total 205
        # HELP pinproxy_keylog_watches Tunnels waiting for a key-log line now.
        # TYPE pinproxy_keylog_watches gauge
        pinproxy_keylog_watches 305
        # HELP pinproxy_keylog_watches_refused_total Tunnels that could not wait for a key-log line (table full).
        # TYPE pinproxy_keylog_watches_refused_total counter
        pinproxy_keylog_watches_refused_total 206
        # HELP pinproxy_keylog_skipped_bytes_total Key-log bytes passed over unparsed in a flood (no waiting tunnel could need them).
        # TYPE pinproxy_keylog_skipped_bytes_total counter
        pinproxy_keylog_skipped_bytes_total 207
        # HELP pinproxy_workers Worker loops (proxy.workers).
        # TYPE pinproxy_workers gauge
        pinproxy_workers 4
        # HELP pinproxy_interceptions_suspected_total Looks with one ClientHello shown a passing and a failing chain, each proved by the server (interception_suspected).
        # TYPE pinproxy_interceptions_suspected_total counter
        pinproxy_interceptions_suspected_total 115
        # HELP pinproxy_quarantined Host:ports quarantined now after a caught interception.
        # TYPE pinproxy_quarantined gauge
        pinproxy_quarantined 306
        # HELP pinproxy_resumptions_unverified_total Pinned TLS 1.3 tunnels that resumed a session with no key-log line (verify=resumption-unverified).
        # TYPE pinproxy_resumptions_unverified_total counter
        pinproxy_resumptions_unverified_total 116
        # HELP pinproxy_mirrors_unavailable_total Pinned TLS 1.3 tunnels whose mirror could not be made (verify=probe-only reason=mirror_unavailable).
        # TYPE pinproxy_mirrors_unavailable_total counter
        pinproxy_mirrors_unavailable_total 117
        # HELP pinproxy_tunnels_without_client_hello_total Pinned tunnels closed because their client sent no ClientHello after the 200 (close_reason=client_hello_timeout or reclaimed).
        # TYPE pinproxy_tunnels_without_client_hello_total counter
        pinproxy_tunnels_without_client_hello_total 118
        # HELP pinproxy_refusals_total Tunnel refusals by reason code (as in tunnel_refused); only reasons seen since start.
        # TYPE pinproxy_refusals_total counter
        pinproxy_refusals_total{reason="dns_error"} 2
        pinproxy_refusals_total{reason="out_of_file_descriptors"} 1
        pinproxy_refusals_total{reason="pin_mismatch"} 3
        # HELP pinproxy_probe_duration_seconds Probe duration, from the first TCP connect to the server's chain (or the failure).
        # TYPE pinproxy_probe_duration_seconds histogram
        pinproxy_probe_duration_seconds_bucket{le="0.001"} 0
        pinproxy_probe_duration_seconds_bucket{le="0.0025"} 0
        pinproxy_probe_duration_seconds_bucket{le="0.005"} 1
        pinproxy_probe_duration_seconds_bucket{le="0.01"} 1
        pinproxy_probe_duration_seconds_bucket{le="0.025"} 1
        pinproxy_probe_duration_seconds_bucket{le="0.05"} 1
        pinproxy_probe_duration_seconds_bucket{le="0.1"} 1
        pinproxy_probe_duration_seconds_bucket{le="0.25"} 1
        pinproxy_probe_duration_seconds_bucket{le="0.5"} 2
        pinproxy_probe_duration_seconds_bucket{le="1"} 2
        pinproxy_probe_duration_seconds_bucket{le="2.5"} 2
        pinproxy_probe_duration_seconds_bucket{le="5"} 2
        pinproxy_probe_duration_seconds_bucket{le="+Inf"} 3
        pinproxy_probe_duration_seconds_sum 20.303
        pinproxy_probe_duration_seconds_count 3
        # HELP pinproxy_reloads_total SIGHUP reloads, by result (failed: the file was invalid and the old policy stayed).
        # TYPE pinproxy_reloads_total counter
        pinproxy_reloads_total{result="ok"} 113
        pinproxy_reloads_total{result="failed"} 114
        # HELP pinproxy_log_lines_dropped_total Log lines dropped because the log reader did not keep up.
        # TYPE pinproxy_log_lines_dropped_total counter
        pinproxy_log_lines_dropped_total 401
        # HELP pinproxy_metrics_connections_refused_total Metrics connections answered 503 because the metrics listener had its fill.
        # TYPE pinproxy_metrics_connections_refused_total counter
        pinproxy_metrics_connections_refused_total 402
        # HELP pinproxy_build_info Always 1; the version label is what pinproxy --version prints.
        # TYPE pinproxy_build_info gauge
        pinproxy_build_info{version="1.2.3 \"quoted\"\\"} 1
        # HELP process_start_time_seconds Start time of the process since the Unix epoch, in seconds.
        # TYPE process_start_time_seconds gauge
        process_start_time_seconds 1700000000.25

        """#
}
