import Foundation
import Testing
import TestSupport

/// `pinproxy pin --from-log`: the proxy's own decision lines, as it wrote them in this test (logfmt,
/// JSON, and the journal's `-o export` and `-o json` forms), turned into ready rules, most used host
/// first, a host whose chain changed during the window marked and left in report mode; and the rule
/// printed for a host, pasted into a policy, lets that host through enforced and silent.
@Suite(.serialized) struct OnboardingTests {
    static let collecting = "rules:\n  - host: \"**.api.pinproxy.test\"\n    mode: report\n    pins: [\"\(Pins.backup)\"]"
    static let trust = "ca-file:\(Paths.fixture("both-roots.pem"))"

    /// The rule `--from-log` prints for b.api.pinproxy.test: the leaf key, the issuing CA marked as
    /// the accepted backup, the trust the proxy judged the chain under.
    static func bRule(connects: Int) -> String {
        """
        # b.api.pinproxy.test: \(connects) CONNECTs, one chain
        - host: "b.api.pinproxy.test"
          trust: "\(trust)"
          pins:
            - { pin: "\(Pins.leafEC)", at: leaf, label: "CN=api.pinproxy.test,O=pinproxy tests" }
            - { pin: "\(Pins.intermediate)", at: ca, label: "CN=pinproxy good intermediate,O=pinproxy tests", backup: true }
            # backup: true accepts the issuing CA as the backup: any key it certifies for the name passes.
            # Stricter: replace that line with a spare key not in use yet, kept offline: { file: next-key.pub.pem, at: leaf, label: backup }
        """
    }

    @Test(arguments: ["text", "json"])
    func fromLogRanksHostsMarksAChangedChainAndItsRuleHolds(format: String) throws {
        let good = try Upstream("leaf-ec256", name: "genuine")
        let rogue = try Upstream("rogue-leaf", name: "other", port: good.port, extra: ["--bind", "127.0.0.2"])
        // api.pinproxy.test answers 127.0.0.1 first, then 127.0.0.2: its chain changes in the window.
        let dns = try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/dns.py", "api.pinproxy.test", "127.0.0.1", "127.0.0.2"])
        // c.api.pinproxy.test is enforced with a pin its server does not have: refused, never proposed.
        let rules = Self.collecting + "\n  - host: c.api.pinproxy.test\n    pins: [\"\(Pins.backup)\"]"
        let config = policy(ports: [good.port], rules: rules, resolve: "  b.api.pinproxy.test: 127.0.0.1\n  c.api.pinproxy.test: 127.0.0.1",
                            proxy: "log_format: \(format)\ndns: { nameservers: [\"127.0.0.1:\(dns.port)\"], hosts_file: none }")
            .replacingOccurrences(of: "  dns: { nameservers: [], hosts_file: none }\n", with: "")
        let proxy = try ProxyProcess(config: config)
        for _ in 0..<3 { #expect(try curl(proxy: proxy.port, host: "b.api.pinproxy.test", port: good.port).body == "hello from genuine\n") }
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port).body == "hello from genuine\n")
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port).body == "hello from other\n")
        #expect(try curl(proxy: proxy.port, host: "c.api.pinproxy.test", port: good.port).connectStatus == 502)
        #expect(proxy.events("tunnel_closed", count: 5).count == 5)
        #expect(proxy.waitFor("tunnel_refused")?.refusal == .policy(.pinMismatch))
        #expect(proxy.stop() == 0)

        let r = try run(Paths.pinproxy, ["pin", "--from-log", proxy.logPath])
        #expect(r.status == 0, "\(r.stderr)")
        let lines = proxy.lines.count
        #expect(r.stdout.hasPrefix("""
            # pinproxy pin --from-log: 2 hosts from 5 decision lines with a verified chain (\(lines) records read, 0 lines not pinproxy's).
            # Trust on first use: these are the keys the servers presented during the window; take them only if that traffic
            # crossed a network you trust. Ready-to-paste rules (under rules:), most used first.

            \(Self.bRule(connects: 3))

            # api.pinproxy.test: 2 CONNECTs, CHAIN CHANGED during the window (2 chains): the rule takes the latest in mode: report;
            # confirm its keys out of band before you enforce it. Chains seen:
            #   1×  leaf \(Pins.leafEC) (CN=api.pinproxy.test,O=pinproxy tests), issuer \(Pins.intermediate) (CN=pinproxy good intermediate,O=pinproxy tests)
            #   1×  leaf \(Pins.rogueLeaf) (CN=api.pinproxy.test,O=pinproxy tests), issuer
            """))
        #expect(r.stdout.contains("\n- host: \"api.pinproxy.test\"\n  trust: \"\(Self.trust)\"\n  mode: report\n  pins:\n    - { pin: \"\(Pins.rogueLeaf)\", at: leaf"))
        #expect(r.stdout.hasSuffix("\n\n# Not proposed: chains the policy refused (or only the debug bypass let through): c.api.pinproxy.test (1)\n"))
        #expect(!r.stdout.contains("- host: \"c.api.pinproxy.test\""))

        // The rule as printed, pasted under rules: and enforced: the host passes, and nothing warns.
        let pasted = "rules:\n" + Self.bRule(connects: 3).split(separator: "\n").map { "  " + $0 }.joined(separator: "\n")
        let enforced = try ProxyProcess(config: policy(ports: [good.port], rules: pasted, resolve: "  b.api.pinproxy.test: 127.0.0.1")
            .replacingOccurrences(of: "require_backup: off", with: "require_backup: warn"))
        #expect(try curl(proxy: enforced.port, host: "b.api.pinproxy.test", port: good.port).body == "hello from genuine\n")
        let allowed = try #require(enforced.waitFor("tunnel_allowed"))
        #expect(allowed["pin"] == Pins.leafEC && allowed["mode"] == "enforce")
        #expect(enforced.events("tunnel_closed", count: 1).count == 1)
        #expect(enforced.events("tunnel_warning").isEmpty && enforced.events("policy_warning").isEmpty)
        #expect(enforced.stop() == 0)
        _ = rogue
    }

    /// A host that serves another certificate on each port, each steady: a rule per port, no change.
    @Test func aChainPerPortIsARulePerPortNotAChange() throws {
        let first = try Upstream("leaf-ec256", name: "first")
        let second = try Upstream("leaf-rotated", name: "second")
        let proxy = try ProxyProcess(config: policy(ports: [first.port, second.port], rules: Self.collecting,
                                                    resolve: "  b.api.pinproxy.test: 127.0.0.1"))
        for port in [first.port, second.port, first.port] {
            #expect(try curl(proxy: proxy.port, host: "b.api.pinproxy.test", port: port).status == 200)
        }
        #expect(proxy.events("tunnel_closed", count: 3).count == 3)
        #expect(proxy.stop() == 0)
        let r = try run(Paths.pinproxy, ["pin", "--from-log", proxy.logPath])
        #expect(r.stdout.hasSuffix("""

            # b.api.pinproxy.test: 3 CONNECTs on 2 ports, each port steady on a chain of its own: a rule per port
            - host: "b.api.pinproxy.test"
              ports: [\(first.port)]
              trust: "\(Self.trust)"
              pins:
                - { pin: "\(Pins.leafEC)", at: leaf, label: "CN=api.pinproxy.test,O=pinproxy tests" }
                - { pin: "\(Pins.intermediate)", at: ca, label: "CN=pinproxy good intermediate,O=pinproxy tests", backup: true }
                # backup: true accepts the issuing CA as the backup: any key it certifies for the name passes.
                # Stricter: replace that line with a spare key not in use yet, kept offline: { file: next-key.pub.pem, at: leaf, label: backup }
            - host: "b.api.pinproxy.test"
              ports: [\(second.port)]
              trust: "\(Self.trust)"
              pins:
                - { pin: "\(Pins.leafRotated)", at: leaf, label: "CN=api.pinproxy.test,O=pinproxy tests" }
                - { pin: "\(Pins.intermediate)", at: ca, label: "CN=pinproxy good intermediate,O=pinproxy tests", backup: true }
                # backup: true accepts the issuing CA as the backup: any key it certifies for the name passes.
                # Stricter: replace that line with a spare key not in use yet, kept offline: { file: next-key.pub.pem, at: leaf, label: backup }

            """), "\(r.stdout)")
        #expect(!r.stdout.contains("CHANGED"))
    }

    /// The journal's two export forms of the entries the proxy sent it, and standard input.
    @Test func fromLogReadsTheJournalsExportAndJSON() throws {
        let good = try Upstream("leaf-ec256", name: "genuine")
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let journal = try JournalListener(path: directory + "/journal")
        let config = policy(ports: [good.port], rules: Self.collecting, resolve: "  api.pinproxy.test: 127.0.0.1\n  b.api.pinproxy.test: 127.0.0.1")
        let proxy = try JournalTests.JournalledProxy(config: config, journal: directory + "/journal")
        let started = try #require(journal.entry { $0["PINPROXY_EVENT"] == "started" })
        let port = try #require(started["PINPROXY_LISTEN"]?.split(separator: ":").last.flatMap { UInt16($0) })
        for host in ["b.api.pinproxy.test", "b.api.pinproxy.test", "api.pinproxy.test"] {
            #expect(try curl(proxy: port, host: host, port: good.port).body == "hello from genuine\n")
        }
        let deadline = Date().addingTimeInterval(15)
        while journal.entries(waiting: 0.1).filter({ $0["PINPROXY_EVENT"] == "tunnel_closed" }).count < 3 && Date() < deadline {}
        #expect(proxy.stop() == 0)
        let entries = journal.entries(waiting: 0.2)
        #expect(entries.filter { $0["PINPROXY_EVENT"] == "tunnel_bypassed" }.count == 3)

        // `journalctl -o export`: cursor and timestamps first, a value with a newline in binary form.
        var export: [UInt8] = []
        var json = ""
        for (index, entry) in entries.enumerated() {
            var fields = [("__CURSOR", "s=test;i=\(index)"), ("__REALTIME_TIMESTAMP", String(1_800_000_000_000_000 + index))]
            fields += entry.sorted { $0.key < $1.key }
            for (name, value) in fields {
                if value.contains("\n") {
                    export += Array(name.utf8) + [0x0A]
                    withUnsafeBytes(of: UInt64(value.utf8.count).littleEndian) { export += $0 }
                    export += Array(value.utf8) + [0x0A]
                } else {
                    export += Array("\(name)=\(value)\n".utf8)
                }
            }
            export.append(0x0A)
            let object = Dictionary(uniqueKeysWithValues: fields)
            json += String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys]), as: UTF8.self) + "\n"
        }
        let exportPath = directory + "/export", jsonPath = directory + "/json"
        try Data(export).write(to: URL(fileURLWithPath: exportPath))
        try json.write(toFile: jsonPath, atomically: true, encoding: .utf8)

        let expected = """
            # pinproxy pin --from-log: 2 hosts from 3 decision lines with a verified chain (\(entries.count) records read, 0 lines not pinproxy's).
            # Trust on first use: these are the keys the servers presented during the window; take them only if that traffic
            # crossed a network you trust. Ready-to-paste rules (under rules:), most used first.

            \(Self.bRule(connects: 2))

            # api.pinproxy.test: 1 CONNECT, one chain
            - host: "api.pinproxy.test"
            """
        let fromExport = try run(Paths.pinproxy, ["pin", "--from-log", exportPath])
        #expect(fromExport.stdout.hasPrefix(expected), "\(fromExport.stdout)")
        let fromJSON = try run("/bin/sh", ["-c", "'\(Paths.pinproxy)' pin --from-log - < '\(jsonPath)'"])
        #expect(fromJSON.stdout == fromExport.stdout)
    }
}

/// `pin --export curl` checked by curl itself: the printed `--pinnedpubkey` lets curl reach the
/// genuine server and makes it refuse a rogue one for the same name (exit 90).
@Suite(.serialized) struct ExportedPinsWorkTests {
    @Test func curlAcceptsTheGenuineKeyAndRefusesTheRogue() throws {
        let good = try Upstream("leaf-ec256", name: "genuine")
        let rogue = try Upstream("rogue-leaf", name: "rogue")
        let config = try temporaryFile(policy(ports: [good.port, rogue.port],
                                              rules: "rules:\n  - host: api.pinproxy.test\n    ports: [\(good.port)]\n    pins:\n      - { pin: \"\(Pins.leafEC)\", at: leaf }\n      - { pin: \"\(Pins.intermediate)\", at: ca, backup: true }"))
        let exported = try run(Paths.pinproxy, ["pin", "--export", "curl", "--config", config])
        #expect(exported.status == 0, "\(exported.stderr)")
        let command = try #require(exported.stdout.split(separator: "\n").first { $0.hasPrefix("curl ") })
        #expect(command == "curl --pinnedpubkey \"sha256//\(Pins.leafEC.dropFirst("spki-sha256:".count))\" https://api.pinproxy.test:\(good.port)/")
        let pinned = String(command.split(separator: "\"")[1])
        func fetch(_ port: UInt16) throws -> Run {
            try run("/usr/bin/curl", ["-sS", "--max-time", "10", "--noproxy", "*", "--cacert", Paths.fixture("both-roots.pem"),
                                      "--resolve", "api.pinproxy.test:\(port):127.0.0.1", "--pinnedpubkey", pinned,
                                      "https://api.pinproxy.test:\(port)/"])
        }
        let genuine = try fetch(good.port)
        #expect(genuine.status == 0 && genuine.stdout == "hello from genuine\n", "\(genuine.stderr)")
        let refused = try fetch(rogue.port)
        #expect(refused.status == 90, "\(refused.stderr)")  // CURLE_SSL_PINNEDPUBKEYNOTMATCH
    }
}
