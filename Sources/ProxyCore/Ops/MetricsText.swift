import Foundation
import PinPolicy

/// What one scrape reports: the `stats` line's values as they are (so the two never disagree),
/// and what only the metrics have room for.
struct MetricsSample {
    /// A `stats` line taken now; its counters also hold the refusals by reason and the reloads.
    var stats: StatsSample
    var probeLatency: ProbeLatency
    /// Log lines the writer dropped (`log_lines_dropped`'s counts, summed).
    var logLinesDropped: Int
    /// Metrics connections answered 503 because the metrics listener had its fill.
    var metricsConnectionsRefused = 0
    /// Wall-clock time the process started.
    var startTime: Date
}

/// The Prometheus text exposition format 0.0.4: for each family a `# HELP` and a `# TYPE` line, then
/// its samples; counters end in `_total`.
enum MetricsText {
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    enum Kind: String {
        case counter, gauge, histogram
    }

    /// A family whose samples are `stats` values, each with its labels.
    struct StatsFamily: Sendable {
        let name: String
        let kind: Kind
        let help: String
        let samples: [(labels: String, value: any KeyPath<StatsSample, Int> & Sendable)]
    }

    /// Every `stats` value, and the series that carries it. `MetricsTextTests` checks that each of
    /// `StatsSample.keys` has one, and `MetricsTests` compares a scrape with a `stats` line key by key.
    static let statsFamilies: [StatsFamily] = [
        StatsFamily(name: "pinproxy_connections_accepted_total", kind: .counter, help: "Client connections accepted (allow_clients is checked after).",
                    samples: [("", \.counters.accepted)]),
        StatsFamily(name: "pinproxy_requests_rejected_total", kind: .counter,
                    help: "Requests that were not a CONNECT pinproxy accepts, and clients outside allow_clients (request_rejected).",
                    samples: [("", \.counters.rejected)]),
        StatsFamily(name: "pinproxy_tunnels_total", kind: .counter, help: "Tunnels opened, by verdict.",
                    samples: [("verdict=\"allowed\"", \.counters.allowed), ("verdict=\"bypassed\"", \.counters.bypassed), ("verdict=\"unpinned\"", \.counters.unpinned)]),
        StatsFamily(name: "pinproxy_tunnels_refused_total", kind: .counter,
                    help: "CONNECTs refused and tunnels closed by the stream check (tunnel_refused); by reason in pinproxy_refusals_total.",
                    samples: [("", \.counters.refused)]),
        StatsFamily(name: "pinproxy_tunnels_closed_total", kind: .counter, help: "Sessions closed without a refusal (tunnel_closed).",
                    samples: [("", \.counters.closed)]),
        StatsFamily(name: "pinproxy_tunnels_active", kind: .gauge, help: "Tunnels open now (counted against max_tunnels).",
                    samples: [("", \.tunnels)]),
        StatsFamily(name: "pinproxy_sessions_active", kind: .gauge, help: "Client connections open now, tunnels or not.",
                    samples: [("", \.activeSessions)]),
        StatsFamily(name: "pinproxy_session_objects_live", kind: .gauge, help: "Session objects not yet freed (0 when idle).",
                    samples: [("", \.counters.liveSessionObjects)]),
        StatsFamily(name: "pinproxy_silent_connections_reaped_total", kind: .counter,
                    help: "Connections closed before their first request head to make room in a flood of silent connections.",
                    samples: [("", \.counters.silentReaped)]),
        StatsFamily(name: "pinproxy_silent_connections_closed_total", kind: .counter,
                    help: "Connections that ended without sending a byte: they left, or stayed silent for header_timeout.",
                    samples: [("", \.counters.silentClosed)]),
        StatsFamily(name: "pinproxy_tunnel_bytes_total", kind: .counter,
                    help: "Bytes relayed by tunnels that have ended: up is client to upstream, down is upstream to client.",
                    samples: [("direction=\"up\"", \.counters.bytesUp), ("direction=\"down\"", \.counters.bytesDown)]),
        StatsFamily(name: "pinproxy_probes_total", kind: .counter, help: "Probes started (TCP connect and TLS handshake to an upstream).",
                    samples: [("", \.probes)]),
        StatsFamily(name: "pinproxy_probe_cache_hits_total", kind: .counter, help: "CONNECTs answered from the verification cache instead of a probe.",
                    samples: [("", \.probeCacheHits)]),
        StatsFamily(name: "pinproxy_keylog_lines_total", kind: .counter, help: "Key-log lines read.", samples: [("", \.keyLog.lines)]),
        StatsFamily(name: "pinproxy_keylog_kept_total", kind: .counter, help: "Key-log lines handed to a waiting TLS 1.3 tunnel.",
                    samples: [("", \.keyLog.kept)]),
        StatsFamily(name: "pinproxy_keylog_dropped_total", kind: .counter, help: "Key-log lines dropped as read (no tunnel waits for them).",
                    samples: [("", \.keyLog.dropped)]),
        StatsFamily(name: "pinproxy_keylog_unparsable_total", kind: .counter, help: "Key-log lines that are not LABEL RANDOM SECRET.",
                    samples: [("", \.keyLog.unparsable)]),
        StatsFamily(name: "pinproxy_keylog_too_long_total", kind: .counter, help: "Key-log lines over the line limit.",
                    samples: [("", \.keyLog.tooLong)]),
        StatsFamily(name: "pinproxy_keylog_watches", kind: .gauge, help: "Tunnels waiting for a key-log line now.",
                    samples: [("", \.keyLogWatches)]),
        StatsFamily(name: "pinproxy_keylog_watches_refused_total", kind: .counter, help: "Tunnels that could not wait for a key-log line (table full).",
                    samples: [("", \.keyLog.watchesRefused)]),
        StatsFamily(name: "pinproxy_keylog_skipped_bytes_total", kind: .counter, help: "Key-log bytes passed over unparsed in a flood (no waiting tunnel could need them).",
                    samples: [("", \.keyLogSkippedBytes)]),
        StatsFamily(name: "pinproxy_workers", kind: .gauge, help: "Worker loops (proxy.workers).",
                    samples: [("", \.workers)]),
        StatsFamily(name: "pinproxy_interceptions_suspected_total", kind: .counter,
                    help: "Looks with one ClientHello shown a passing and a failing chain, each proved by the server (interception_suspected).",
                    samples: [("", \.counters.interceptionsSuspected)]),
        StatsFamily(name: "pinproxy_quarantined", kind: .gauge, help: "Host:ports quarantined now after a caught interception.",
                    samples: [("", \.quarantined)]),
        StatsFamily(name: "pinproxy_resumptions_unverified_total", kind: .counter,
                    help: "Pinned TLS 1.3 tunnels that resumed a session with no key-log line (verify=resumption-unverified).",
                    samples: [("", \.counters.unverifiedResumptions)]),
        StatsFamily(name: "pinproxy_mirrors_unavailable_total", kind: .counter,
                    help: "Pinned TLS 1.3 tunnels whose mirror could not be made (verify=probe-only reason=\(TunnelReason.mirrorUnavailable.rawValue)).",
                    samples: [("", \.counters.mirrorsUnavailable)]),
        StatsFamily(name: "pinproxy_tunnels_without_client_hello_total", kind: .counter,
                    help: "Pinned tunnels closed because their client sent no ClientHello after the 200 (close_reason=\(CloseCode.clientHelloTimeout.rawValue) or \(CloseCode.reclaimed.rawValue)).",
                    samples: [("", \.counters.withoutClientHello)]),
    ]

    static func render(_ sample: MetricsSample, version: String = BuildInfo.version) -> String {
        var out = ""
        func family(_ name: String, _ kind: Kind, _ help: String) {
            out += "# HELP \(name) \(help)\n# TYPE \(name) \(kind.rawValue)\n"
        }
        func line(_ name: String, _ labels: String, _ value: String) {
            out += labels.isEmpty ? "\(name) \(value)\n" : "\(name){\(labels)} \(value)\n"
        }
        for f in statsFamilies {
            family(f.name, f.kind, f.help)
            for s in f.samples { line(f.name, s.labels, String(sample.stats[keyPath: s.value])) }
        }
        family("pinproxy_refusals_total", .counter, "Tunnel refusals by reason code (as in tunnel_refused); only reasons seen since start.")
        // One series per `reason` code: a stage's reasons that share a code (a pin mismatch at the
        // probe and in the stream) add up.
        let byCode = Dictionary(sample.stats.counters.refusedByReason.map { ($0.key.code, $0.value) }, uniquingKeysWith: +)
        for (reason, count) in byCode.sorted(by: { $0.key < $1.key }) {
            line("pinproxy_refusals_total", "reason=\"\(escape(reason))\"", String(count))
        }
        family("pinproxy_probe_duration_seconds", .histogram, "Probe duration, from the first TCP connect to the server's chain (or the failure).")
        for bucket in sample.probeLatency.cumulative {
            line("pinproxy_probe_duration_seconds_bucket", "le=\"\(bucket.bound)\"", String(bucket.count))
        }
        line("pinproxy_probe_duration_seconds_sum", "", number(sample.probeLatency.sum))
        line("pinproxy_probe_duration_seconds_count", "", String(sample.probeLatency.count))
        family("pinproxy_reloads_total", .counter, "SIGHUP reloads, by result (failed: the file was invalid and the old policy stayed).")
        line("pinproxy_reloads_total", "result=\"ok\"", String(sample.stats.counters.reloadsSucceeded))
        line("pinproxy_reloads_total", "result=\"failed\"", String(sample.stats.counters.reloadsFailed))
        family("pinproxy_log_lines_dropped_total", .counter, "Log lines dropped because the log reader did not keep up.")
        line("pinproxy_log_lines_dropped_total", "", String(sample.logLinesDropped))
        family("pinproxy_metrics_connections_refused_total", .counter, "Metrics connections answered 503 because the metrics listener had its fill.")
        line("pinproxy_metrics_connections_refused_total", "", String(sample.metricsConnectionsRefused))
        family("pinproxy_build_info", .gauge, "Always 1; the version label is what pinproxy --version prints.")
        line("pinproxy_build_info", "version=\"\(escape(version))\"", "1")
        family("process_start_time_seconds", .gauge, "Start time of the process since the Unix epoch, in seconds.")
        line("process_start_time_seconds", "", number(sample.startTime.timeIntervalSince1970))
        return out
    }

    /// A float as the format reads it: no exponent for the values we have, no trailing zeros.
    static func number(_ value: Double) -> String {
        if value == value.rounded() && abs(value) < 1e15 { return String(Int(value)) }
        var text = String(format: "%.6f", value)
        while text.hasSuffix("0") { text.removeLast() }
        return text
    }

    /// A label value: backslash, double quote and newline escaped.
    static func escape(_ value: String) -> String {
        value.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"").replacingOccurrences(of: "\n", with: "\\n")
    }
}
