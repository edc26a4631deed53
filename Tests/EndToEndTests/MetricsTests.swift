import Foundation
import Testing
import TestSupport

/// `proxy.metrics_listen`: `GET /metrics` in Prometheus text format 0.0.4, with the very numbers of
/// the `stats` line, scraped with curl after real traffic.
@Suite(.serialized) struct MetricsTests {
    /// The series that carries each `stats` key. A key the proxy adds to `stats` without a series
    /// fails `aScrapeSaysWhatStatsSays`.
    static let seriesForStatsKey: [String: String] = [
        "accepted": "pinproxy_connections_accepted_total", "rejected": "pinproxy_requests_rejected_total",
        "allowed": "pinproxy_tunnels_total{verdict=\"allowed\"}", "bypassed": "pinproxy_tunnels_total{verdict=\"bypassed\"}",
        "unpinned_total": "pinproxy_tunnels_total{verdict=\"unpinned\"}", "refused": "pinproxy_tunnels_refused_total",
        "closed": "pinproxy_tunnels_closed_total", "tunnels": "pinproxy_tunnels_active", "active_sessions": "pinproxy_sessions_active",
        "live_session_objects": "pinproxy_session_objects_live", "silent_reaped": "pinproxy_silent_connections_reaped_total",
        "silent_closed": "pinproxy_silent_connections_closed_total",
        "bytes_up": "pinproxy_tunnel_bytes_total{direction=\"up\"}", "bytes_down": "pinproxy_tunnel_bytes_total{direction=\"down\"}",
        "probes": "pinproxy_probes_total", "probe_cache_hits": "pinproxy_probe_cache_hits_total",
        "keylog_lines": "pinproxy_keylog_lines_total", "keylog_kept": "pinproxy_keylog_kept_total",
        "keylog_dropped": "pinproxy_keylog_dropped_total", "keylog_unparsable": "pinproxy_keylog_unparsable_total",
        "keylog_too_long": "pinproxy_keylog_too_long_total", "keylog_watches": "pinproxy_keylog_watches",
        "keylog_watches_refused": "pinproxy_keylog_watches_refused_total", "keylog_skipped_bytes": "pinproxy_keylog_skipped_bytes_total",
        "workers": "pinproxy_workers", "interceptions_suspected": "pinproxy_interceptions_suspected_total",
        "quarantined": "pinproxy_quarantined", "resumptions_unverified": "pinproxy_resumptions_unverified_total",
        "mirrors_unavailable": "pinproxy_mirrors_unavailable_total",
        "no_client_hello": "pinproxy_tunnels_without_client_hello_total",
    ]

    struct Scrape {
        let status: Int
        let headers: String
        let body: String
        /// `name{labels}` → value.
        var samples: [String: String] {
            var out: [String: String] = [:]
            for line in body.split(separator: "\n") where !line.hasPrefix("#") {
                guard let space = line.lastIndex(of: " ") else { continue }
                out[String(line[..<space])] = String(line[line.index(after: space)...])
            }
            return out
        }
    }

    /// `curl -i` against the metrics listener.
    static func scrape(_ address: String, path: String = "/metrics", extra: [String] = []) throws -> Scrape {
        let r = try run("/usr/bin/curl", ["-sS", "-i", "--max-time", "10"] + extra + ["http://\(address)\(path)"], timeout: 20)
        let parts = r.stdout.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        let status = Int(head.split(separator: " ").dropFirst().first ?? "") ?? 0
        return Scrape(status: status, headers: head, body: parts.dropFirst().joined(separator: "\r\n\r\n"))
    }

    static func metricsAddress(_ proxy: ProxyProcess) throws -> String {
        try #require(proxy.waitFor("started")?["metrics_listen"].flatMap { $0 == "off" ? nil : $0 })
    }

    @Test func aScrapeSaysWhatStatsSays() throws {
        let good = try Upstream("leaf-ec256", name: "good")
        let rules = """
            rules:
              - host: api.pinproxy.test
                pins: ["\(Pins.leafEC)", "\(Pins.backup)"]
              - host: wrong.api.pinproxy.test
                pins: ["\(Pins.backup)"]
            """
        let resolve = "  api.pinproxy.test: 127.0.0.1\n  wrong.api.pinproxy.test: 127.0.0.1\n  free.pinproxy.test: 127.0.0.1"
        let started = Date()
        let proxy = try ProxyProcess(config: policy(ports: [good.port], rules: rules, resolve: resolve,
                                                    proxy: "stats_interval: 100ms\nmetrics_listen: \"127.0.0.1:0\""))
        let address = try Self.metricsAddress(proxy)
        #expect(address.hasPrefix("127.0.0.1:") && !address.hasSuffix(":0"))

        // Two allowed tunnels, one unpinned, a pin mismatch, a port not allowed, a bad request.
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port).body == "hello from good\n")
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port).body == "hello from good\n")
        #expect(try curl(proxy: proxy.port, host: "free.pinproxy.test", port: good.port, extra: ["--insecure"]).status == 200)
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "wrong.api.pinproxy.test:\(good.port)")) == "HTTP/1.1 502 Certificate Pin Mismatch")
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:1")) == "HTTP/1.1 403 Forbidden by Pin Policy")
        _ = try rawExchange(port: proxy.port, send: Array("GET / HTTP/1.1\r\n\r\n".utf8))
        // A good reload and a broken one.
        let original = try String(contentsOfFile: proxy.configPath, encoding: .utf8)
        proxy.signal(SIGHUP)
        #expect(proxy.waitFor("policy_reloaded") != nil)
        try proxy.reload("version: 1\nbogus: true\n")
        #expect(proxy.waitFor("policy_reload_failed") != nil)
        try original.write(toFile: proxy.configPath, atomically: true, encoding: .utf8)

        // Once all of it has ended, the counters stand still: a `stats` line and a scrape then agree.
        let stats = try #require(proxy.waitFor("stats") {
            $0["allowed"] == "2" && $0["unpinned_total"] == "1" && $0["refused"] == "2" && $0["rejected"] == "1" && $0["closed"] == "3"
                && $0["active_sessions"] == "0" && $0["live_session_objects"] == "0"
        })
        let scrape = try Self.scrape(address)
        #expect(scrape.status == 200)
        #expect(scrape.headers.contains("Content-Type: text/plain; version=0.0.4; charset=utf-8"))
        let samples = scrape.samples
        let statsKeys = Set(stats.keys).subtracting(["ts", "level", "event"])
        #expect(statsKeys.subtracting(Self.seriesForStatsKey.keys).isEmpty, "stats keys without a series: \(statsKeys.subtracting(Self.seriesForStatsKey.keys))")
        for key in statsKeys.sorted() {
            let series = Self.seriesForStatsKey[key] ?? "?"
            #expect(samples[series] == stats[key], "\(key)=\(stats[key] ?? "-") but \(series) \(samples[series] ?? "missing")")
        }
        #expect(Int(stats["bytes_down"] ?? "") ?? 0 > 0 && Int(stats["bytes_up"] ?? "") ?? 0 > 0)

        // What only the metrics carry.
        #expect(samples["pinproxy_refusals_total{reason=\"pin_mismatch\"}"] == "1")
        #expect(samples["pinproxy_refusals_total{reason=\"port_not_allowed\"}"] == "1")
        #expect(samples.filter { $0.key.hasPrefix("pinproxy_refusals_total{") }.count == 2)
        #expect(samples["pinproxy_reloads_total{result=\"ok\"}"] == "1" && samples["pinproxy_reloads_total{result=\"failed\"}"] == "1")
        #expect(samples["pinproxy_log_lines_dropped_total"] == "0")
        #expect(samples["pinproxy_build_info{version=\"\(proxy.waitFor("started")?["version"] ?? "?")\"}"] == "1")
        let startTime = try #require(samples["process_start_time_seconds"].flatMap(Double.init))
        #expect(startTime >= started.timeIntervalSince1970 - 1 && startTime <= Date().timeIntervalSince1970)
        // Every probe that ended is in the histogram: the count, the +Inf bucket, the probes counter.
        #expect(samples["pinproxy_probe_duration_seconds_count"] == stats["probes"])
        #expect(samples["pinproxy_probe_duration_seconds_bucket{le=\"+Inf\"}"] == stats["probes"])
        let bounds = samples.keys.filter { $0.hasPrefix("pinproxy_probe_duration_seconds_bucket") }.count
        #expect(bounds == 13)
        // The buckets and the sum agree with each other, however long the probes took on this
        // machine: cumulative counts never fall, and the sum lies between what the probes past each
        // bound must add and what the smallest bound that holds them all allows.
        let count = try #require(stats["probes"].flatMap { Double($0) })
        let sum = try #require(samples["pinproxy_probe_duration_seconds_sum"].flatMap(Double.init))
        let buckets: [(le: Double, count: Double)] = samples.compactMap { key, value in
            guard key.hasPrefix("pinproxy_probe_duration_seconds_bucket{le=\""), let count = Double(value) else { return nil }
            let bound = key.dropFirst("pinproxy_probe_duration_seconds_bucket{le=\"".count).dropLast(2)
            return bound == "+Inf" ? nil : Double(bound).map { ($0, count) }
        }.sorted { $0.le < $1.le }
        #expect(zip(buckets, buckets.dropFirst()).allSatisfy { $0.count <= $1.count } && (buckets.last?.count ?? 0) <= count, "\(buckets)")
        let atLeast = buckets.filter { $0.count < count }.map { (count - $0.count) * $0.le }.max() ?? 0
        let atMost = buckets.first { $0.count == count }.map { count * $0.le } ?? .infinity
        #expect(count > 0 && sum > 0 && sum >= atLeast && sum <= atMost, "sum \(sum) of \(count) probes: \(buckets)")

        // The format: every sample's family has HELP and TYPE before it, counters end in _total.
        var types: [String: String] = [:]
        for line in scrape.body.split(separator: "\n") {
            let words = line.split(separator: " ")
            if line.hasPrefix("# TYPE ") { types[String(words[2])] = String(words[3]); continue }
            if line.hasPrefix("# HELP ") { #expect(words.count > 3, "a HELP without text: \(line)"); continue }
            let name = String(words[0].split(separator: "{")[0])
            let family = ["_bucket", "_sum", "_count"].reduce(name) { types[$0] == nil && $0.hasSuffix($1) ? String($0.dropLast($1.count)) : $0 }
            let type = types[family]
            #expect(type != nil, "no TYPE before \(line)")
            if type == "counter" { #expect(family.hasSuffix("_total"), "\(family) is a counter") }
            #expect(Double(words.last ?? "") != nil, "not a number: \(line)")
        }

        // The final counters of `stopped` agree too (nothing moved since the scrape).
        #expect(proxy.stop() == 0)
        let stopped = try #require(proxy.waitFor("stopped"))
        for key in statsKeys.sorted() where key != "live_session_objects" {
            #expect(stopped[key] == stats[key], "\(key)")
        }
    }

    @Test func onlyGETOfMetricsIsServed() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: "metrics_listen: \"127.0.0.1:0\""))
        let address = try Self.metricsAddress(proxy)
        let other = try Self.scrape(address, path: "/")
        #expect(other.status == 404 && other.body == "pinproxy serves only /metrics here\n")
        #expect(try Self.scrape(address, path: "/metrics/extra").status == 404)
        #expect(try Self.scrape(address, path: "/metrics?name[]=x").status == 200)
        for method in ["POST", "PUT", "DELETE", "OPTIONS", "PATCH"] {
            let refused = try Self.scrape(address, extra: ["-X", method])
            #expect(refused.status == 405, "\(method)")
            #expect(refused.headers.contains("Allow: GET"), "\(method)")
        }
        // A request head over 8 KiB: refused, and the next scrape is served.
        let big = try Self.scrape(address, extra: ["-H", "X-Padding: " + String(repeating: "a", count: 16_000)])
        #expect(big.status == 431)
        // Not HTTP at all.
        let garbage = try rawExchange(port: UInt16(address.split(separator: ":").last!)!, send: Array("\u{16}\u{03}\u{01}\0\0\r\n\r\n".utf8), timeout: 10)
        #expect(garbage.isEmpty || garbage.hasPrefix("HTTP/1.1 400"))
        #expect(try Self.scrape(address).status == 200)
        #expect(proxy.stop() == 0, "\(proxy.log.suffix(3000))")
    }

    /// Clients that never send a request, or pipeline thousands and never read: the proxy goes on
    /// serving tunnels and scrapes; the second is closed after its first answer (`Connection: close`),
    /// the first after the metrics timeout (5 s).
    @Test func aClientThatNeverReadsCannotHoldTheProxy() throws {
        let good = try Upstream("leaf-ec256", name: "good")
        let proxy = try ProxyProcess(config: policy(ports: [good.port], rules: apiRule(pinsLine(Pins.leafEC, Pins.backup)),
                                                    proxy: "metrics_listen: \"127.0.0.1:0\""))
        let address = try Self.metricsAddress(proxy)
        let port = UInt16(address.split(separator: ":").last!)!
        let silent = try connectedSocket(port: port)
        defer { close(silent) }
        let greedy = try connectedSocket(port: port)
        defer { close(greedy) }
        var small: Int32 = 4096
        setsockopt(greedy, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        let request = Array(String(repeating: "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", count: 2000).utf8)
        var sent = 0
        var flags = fcntl(greedy, F_GETFL)
        flags |= O_NONBLOCK
        _ = fcntl(greedy, F_SETFL, flags)
        for _ in 0..<100 where sent < request.count {  // as much as the kernel takes, never blocking
            let n = request[sent...].withUnsafeBytes { send(greedy, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { break }
            sent += n
        }
        #expect(sent > 0)
        // Meanwhile: a tunnel and a scrape, and one tunnel held open, which the gauges count.
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port).body == "hello from good\n")
        let held = try connectedSocket(port: proxy.port)
        let connect = Array("CONNECT api.pinproxy.test:\(good.port) HTTP/1.1\r\n\r\n".utf8)
        _ = connect.withUnsafeBytes { send(held, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        #expect(proxy.waitFor("tunnel_allowed") { $0["conn"] != nil } != nil)
        #expect(proxy.events("tunnel_allowed", count: 2).count == 2)
        let during = try Self.scrape(address).samples
        #expect(during["pinproxy_tunnels_total{verdict=\"allowed\"}"] == "2")
        #expect(during["pinproxy_tunnels_active"] == "1" && during["pinproxy_sessions_active"] == "1")
        close(held)
        // Both are closed by the proxy within the timeout (bounded wait well past it).
        #expect(closedByPeer(silent, within: 15))
        #expect(closedByPeer(greedy, within: 15))
        #expect(try Self.scrape(address).status == 200)
        #expect(proxy.stop() == 0, "\(proxy.log.suffix(3000))")
    }

    /// A client that sends its head one byte every 1.5 s is closed 5 s after it connected, not
    /// 5 s after its last byte (the deadline is absolute): not before 5 s, and while it still
    /// trickles (a deadline counted from each byte would never come; the whole head takes 50 s).
    @Test func aTricklingClientIsClosedAtTheDeadline() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: "metrics_listen: \"127.0.0.1:0\""))
        let address = try Self.metricsAddress(proxy)
        let trickler = try connectedSocket(port: UInt16(address.split(separator: ":").last!)!)
        defer { close(trickler) }
        let started = Date()
        var closedAfter: Double?
        for byte in Array("GET /metrics HTTP/1.1\r\nHost: x\r\n".utf8) {  // never the blank line
            if closedByPeer(trickler, within: 1.5) {
                closedAfter = Date().timeIntervalSince(started)
                break
            }
            _ = [byte].withUnsafeBytes { send(trickler, $0.baseAddress, 1, Int32(MSG_NOSIGNAL)) }
            if Date().timeIntervalSince(started) > 40 { break }
        }
        let after = try #require(closedAfter, "still open after 40 s")
        #expect(after >= 4.5, "closed after \(after) s")
        #expect(try Self.scrape(address).status == 200)
    }

    /// At most 8 metrics connections at once. A process that holds 8 connections without a request
    /// (and reconnects as they close) cannot keep scrapes out: a new connection makes the oldest
    /// one without a request give up its slot, and the scrape is served.
    @Test func aFullMetricsListenerMakesRoomForAScrape() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: "metrics_listen: \"127.0.0.1:0\""))
        let address = try Self.metricsAddress(proxy)
        let port = UInt16(address.split(separator: ":").last!)!
        var holders = try (0..<8).map { _ in try connectedSocket(port: port) }
        defer { holders.forEach { close($0) } }
        for round in 0..<3 {  // each scrape takes the slot of the oldest holder; the hog refills
            usleep(200_000)  // the holders are accepted by the proxy's loop
            let scrape = try Self.scrape(address)
            #expect(scrape.status == 200, "round \(round)")
            #expect(closedByPeer(holders[round], within: 2), "holder \(round) still open")
            #expect(!closedByPeer(holders[round + 1], within: 0.05))  // the next oldest keeps its slot
            holders.append(try connectedSocket(port: port))
        }
    }

    @Test func changingTheAddressOnReloadNeedsARestart() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: "metrics_listen: \"127.0.0.1:0\""))
        let address = try Self.metricsAddress(proxy)
        let original = try String(contentsOfFile: proxy.configPath, encoding: .utf8)
        try proxy.reload(original.replacingOccurrences(of: "metrics_listen: \"127.0.0.1:0\"", with: "metrics_listen: \"127.0.0.2:0\""))
        let line = try #require(proxy.waitFor("restart_required"))
        #expect(line["level"] == "warning" && line["setting"] == "proxy.metrics_listen")
        #expect(line["detail"] == "proxy.metrics_listen changed: pinproxy keeps serving metrics on \(address) until it restarts")
        #expect(try Self.scrape(address).samples["pinproxy_reloads_total{result=\"ok\"}"] == "1")
        // Beyond loopback: the reload fails at the line and column, and the old address stays.
        try proxy.reload(original.replacingOccurrences(of: "metrics_listen: \"127.0.0.1:0\"", with: "metrics_listen: \"0.0.0.0:9464\""))
        let failed = try #require(proxy.waitFor("policy_reload_failed"))
        #expect(failed["detail"]?.contains("pinproxy.yaml:7:19: proxy.metrics_listen must be a loopback address") == true, "\(failed)")
        #expect(try Self.scrape(address).samples["pinproxy_reloads_total{result=\"failed\"}"] == "1")
        #expect(proxy.stop() == 0)
    }

    /// An address another process holds: the start fails with the reason, no half-started proxy.
    @Test func aTakenAddressIsAStartFailure() throws {
        let taken = try Upstream("leaf-ec256", name: "taken")
        let config = try temporaryFile(policy(ports: [443], proxy: "metrics_listen: \"127.0.0.1:\(taken.port)\""))
        let r = try run(Paths.pinproxy, ["run", "--config", config, "--listen", "127.0.0.1:0"], timeout: 20)
        #expect(r.status == 1)
        let line = parseLogLine(String(r.stderr.split(separator: "\n").last ?? ""))
        #expect(line["event"] == "start_failed")
        #expect(line["detail"] == "cannot listen for metrics on 127.0.0.1:\(taken.port): Address already in use")
    }

    @Test func offByDefault() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443]))
        #expect(proxy.waitFor("started")?["metrics_listen"] == "off")
        #expect(proxy.stop() == 0)
    }
}
