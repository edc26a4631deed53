import Foundation
import Testing
import TestSupport

// The CT list through `pinproxy check`; the list fixture (CTListFixture) and the policy it is named
// in (CTListCommandTests.policy) are in CTListCommandTests.swift.

/// `pinproxy check` with a CT log list: it loads the list as the proxy does, lints it, and
/// `--explain` says which CT rule applies.
@Suite struct CheckCTTests {
    @Test func checkWarnsAboutAStaleListAndOneOperatorNamingTheFile() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let stale = try fixture.edited("stale.json") { json in
            json["log_list_timestamp"] = CTListCommandTests.rfc3339(Date().addingTimeInterval(-75 * 86400 - 60))
            var operators = json["operators"] as! [[String: Any]]
            operators.removeLast()
            json["operators"] = operators
        }
        let config = try CTListCommandTests.policy(fixture, target: stale)
        let r = try pinproxy("check", "--config", config)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("""
            \(config):3: warning[ct_list_stale]: \(stale): the list is 75 days old, older than ct_list_max_age (70 days): logs may have been retired or distrusted since; fetch the current one (pinproxy ct-list FILE --install)
            \(config):3: warning[ct_list_few_operators]: \(stale): only 'Test Operator A' has a usable or qualified log; Chrome's policy needs SCTs from 2 operators, so no certificate can comply with this list

            """), "\(r.stdout)")
        let strict = try pinproxy("check", "--config", config, "--strict")
        #expect(strict.status == 1)
        #expect(strict.stderr == "2 warnings with --strict\n")

        let current = try pinproxy("check", "--config", try CTListCommandTests.policy(fixture, target: fixture.list), "--strict")
        #expect(current.status == 0, "\(current.stderr)\(current.stdout)")
        #expect(!current.stdout.contains("warning"))
    }

    @Test func checkRefusesAListTheProxyWouldRefuse() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let broken = try fixture.edited("broken.json") { $0.editOperator(0) { $0["name"] = 7 } }
        let config = try CTListCommandTests.policy(fixture, target: broken)
        let r = try pinproxy("check", "--config", config)
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == "\(config):3:16: error: the CT log list \(broken) does not load: operators[0].name: expected a string\n\(config): 1 error; the policy was not loaded\n")
    }

    @Test func explainShowsTheCTRuleThatApplies() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let config = try fixture.file("pinproxy.yaml", """
            version: 1
            proxy:
              ct_log_list: \(fixture.list)
            defaults: { unpinned: allow, ct: require }
            rules:
              - host: internal.corp.test
                ct: off
              - host: "*.vendor.test"
                ct: report
              - host: api.test
                pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=", "spki-sha256:KCDrug7ej6zlHN6aFwgek+aRk6ExpqGsKfgGdPF+qhM="]
            """)
        let r = try pinproxy("check", "--config", config, "--explain", "internal.corp.test:443", "--explain", "api.test:443",
                             "--explain", "a.vendor.test:443", "--explain", "anything.test:443", "--explain", "api.test:80")
        #expect(r.status == 0, "\(r.stderr)")
        let ctLines = r.stdout.split(separator: "\n").filter { $0.hasPrefix("ct: ") }.map(String.init)
        let published = try #require(ctLines.first?.components(separatedBy: " published ").last?.components(separatedBy: ",").first)
        let list = "log list \(fixture.list) published \(published), 0 days old"
        #expect(ctLines == [
            "ct: off (rule at line 6); \(list)",
            "ct: require (defaults); \(list); both the pins and CT must hold",
            "ct: report (rule at line 8); \(list); no pins: only CT is checked",
            "ct: require (defaults); \(list); no rule: only CT is checked",
        ])  // port 80 is refused before any rule: no CT line
        #expect(r.stdout.hasSuffix("CONNECT api.test:80\nrefused before any rule: port 80 is not in proxy.allowed_ports (443) → 403\n"))

        let withoutList = try fixture.file("no-ct.yaml", "version: 1\ndefaults: { unpinned: allow }\n")
        let off = try pinproxy("check", "--config", withoutList, "--explain", "anything.test:443")
        #expect(off.stdout.hasSuffix("ct: off (defaults); no log list (proxy.ct_log_list is not set)\n"), "\(off.stdout)")
    }

    @Test func explainSaysWhenAStaleListTurnsRequireIntoReport() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let stale = try fixture.edited("stale.json") { $0["log_list_timestamp"] = CTListCommandTests.rfc3339(Date().addingTimeInterval(-71 * 86400 - 60)) }
        let report = try pinproxy("check", "--config", try CTListCommandTests.policy(fixture, target: stale), "--explain", "x.test:443")
        #expect(report.stdout.contains(", 71 days old: stale, so require is enforced as report (ct_stale_list: report); no rule: only CT is checked\n"), "\(report.stdout)")
        let refuse = try pinproxy("check", "--config", try CTListCommandTests.policy(fixture, target: stale, extra: "  ct_stale_list: refuse\n"), "--explain", "x.test:443")
        #expect(refuse.stdout.contains(", 71 days old: stale, still enforced (ct_stale_list: refuse); no rule: only CT is checked\n"), "\(refuse.stdout)")
    }
}
