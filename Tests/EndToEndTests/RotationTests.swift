import Foundation
import Testing
import TestSupport

/// Rotation warnings: a leaf a probe saw expiring within 30 days (`certificate_expiring`), a rule
/// whose pins have all matched one chain for a week (`pin_without_backup`), and the debug bypass
/// banner repeated hourly, each at most once per host a day (the banner once an hour). The proxy is
/// a debug build: `PINPROXY_TEST_CLOCK_FILE` names a file of seconds it adds to the warnings' clock,
/// so these tests move time by a day or a week by rewriting it.
@Suite(.serialized) struct RotationTests {
    /// A clock file (offset 0) and the environment that points the proxy at it.
    final class TestClock {
        let path: String
        init() throws { path = try temporaryFile("0", name: "clock") }
        func set(_ seconds: Double) throws { try String(seconds).write(toFile: path, atomically: true, encoding: .utf8) }
        var environment: [String: String] { ProcessInfo.processInfo.environment.merging(["PINPROXY_TEST_CLOCK_FILE": path]) { $1 } }
    }

    /// A leaf for api.pinproxy.test and *.api.pinproxy.test with leaf-ec256's key (so its pin is
    /// `Pins.leafEC`), issued now by the good intermediate for `days` days: its chain and key files.
    static func shortLivedChain(days: Int) throws -> (chain: String, key: String) {
        let directory = try temporaryDirectory()
        let key = Paths.fixture("leaf-ec256.key.pem")
        try "subjectAltName=DNS:api.pinproxy.test,DNS:*.api.pinproxy.test\nextendedKeyUsage=serverAuth\nbasicConstraints=critical,CA:FALSE\n"
            .write(toFile: directory + "/ext.cnf", atomically: true, encoding: .utf8)
        let csr = try run("/usr/bin/openssl", ["req", "-new", "-key", key, "-subj", "/O=pinproxy tests/CN=api.pinproxy.test", "-out", directory + "/leaf.csr"])
        #expect(csr.status == 0, "\(csr.stderr)")
        let sign = try run("/usr/bin/openssl", ["x509", "-req", "-in", directory + "/leaf.csr", "-CA", Paths.fixture("good-intermediate.pem"),
                                                "-CAkey", Paths.fixture("good-intermediate.key.pem"), "-CAcreateserial", "-CAserial", directory + "/serial",
                                                "-days", String(days), "-sha256", "-extfile", directory + "/ext.cnf", "-out", directory + "/leaf.pem"])
        #expect(sign.status == 0, "\(sign.stderr)")
        let chain = try String(contentsOfFile: directory + "/leaf.pem", encoding: .utf8)
            + String(contentsOfFile: Paths.fixture("good-intermediate.pem"), encoding: .utf8)
        try chain.write(toFile: directory + "/chain.pem", atomically: true, encoding: .utf8)
        return (directory + "/chain.pem", key)
    }

    /// Curls a tunnel and waits for its close line, so every line its CONNECT caused is written.
    static func tunnel(_ proxy: ProxyProcess, _ host: String, _ port: UInt16, closes: inout Int) throws {
        #expect(try curl(proxy: proxy.port, host: host, port: port).status == 200)
        closes += 1
        #expect(proxy.events("tunnel_closed", count: closes).count == closes)
    }

    @Test func aLeafExpiringWithin30DaysIsReportedOncePerHostADay() throws {
        let files = try Self.shortLivedChain(days: 20)
        let server = try Upstream("leaf-ec256", name: "short", extra: ["--cert", files.chain, "--key", files.key])
        let lasting = try Upstream("leaf-ec256", name: "lasting")
        let clock = try TestClock()
        let rules = """
            rules:
              - host: api.pinproxy.test
                pins: ["\(Pins.leafEC)", "\(Pins.backup)"]
              - host: "*.api.pinproxy.test"
                pins: ["\(Pins.leafEC)", "\(Pins.backup)"]
            """
        let proxy = try ProxyProcess(config: policy(ports: [server.port, lasting.port], rules: rules,
                                                    resolve: "  api.pinproxy.test: 127.0.0.1\n  b.api.pinproxy.test: 127.0.0.1"),
                                     environment: clock.environment)
        var closes = 0
        try Self.tunnel(proxy, "api.pinproxy.test", server.port, closes: &closes)
        let first = try #require(proxy.waitFor("certificate_expiring"))
        #expect(first["level"] == "warning")
        #expect(first["host"] == "api.pinproxy.test" && first["port"] == String(server.port))
        #expect(first["rule"] == "api.pinproxy.test" && first["rule_line"] == "16")
        #expect(first["days_left"] == "19")
        #expect(first["leaf_spki"] == Pins.leafEC)
        #expect(first["leaf_cert"]?.hasPrefix("cert-sha256:") == true)
        #expect(first["leaf_subject"]?.contains("api.pinproxy.test") == true)
        let notAfter = try #require(first["leaf_not_after"].flatMap { ISO8601DateFormatter().date(from: $0) })
        #expect(abs(notAfter.timeIntervalSinceNow - 20 * 86400) < 3600)
        #expect(first["hint"]?.contains("'pinproxy pin api.pinproxy.test:\(server.port) --config \(proxy.configPath)'") == true)
        #expect(first["hint"]?.contains("rule at line 16") == true)

        // The same host again, that day: no second line; another host: its own.
        try Self.tunnel(proxy, "api.pinproxy.test", server.port, closes: &closes)
        try clock.set(23 * 3600)
        try Self.tunnel(proxy, "api.pinproxy.test", server.port, closes: &closes)
        try Self.tunnel(proxy, "b.api.pinproxy.test", server.port, closes: &closes)
        #expect(proxy.events("certificate_expiring").map { $0["host"] } == ["api.pinproxy.test", "b.api.pinproxy.test"])
        #expect(proxy.events("certificate_expiring").last?["rule_line"] == "18")

        // A day after the first line: once more, a day closer.
        try clock.set(86400 + 60)
        try Self.tunnel(proxy, "api.pinproxy.test", server.port, closes: &closes)
        try Self.tunnel(proxy, "api.pinproxy.test", server.port, closes: &closes)
        let lines = proxy.events("certificate_expiring").filter { $0["host"] == "api.pinproxy.test" }
        #expect(lines.count == 2)
        #expect(lines.last?["days_left"] == "18")
        // A long-lived leaf (the fixture's, a century) is never reported.
        try Self.tunnel(proxy, "api.pinproxy.test", lasting.port, closes: &closes)
        #expect(proxy.events("certificate_expiring").count == 3)
        #expect(proxy.stop() == 0)
    }

    @Test func pinsThatAllMatchOneChainForAWeekAreReportedOnceADay() throws {
        let server = try Upstream("leaf-ec256", name: "nobackup")
        let clock = try TestClock()
        let rules = """
            rules:
              - host: api.pinproxy.test
                pins: [{ pin: "\(Pins.leafEC)", label: leaf key }, "\(Pins.intermediate)"]
              - host: b.api.pinproxy.test
                pins: ["\(Pins.leafEC)", "\(Pins.backup)"]
            """
        // require_backup: off would silence every backup warning, this one too.
        let config = policy(ports: [server.port], rules: rules, resolve: "  api.pinproxy.test: 127.0.0.1\n  b.api.pinproxy.test: 127.0.0.1")
            .replacingOccurrences(of: "require_backup: off", with: "require_backup: warn")
        let proxy = try ProxyProcess(config: config, environment: clock.environment)
        let beforeFirst = Date()
        var closes = 0
        try Self.tunnel(proxy, "api.pinproxy.test", server.port, closes: &closes)
        let afterFirst = Date()
        try Self.tunnel(proxy, "b.api.pinproxy.test", server.port, closes: &closes)
        try clock.set(7 * 86400 - 3600)
        try Self.tunnel(proxy, "api.pinproxy.test", server.port, closes: &closes)
        #expect(proxy.events("pin_without_backup").isEmpty)

        try clock.set(7 * 86400 + 60)
        try Self.tunnel(proxy, "api.pinproxy.test", server.port, closes: &closes)
        try Self.tunnel(proxy, "api.pinproxy.test", server.port, closes: &closes)
        try Self.tunnel(proxy, "b.api.pinproxy.test", server.port, closes: &closes)  // a real backup: never
        let lines = proxy.events("pin_without_backup")
        #expect(lines.count == 1)
        let line = try #require(lines.first)
        #expect(line["level"] == "warning")
        #expect(line["host"] == "api.pinproxy.test" && line["port"] == String(server.port))
        #expect(line["rule"] == "api.pinproxy.test" && line["rule_line"] == "16")
        #expect(line["pin"] == Pins.leafEC && line["pin_label"] == "leaf key")
        let since = try #require(line["since"].flatMap { ISO8601DateFormatter().date(from: $0) })
        // The first tunnel's time, to the second it is written in, however long that tunnel took.
        #expect(since >= beforeFirst.addingTimeInterval(-1) && since <= afterFirst.addingTimeInterval(1), "\(since), first tunnel \(beforeFirst)–\(afterFirst)")
        #expect(line["hint"]?.contains("add a backup pin to the rule at line 16") == true)
        #expect(line["detail"]?.contains("every pin of the rule has matched this one chain since") == true)

        try clock.set(8 * 86400 + 120)
        try Self.tunnel(proxy, "api.pinproxy.test", server.port, closes: &closes)
        #expect(proxy.events("pin_without_backup").count == 2)
        #expect(proxy.events("pin_without_backup").last?["since"] == line["since"])
        #expect(proxy.stop() == 0)
    }

    @Test func anActiveDebugBypassIsAnnouncedHourly() throws {
        let clock = try TestClock()
        let until = RFC3339Text.inSeconds(86400)
        let config = policy(ports: [443], extra: "debug:\n  until: \"\(until)\"\n  hosts: [api.pinproxy.test, \"**.dev.pinproxy.test\"]")
        let proxy = try ProxyProcess(config: config, arguments: ["--debug-bypass"], environment: clock.environment)
        let first = try #require(proxy.waitFor("debug_bypass_active"))
        #expect(first["level"] == "warning" && first["hosts"] == "api.pinproxy.test,**.dev.pinproxy.test")
        // The clock is looked at every 100 ms in a test build: half a second is five looks. Real
        // time passes too, so each step keeps half a minute clear of the hour.
        usleep(500_000)
        try clock.set(3600 - 30)
        usleep(500_000)
        #expect(proxy.events("debug_bypass_active").count == 1)
        try clock.set(3600 + 5)
        #expect(proxy.events("debug_bypass_active", count: 2).count == 2)
        try clock.set(2 * 3600 - 30)
        usleep(500_000)
        #expect(proxy.events("debug_bypass_active").count == 2)
        try clock.set(2 * 3600 + 30)
        #expect(proxy.events("debug_bypass_active", count: 3).count == 3)
        let banners = proxy.events("debug_bypass_active")
        for banner in banners {
            #expect(banner.keys.sorted() == first.keys.sorted())
            #expect(banner["bypass_until"] == first["bypass_until"] && banner["detail"] == first["detail"])
        }
        // Past `until`: quiet.
        try clock.set(2 * 86400)
        usleep(500_000)
        #expect(proxy.events("debug_bypass_active").count == 3)
        #expect(proxy.stop() == 0)
    }

    /// Without the flag the section is inert: no banner, however long it runs.
    @Test func anInertBypassIsNeverAnnounced() throws {
        let clock = try TestClock()
        let config = policy(ports: [443], extra: "debug:\n  until: \"\(RFC3339Text.inSeconds(86400))\"\n  hosts: [api.pinproxy.test]")
        let proxy = try ProxyProcess(config: config, environment: clock.environment)
        #expect(proxy.waitFor("debug_bypass_inert") != nil)
        try clock.set(3 * 3600)
        usleep(500_000)
        #expect(proxy.events("debug_bypass_active").isEmpty)
        #expect(proxy.stop() == 0)
    }

    /// In the journal the rotation warnings are warning priority with their keys as fields.
    @Test func anExpiringLeafIsAJournalWarning() throws {
        let files = try Self.shortLivedChain(days: 10)
        let server = try Upstream("leaf-ec256", name: "journalled", extra: ["--cert", files.chain, "--key", files.key])
        let directory = try temporaryDirectory()
        let journal = try JournalListener(path: directory + "/journal")
        let proxy = try JournalTests.JournalledProxy(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC, Pins.backup))),
                                                     journal: directory + "/journal")
        let started = try #require(journal.entry { $0["PINPROXY_EVENT"] == "started" })
        let port = try #require(started["PINPROXY_LISTEN"]?.split(separator: ":").last.flatMap { UInt16($0) })
        #expect(try curl(proxy: port, host: "api.pinproxy.test", port: server.port).status == 200)
        let entry = try #require(journal.entry { $0["PINPROXY_EVENT"] == "certificate_expiring" })
        #expect(entry["PRIORITY"] == "4")
        #expect(entry["PINPROXY_HOST"] == "api.pinproxy.test" && entry["PINPROXY_DAYS_LEFT"] == "9")
        #expect(entry["PINPROXY_LEAF_SPKI"] == Pins.leafEC)
        #expect(entry["MESSAGE"] == "certificate_expiring api.pinproxy.test:\(server.port): the server's leaf certificate expires in 9 days; its renewal may bring a new key")
        #expect(proxy.stop() == 0)
    }
}
