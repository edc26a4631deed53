import Foundation
import Testing
import TestSupport

/// The log reference (docs/logs.md) is the interface: the keys it documents are exactly the keys
/// the proxy emits, in text and in JSON, and every emitted event is documented.
@Suite(.serialized) struct LogReferenceTests {
    static let reference = (try? String(contentsOfFile: Paths.repository.appendingPathComponent("docs/logs.md").path, encoding: .utf8)) ?? ""

    static func table(after heading: String) -> [String] {
        guard let section = reference.components(separatedBy: heading).dropFirst().first?.components(separatedBy: "\n### ").first else { return [] }
        return section.split(separator: "\n").filter { $0.hasPrefix("| `") }.flatMap { row in
            row.split(separator: "|").first!.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`")) }
        }
    }

    /// Keys as documented: `chain.0.spki` is written `chain.N.spki`.
    static func normalised(_ key: String) -> String {
        key.split(separator: ".").map { $0.allSatisfy(\.isNumber) ? "N" : String($0) }.joined(separator: ".")
    }

    /// Runs scenarios that produce every documented event that a test can provoke, in one format,
    /// and returns the events and keys seen.
    func emitted(format: String) throws -> (events: Set<String>, keys: Set<String>) {
        let good = try Upstream("leaf-ec256", name: "good")
        let rogue = try Upstream("rogue-leaf", name: "rogue", port: good.port, extra: ["--bind", "127.0.0.2"])
        let rotated = try Upstream("leaf-rotated", name: "rotated", port: good.port, extra: ["--bind", "127.0.0.3"])
        let plain = try PlainHTTPTests.server()
        // A selective interceptor on TLS 1.3: the probe reaches the genuine server, the tunnel, its
        // mirror and the confirming look the rogue one (confirming_look outcome=same_chain).
        let genuine13 = try Upstream("leaf-ec256", name: "genuine 1.3", tls: "1.3")
        let rogue13 = try Upstream("rogue-leaf", name: "rogue 1.3", tls: "1.3")
        let interceptor = try Replayer(genuine: genuine13.port, abort: "none", then: rogue13.port)
        // Every second connection to the rogue server: with two mirrors, one hello's looks are
        // shown two chains (or, when the client's copy was the genuine one, both mirrors the rogue
        // chain and the confirming look the genuine one): interception_suspected.
        let guesser = try Interceptor(genuine: genuine13.port, rogue: rogue13.port, strategy: .every(2))
        defer { guesser.stop() }
        let config = """
            version: 1
            proxy:
              allowed_ports: [\(good.port), \(interceptor.port), \(guesser.port)]
              allowed_plain_ports: [\(plain.port)]
              deny_destinations: [link-local]
              dns: { nameservers: [], hosts_file: none }
              stats_interval: 200ms
              drain_timeout: 1s
            defaults: { unpinned: allow, trust: "ca-file:\(Paths.fixture("both-roots.pem"))", quarantine: 1s }
            resolve:
              api.pinproxy.test: 127.0.0.1
              x.api.pinproxy.test: 127.0.0.2
              y.api.pinproxy.test: 127.0.0.3
              free.pinproxy.test: 127.0.0.1
              mitm.api.pinproxy.test: 127.0.0.1
              caught.api.pinproxy.test: 127.0.0.1
            deny: ["\(Pins.leafRotated)"]
            rules:
              - host: api.pinproxy.test
                pins: [{ pin: "\(Pins.leafEC)", label: leaf }, "\(Pins.intermediate)"]
              - host: "*.api.pinproxy.test"
                pins: [{ pin: "\(Pins.leafEC)", at: leaf, label: leaf }]
              - host: caught.api.pinproxy.test
                pins: [{ pin: "\(Pins.leafEC)", at: leaf, label: leaf }]
                mirror_checks: 2
            debug:
              until: "\(RFC3339Text.inSeconds(3600))"
              hosts: [x.api.pinproxy.test]
            """
        var events = Set<String>(), keys = Set<String>()
        func collect(_ lines: [[String: String]]) {
            for line in lines {
                events.insert(line["event"] ?? "?")
                keys.formUnion(line.keys.map(Self.normalised))
            }
        }
        let proxy = try ProxyProcess(config: config, arguments: ["--debug-bypass", "--log-format", format])
        _ = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port)                 // allowed + warning + closed
        _ = try rawResponseHead(port: proxy.port, send: Array("CONNECT x.api.pinproxy.test:\(good.port) HTTP/1.1\r\n\r\n".utf8))  // bypassed (debug)
        _ = try connectResponse(proxy: proxy.port, target: "y.api.pinproxy.test:\(good.port)")      // refused (deny list)
        _ = try rawResponseHead(port: proxy.port, send: Array("CONNECT free.pinproxy.test:\(good.port) HTTP/1.1\r\n\r\n".utf8))  // unpinned
        _ = try rawExchange(port: proxy.port, send: Array("GET / HTTP/1.1\r\n\r\n".utf8))           // rejected
        _ = try rawExchange(port: proxy.port, send: [0x05, 0x01, 0x00])                            // rejected: SOCKS, with a hint
        _ = try rawExchange(port: proxy.port, send: Array("GET http://free.pinproxy.test:\(plain.port)/hello HTTP/1.1\r\nConnection: close\r\n\r\n".utf8))  // forwarded
        _ = try rawExchange(port: proxy.port, send: Array("GET http://api.pinproxy.test/ HTTP/1.1\r\n\r\n".utf8))  // rejected: a pinned host over plain HTTP
        #expect(proxy.waitFor("tunnel_closed") { $0["host"] == "free.pinproxy.test" } != nil)
        _ = try curl(proxy: proxy.port, host: "mitm.api.pinproxy.test", port: interceptor.port)  // refused (mirror), confirmed
        #expect(proxy.waitFor("confirming_look") != nil)
        _ = try curl(proxy: proxy.port, host: "caught.api.pinproxy.test", port: guesser.port)  // refused (mirror), suspected
        #expect(proxy.waitFor("interception_suspected") != nil)
        #expect(proxy.waitFor("quarantine_lifted") != nil)
        let original = try String(contentsOfFile: proxy.configPath, encoding: .utf8)
        try proxy.reload("version: 1\nbogus: true\n")
        #expect(proxy.waitFor("policy_reload_failed") != nil)
        try proxy.reload(original)
        #expect(proxy.waitFor("policy_reloaded") != nil)
        #expect(proxy.waitFor("stats") != nil)
        #expect(proxy.stop() == 0)
        collect(proxy.lines)

        let inert = try ProxyProcess(config: config, arguments: ["--log-format", format])
        #expect(inert.waitFor("debug_bypass_inert") != nil)
        #expect(inert.stop() == 0)
        collect(inert.lines)

        // accept_failed: the running proxy's descriptor limit lowered to where the next accept fails.
        let starved = try ProxyProcess(config: config, arguments: ["--log-format", format])
        let held = Set(starved.openDescriptors)
        try starved.limitDescriptors(soft: (0...).first { !held.contains(Int32($0)) }!, hard: nil)
        _ = try rawExchange(port: starved.port, send: [], timeout: 0.2)
        #expect(starved.waitFor("accept_failed") != nil)
        #expect(starved.stop() == 0)
        collect(starved.lines)

        collect(try certificateTransparencyLines(format: format))

        let broken = try temporaryFile("version: 1\ndefaults: {unpinned: maybe}\n")
        collect(try run(Paths.pinproxy, ["run", "--config", broken, "--log-format", format], timeout: 20).stderr.split(separator: "\n").map { parseLogLine(String($0)) })
        let open = try temporaryFile(config)
        collect(try run(Paths.pinproxy, ["run", "--config", open, "--log-format", format, "--listen", "0.0.0.0:0"], timeout: 20).stderr.split(separator: "\n").map { parseLogLine(String($0)) })
        _ = (rogue, rotated, genuine13, rogue13, interceptor)
        return (events, keys)
    }

    /// A stale log list (`ct_list_loaded`, `ct_list_stale`), a logged leaf (`ct=compliant`, `ct_scts`)
    /// and an unlogged one let through as report (`ct_detail`), from the CT test PKI made now.
    func certificateTransparencyLines(format: String) throws -> [[String: String]] {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(try run("/usr/bin/env", ["python3", Paths.fixture("ct/make-ct-fixtures.py"), "--out", dir]).status == 0)
        let list = try String(contentsOfFile: "\(dir)/log_list.json", encoding: .utf8)
        let stamp = try #require(list.firstRange(of: /"log_list_timestamp": "[^"]*"/))
        try list.replacingCharacters(in: stamp, with: #""log_list_timestamp": "2020-01-01T00:00:00Z""#)
            .write(toFile: "\(dir)/log_list.json", atomically: true, encoding: .utf8)
        let logged = try Upstream(name: "logged", extra: ["--cert", "\(dir)/two-operators.chain.pem", "--key", "\(dir)/two-operators.key.pem"])
        let unlogged = try Upstream(name: "unlogged", extra: ["--cert", "\(dir)/no-sct.chain.pem", "--key", "\(dir)/no-sct.key.pem"])
        let proxy = try ProxyProcess(config: """
            version: 1
            proxy:
              allowed_ports: [\(logged.port), \(unlogged.port)]
              deny_destinations: [link-local]
              dns: { nameservers: [], hosts_file: none }
              ct_log_list: \(dir)/log_list.json
            defaults: { unpinned: allow, ct: require }
            resolve:
              two-operators.ct.pinproxy.test: 127.0.0.1
              no-sct.ct.pinproxy.test: 127.0.0.1
            """, arguments: ["--log-format", format])
        for (name, port) in [("two-operators", logged.port), ("no-sct", unlogged.port)] {
            _ = try rawResponseHead(port: proxy.port, send: Array("CONNECT \(name).ct.pinproxy.test:\(port) HTTP/1.1\r\n\r\n".utf8))
        }
        #expect(proxy.waitFor("tunnel_unpinned") { $0["ct"] == "compliant" } != nil)
        #expect(proxy.waitFor("tunnel_bypassed") { $0["bypass"] == "ct_stale_list" && $0["ct"] == "report" } != nil)
        #expect(proxy.stop() == 0)
        return proxy.lines
    }

    @Test func theLogReferenceKeyTableEqualsTheKeysEmittedInBothFormats() throws {
        let documentedKeys = Set(Self.table(after: "### Log keys"))
        let documentedEvents = Set(Self.table(after: "### Events"))
        #expect(documentedKeys.count > 60 && documentedEvents.count > 15)
        let text = try emitted(format: "text")
        let json = try emitted(format: "json")
        #expect(text.keys == json.keys, "only in text: \(text.keys.subtracting(json.keys)); only in json: \(json.keys.subtracting(text.keys))")
        // `dropped` (log_lines_dropped) needs a stalled log reader: LogPipeTests and LogWriterTests cover it;
        // `probe_tls` a tunnel that negotiates another TLS version than its probe: StreamCheckTests;
        // `setting` (restart_required) a reload that changes what only a restart applies: ReloadUnderLoadTests, KeyLogIntakeTests.
        // `days_left`, `leaf_spki`, `leaf_cert`, `since`: the rotation warnings, which need a leaf about to expire
        // or a week on a moved clock: RotationTests.
        // `reaped`, `silent`, `limit`: a flood of silent connections (AbuseTests).
        // `bytes_per_s`, `skipped_bytes`, `watches`, `found`: a key-log flood or a swapped key log: KeyLogIntakeTests.
        // `via`, `original_dst`, `transparent_listen`: transparent mode, which needs a network namespace with
        // nftables redirect rules: TransparentTests (in both formats).
        let expectedKeys = documentedKeys.subtracting(["dropped", "probe_tls", "setting", "days_left", "leaf_spki", "leaf_cert",
                                                       "reaped", "silent", "limit", "bytes_per_s", "skipped_bytes", "watches", "found",
                                                       "via", "original_dst", "transparent_listen"])
        #expect(text.keys == expectedKeys, "undocumented: \(text.keys.subtracting(expectedKeys).sorted()); never emitted: \(expectedKeys.subtracting(text.keys).sorted())")
        #expect(text.events.isSubset(of: documentedEvents), "undocumented events: \(text.events.subtracting(documentedEvents))")
        // a libevent fault; a stalled reader (LogPipeTests); a restart-only setting reloaded (ReloadUnderLoadTests,
        // WorkerTests); the rotation warnings (RotationTests); a worker thread that outlives its loop (nothing a
        // test can make happen); a flood of silent connections (AbuseTests); a key-log flood or swap
        // (KeyLogIntakeTests; a failed swap needs a file another user owns)
        #expect(documentedEvents.subtracting(text.events) == ["libevent", "log_lines_dropped", "restart_required",
                                                              "certificate_expiring", "pin_without_backup", "worker_stuck",
                                                              "silent_connections_reaped", "keylog_flooded", "keylog_replaced",
                                                              "keylog_replace_failed"])
    }
}
