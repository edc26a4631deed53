import Foundation
import PinPolicy
import Testing
import TestSupport

/// The CT log list as an operator keeps it (issue 19): loaded with the policy and strictly, its
/// detached signature checked when a key is configured, a stale list enforced as `report` unless
/// told otherwise, and swapped by a reload.
@Suite(.serialized) struct CTListTests {
    let ct: CTFixtures
    init() throws { ct = try CTFixtures.made() }

    func pinproxy(_ arguments: String...) throws -> Run { try run(Paths.pinproxy, arguments, timeout: 30) }

    func serve(_ leaf: String) throws -> Upstream {
        try Upstream(chainPath: ct.chain(leaf), keyPath: ct.key(leaf), name: leaf)
    }

    /// `check` and `run` both refuse the policy; `check` prints the error (as `run` logs it) and exits 1.
    /// `failure`: run's last line (its `policy_load_failed`).
    func refused(_ yaml: String) throws -> (path: String, check: Run, start: Run, failure: [String: String]) {
        let path = try temporaryFile(yaml)
        let check = try pinproxy("check", "--config", path)
        let start = try run(Paths.pinproxy, ["run", "--config", path, "--listen", "127.0.0.1:0"], timeout: 30)
        return (path, check, start, parseLogLine(String(start.stderr.split(separator: "\n").last ?? "")))
    }

    /// The line of `proxy.ct_log_list` in a policy: where a list's load error points.
    func listLine(_ yaml: String) -> String {
        String((yaml.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.hasPrefix("  ct_log_list:") } ?? -1) + 1)
    }

    func expectStartFailed(_ r: (path: String, check: Run, start: Run, failure: [String: String]), detail: String, sourceLocation: SourceLocation = #_sourceLocation) throws {
        let yaml = try String(contentsOfFile: r.path, encoding: .utf8)
        #expect(r.start.status == 1, "\(r.start)", sourceLocation: sourceLocation)
        #expect(r.failure["event"] == "policy_load_failed" && r.failure["line"] == listLine(yaml), "\(r.failure)", sourceLocation: sourceLocation)
        #expect(r.failure["detail"] == detail, "\(r.failure)", sourceLocation: sourceLocation)
    }

    // MARK: load errors

    @Test func aMissingListIsALoadErrorNamingTheFile() throws {
        let missing = try temporaryDirectory() + "/log_list.json"
        let r = try refused(ct.policy(ports: [443], logList: missing))
        #expect(r.check.status == 1 && r.check.stdout.isEmpty, "\(r.check)")
        #expect(r.check.stderr.contains(missing) && r.check.stderr.contains("No such file or directory"), "\(r.check.stderr)")
        #expect(r.check.stderr.hasSuffix("1 error; the policy was not loaded\n"), "\(r.check.stderr)")
        try expectStartFailed(r, detail: "cannot read the CT log list \(missing): cannot read \(missing): No such file or directory (errno 2); "
                                  + "fetch it with the pinproxy-ct-list timer or pinproxy ct-list --install")
    }

    /// A list that does not parse: the error names the file and the JSON path of what is wrong.
    @Test func aMalformedListNamesItsJSONPath() throws {
        let broken = try ct.editedLogListText { $0.replacingOccurrences(of: "\"mmd\": 86400", with: "\"mmd\": \"1d\"") }
        let r = try refused(ct.policy(ports: [443], logList: broken))
        #expect(r.check.status == 1, "\(r.check)")
        #expect(r.check.stderr.contains(broken) && r.check.stderr.contains("operators[0].logs[0].mmd: expected an integer"), "\(r.check.stderr)")
        try expectStartFailed(r, detail: "the CT log list \(broken) does not load: operators[0].logs[0].mmd: expected an integer")

        let notJSON = try ct.editedLogListText { String($0.dropLast(3)) }
        let cut = try refused(ct.policy(ports: [443], logList: notJSON))
        #expect(cut.check.status == 1 && cut.check.stderr.contains(notJSON) && cut.check.stderr.contains("not JSON"), "\(cut.check.stderr)")
        try expectStartFailed(cut, detail: "the CT log list \(notJSON) does not load: not JSON: Unexpected end of file during JSON parse.")
    }

    /// `ct: require` (or `report`) anywhere without a list is a load error at its line and column.
    @Test(arguments: ["defaults", "rule"])
    func ctWithoutAListIsALoadError(place: String) throws {
        let rules = place == "rule" ? "rules:\n  - host: no-sct.ct.pinproxy.test\n    ct: report" : "rules: []"
        let yaml = ct.policy(ports: [443], ct: place == "defaults" ? "require" : "", rules: rules, logList: "")
        let line = (yaml.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.hasPrefix("  ct:") || $0.hasPrefix("    ct:") } ?? -1) + 1
        let r = try refused(yaml)
        #expect(r.check.status == 1, "\(r.check)")
        #expect(r.check.stderr.hasPrefix("\(r.path):\(line):") && r.check.stderr.contains("ct_log_list"), "line \(line): \(r.check.stderr)")
        #expect(r.start.status != 0 && r.start.stderr.contains("ct_log_list"), "\(r.start)")
    }

    @Test func theListIsLoggedAtStart() throws {
        let proxy = try ProxyProcess(config: ct.policy(ports: [443]))
        let loaded = try #require(proxy.waitFor("ct_list_loaded"), "\(proxy.log)")
        #expect(loaded["path"] == ct.logList && loaded["operators"] == "2" && loaded["logs"] == "5", "\(loaded)")
        #expect(loaded["age_days"] == "0" && loaded["level"] == "info" && loaded["signature"] == "unchecked", "\(loaded)")
        #expect(proxy.events("ct_list_stale").isEmpty)
    }

    // MARK: the list's signature

    /// A key pair (EC P-256 or RSA 2048) and the list signed with it, `log_list.sig` beside `log_list.json`.
    func signedList(_ algorithm: String, content: String? = nil) throws -> (list: String, key: String) {
        let list = try ct.editedLogList { _ in }
        let directory = (list as NSString).deletingLastPathComponent
        let generate = algorithm == "ec" ? "-algorithm EC -pkeyopt ec_paramgen_curve:P-256" : "-algorithm RSA -pkeyopt rsa_keygen_bits:2048"
        let signed = content ?? list
        let script = """
            set -e
            cd '\(directory)'
            openssl genpkey \(generate) -out signer.key.pem 2>/dev/null
            openssl pkey -in signer.key.pem -pubout -out signer.pub.pem
            openssl dgst -sha256 -sign signer.key.pem -out log_list.sig '\(signed)'
            rm signer.key.pem
            """
        let r = try run("/bin/sh", ["-c", script], timeout: 60)
        guard r.status == 0 else { throw HelperError(message: "signing failed: \(r.stderr)") }
        return (list, directory + "/signer.pub.pem")
    }

    @Test(arguments: ["ec", "rsa"])
    func aGoodSignatureLoads(algorithm: String) throws {
        let signed = try signedList(algorithm)
        let proxy = try ProxyProcess(config: ct.policy(ports: [443], proxy: "  ct_log_list_key: \(signed.key)", logList: signed.list))
        let loaded = try #require(proxy.waitFor("ct_list_loaded"), "\(proxy.log)")
        #expect(loaded["path"] == signed.list && loaded["signature"] == "verified", "\(loaded)")
        let check = try pinproxy("check", "--config", proxy.configPath)
        #expect(check.status == 0, "\(check)")
    }

    /// A signature over other bytes, by another key, or none at all: the list is not used.
    @Test(arguments: ["other-bytes", "other-key", "missing"])
    func aBadSignatureIsALoadError(kind: String) throws {
        let signed: (list: String, key: String)
        switch kind {
        case "other-bytes":
            let other = try temporaryFile("{}\n", name: "other.json")
            signed = try signedList("ec", content: other)
        case "other-key":
            let first = try signedList("ec")
            let second = try signedList("ec")
            signed = (first.list, second.key)
        default:
            let made = try signedList("ec")
            try FileManager.default.removeItem(atPath: (made.list as NSString).deletingPathExtension + ".sig")
            signed = made
        }
        let sig = (signed.list as NSString).deletingPathExtension + ".sig"
        let r = try refused(ct.policy(ports: [443], proxy: "  ct_log_list_key: \(signed.key)", logList: signed.list))
        #expect(r.check.status == 1 && r.check.stderr.contains(sig), "\(r.check.stderr)")
        #expect(r.check.stderr.hasSuffix("the policy was not loaded\n"), "\(r.check.stderr)")
        try expectStartFailed(r, detail: kind == "missing"
            ? "cannot check the CT log list \(signed.list): cannot read \(sig): No such file or directory (errno 2)"
            : "the CT log list \(signed.list) is not signed by proxy.ct_log_list_key \(signed.key) (signature \(sig)): "
                + "the signature does not verify with the key: the list was changed, or signed by someone else")
    }

    // MARK: a stale list

    /// A list whose timestamp is 100 days old (`ct_list_max_age` is 70 days by default).
    func staleList() throws -> String {
        try ct.editedLogList { $0["log_list_timestamp"] = RFC3339.format(Date().addingTimeInterval(-100 * 86400)) }
    }

    /// By default a stale list enforces `require` as `report`, and says so: the warning at load, and
    /// each would-be refusal tunnels as `bypass=ct_stale_list`.
    @Test func aStaleListIsEnforcedAsReport() throws {
        let list = try staleList()
        let server = try serve("no-sct")
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], logList: list))
        let stale = try #require(proxy.waitFor("ct_list_stale"), "\(proxy.log)")
        #expect(stale["level"] == "warning" && stale["path"] == list && stale["age_days"] == "100", "\(stale)")
        #expect(stale["max_age_days"] == "70" && stale["enforced_as"] == "report", "\(stale)")

        let result = try curl(proxy: proxy.port, host: ct.host("no-sct"), port: server.port, cacert: ct.roots)
        #expect(result.body == "hello from no-sct\n", "\(result)")
        let bypassed = try #require(proxy.waitFor("tunnel_bypassed"), "\(proxy.log)")
        #expect(bypassed["bypass"] == "ct_stale_list" && bypassed["would_refuse"] == "true" && bypassed["reason"] == "ct_not_compliant", "\(bypassed)")
        #expect(bypassed["ct"] == "report", "\(bypassed)")
        let check = try pinproxy("check", "--config", proxy.configPath)
        #expect(check.status == 0 && check.stdout.contains(": warning[") && check.stdout.contains("100 days"), "\(check)")
    }

    /// `ct_stale_list: refuse` keeps `require`; a longer `ct_list_max_age` (days) makes the list current.
    @Test(arguments: ["  ct_stale_list: refuse", "  ct_list_max_age: 120d"])
    func aStaleListCanStillRefuse(setting: String) throws {
        let list = try staleList()
        let server = try serve("no-sct")
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], proxy: setting, logList: list))
        if setting.contains("refuse") {
            let stale = try #require(proxy.waitFor("ct_list_stale"), "\(proxy.log)")
            #expect(stale["enforced_as"] == "require", "\(stale)")
        } else {
            #expect(proxy.waitFor("ct_list_loaded")?["age_days"] == "100")
            #expect(proxy.events("ct_list_stale").isEmpty, "\(proxy.log)")
        }
        let raw = try connectResponse(proxy: proxy.port, target: "\(ct.host("no-sct")):\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        #expect(proxy.waitFor("tunnel_refused")?["reason"] == "ct_not_compliant")
    }

    /// A current list installed over a stale one and reloaded: `require` is enforced again.
    @Test func aFreshListAtTheReloadEndsTheReport() throws {
        let stale = try staleList()
        let server = try serve("no-sct")
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], logList: stale))
        #expect(proxy.waitFor("ct_list_stale")?["enforced_as"] == "report", "\(proxy.log)")
        #expect(try curl(proxy: proxy.port, host: ct.host("no-sct"), port: server.port, cacert: ct.roots).body == "hello from no-sct\n")

        let fresh = try ct.editedLogList { _ in }
        #expect(rename(fresh, stale) == 0)
        proxy.signal(SIGHUP)
        #expect(proxy.waitFor("policy_reloaded") != nil, "\(proxy.log)")
        #expect(proxy.events("ct_list_loaded", count: 2).last?["age_days"] == "0", "\(proxy.log)")
        #expect(proxy.events("ct_list_stale").count == 1, "\(proxy.log)")
        let raw = try connectResponse(proxy: proxy.port, target: "\(ct.host("no-sct")):\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        #expect(proxy.waitFor("tunnel_refused")?["reason"] == "ct_not_compliant")
    }

    // MARK: reload

    /// A reload reads the list again: with operator B's b1 gone from it, two-operators' second SCT
    /// is from a log in no list, and the next CONNECT is refused. A list that no longer loads keeps
    /// the old policy (and list) in force.
    @Test func aReloadSwapsTheList() throws {
        let list = try ct.editedLogList { _ in }
        let server = try serve("two-operators")
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], logList: list))
        #expect(proxy.waitFor("ct_list_loaded")?["logs"] == "5")
        #expect(try curl(proxy: proxy.port, host: ct.host("two-operators"), port: server.port, cacert: ct.roots).body == "hello from two-operators\n")

        // Without b1: written beside and renamed over, as `ct-list --install` does.
        let b1 = CTExpectations.description("b1")
        let without = try ct.editedLogList { list in
            var operators = list["operators"] as? [[String: Any]] ?? []
            operators[1]["logs"] = (operators[1]["logs"] as? [[String: Any]] ?? []).filter { ($0["description"] as? String) != b1 }
            list["operators"] = operators
        }
        #expect(rename(without, list) == 0)
        proxy.signal(SIGHUP)
        #expect(proxy.waitFor("policy_reloaded") != nil, "\(proxy.log)")
        #expect(proxy.events("ct_list_loaded", count: 2).last?["logs"] == "4", "\(proxy.log)")
        let raw = try connectResponse(proxy: proxy.port, target: "\(ct.host("two-operators")):\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["reason"] == "ct_not_compliant", "\(refused)")
        let b1ID = try ct.logID("b1")
        #expect(refused["ct_detail"] == "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 90 days and 2 operators needed"
                + " (ignored: SCT from \(b1ID): its log is in no log list)", "\(refused)")

        // A broken list on the next reload: refused, the list above stays.
        try "{".write(toFile: list, atomically: true, encoding: .utf8)
        proxy.signal(SIGHUP)
        let failed = try #require(proxy.waitFor("policy_reload_failed"), "\(proxy.log)")
        #expect(failed["detail"]?.contains(list) == true || failed["error"]?.contains(list) == true || proxy.log.contains("\(list): not JSON"), "\(failed)")
        #expect(proxy.events("ct_list_loaded").count == 2)
    }

    /// An open tunnel is judged again at a reload that swaps the list: the chain it was opened with
    /// no longer complies, and it is closed.
    @Test func anOpenTunnelIsJudgedAgainWithTheNewList() throws {
        let list = try ct.editedLogList { _ in }
        let server = try serve("two-operators")
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], logList: list))
        let open = try OpenConnection(port: proxy.port, send: "CONNECT \(ct.host("two-operators")):\(server.port) HTTP/1.1\r\n\r\n")
        defer { open.close() }
        #expect(open.receive(timeout: 15, until: "\r\n\r\n").hasPrefix("HTTP/1.1 200 "))
        #expect(proxy.waitFor("tunnel_unpinned")?["ct"] == "compliant", "\(proxy.log)")

        let b1 = CTExpectations.description("b1")
        let without = try ct.editedLogList { list in
            var operators = list["operators"] as? [[String: Any]] ?? []
            operators[1]["logs"] = (operators[1]["logs"] as? [[String: Any]] ?? []).filter { ($0["description"] as? String) != b1 }
            list["operators"] = operators
        }
        #expect(rename(without, list) == 0)
        proxy.signal(SIGHUP)
        let closed = try #require(proxy.waitFor("tunnel_closed"), "\(proxy.log)")
        #expect(closed["close_reason"] == "policy_reload" && closed["reason"] == "ct_not_compliant", "\(closed)")
        #expect(proxy.waitFor("policy_reloaded")?["tunnels_closed"] == "1", "\(proxy.log)")
    }

    /// A tunnel opened while its host was exempt was never looked at: a reload that requires CT for
    /// it closes it (the client reconnects and is judged), as a reload that pins an unpinned host does.
    @Test func aReloadThatEndsAnExemptionClosesTheUncheckedTunnel() throws {
        let server = try serve("two-operators")
        let exempt = "rules:\n  - host: two-operators.ct.pinproxy.test\n    ct: off"
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], rules: exempt))
        let open = try OpenConnection(port: proxy.port, send: "CONNECT \(ct.host("two-operators")):\(server.port) HTTP/1.1\r\n\r\n")
        defer { open.close() }
        #expect(open.receive(timeout: 15, until: "\r\n\r\n").hasPrefix("HTTP/1.1 200 "))
        #expect(proxy.waitFor("tunnel_unpinned") != nil, "\(proxy.log)")
        try proxy.reload(ct.policy(ports: [server.port]))
        let closed = try #require(proxy.waitFor("tunnel_closed"), "\(proxy.log)")
        #expect(closed["close_reason"] == "policy_reload" && closed["reason"] == "unverified_chain", "\(closed)")
    }

    /// A list changed on disk without a new signature is refused at the reload, and the list in
    /// force stays: the host it made compliant still tunnels.
    @Test func aListTamperedWithOnDiskIsRefusedAtTheReload() throws {
        let signed = try signedList("ec")
        let server = try serve("two-operators")
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], proxy: "  ct_log_list_key: \(signed.key)", logList: signed.list))
        #expect(proxy.waitFor("ct_list_loaded")?["signature"] == "verified", "\(proxy.log)")
        let b1 = CTExpectations.description("b1")
        let tampered = try ct.editedLogList { list in
            var operators = list["operators"] as? [[String: Any]] ?? []
            operators[1]["logs"] = (operators[1]["logs"] as? [[String: Any]] ?? []).filter { ($0["description"] as? String) != b1 }
            list["operators"] = operators
        }
        #expect(rename(tampered, signed.list) == 0)
        proxy.signal(SIGHUP)
        let failed = try #require(proxy.waitFor("policy_reload_failed"), "\(proxy.log)")
        let sig = (signed.list as NSString).deletingPathExtension + ".sig"
        let yaml = try String(contentsOfFile: proxy.configPath, encoding: .utf8)
        #expect(failed["detail"]?.hasPrefix("\(proxy.configPath):\(listLine(yaml)):") == true, "\(failed)")
        #expect(failed["detail"]?.hasSuffix(": the CT log list \(signed.list) is not signed by proxy.ct_log_list_key \(signed.key) (signature \(sig)): "
                + "the signature does not verify with the key: the list was changed, or signed by someone else") == true, "\(failed)")
        #expect(proxy.events("ct_list_loaded").count == 1)
        #expect(try curl(proxy: proxy.port, host: ct.host("two-operators"), port: server.port, cacert: ct.roots).body == "hello from two-operators\n")
        #expect(proxy.waitFor("tunnel_unpinned")?["ct"] == "compliant", "\(proxy.log)")
    }

    // MARK: the command line

    /// `check --explain` names the CT rule that applies to a host, and where it comes from.
    @Test func explainShowsTheCTRule() throws {
        let yaml = ct.policy(ports: [443], rules: "rules:\n  - host: no-sct.ct.pinproxy.test\n    ct: off")
        let line = (yaml.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.hasPrefix("  - host: no-sct") } ?? -1) + 1
        let path = try temporaryFile(yaml)
        let r = try pinproxy("check", "--config", path, "--explain", "no-sct.ct.pinproxy.test:443", "--explain", "two-operators.ct.pinproxy.test:443")
        #expect(r.status == 0, "\(r)")
        #expect(r.stdout.contains("ct: off (rule at line \(line))") && r.stdout.contains("ct: require (defaults)"), "\(r.stdout)")

        // A CT-only rule (no pins) is explained as CT, not as pins it does not have.
        let ctOnly = ct.policy(ports: [443], ct: "off", rules: "rules:\n  - host: no-sct.ct.pinproxy.test\n    ct: require")
        let ctOnlyLine = (ctOnly.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.hasPrefix("  - host: no-sct") } ?? -1) + 1
        let explained = try pinproxy("check", "--config", try temporaryFile(ctOnly), "--explain", "no-sct.ct.pinproxy.test:443")
        #expect(explained.status == 0, "\(explained)")
        #expect(explained.stdout.contains("ct: require (rule at line \(ctOnlyLine))"), "\(explained.stdout)")
        #expect(!explained.stdout.contains("pins must match") && !explained.stdout.contains("Certificate Pin Mismatch"), "\(explained.stdout)")
    }

    /// `ct-list` checks a list (and its signature) and prints its age, operators and logs; with
    /// `--install` it puts the list and its signature where the config points, and a bad signature
    /// installs nothing.
    @Test func ctListChecksAndInstalls() throws {
        let signed = try signedList("ec")
        let sig = (signed.list as NSString).deletingPathExtension + ".sig"
        let shown = try pinproxy("ct-list", signed.list, "--signature", sig, "--key", signed.key)
        #expect(shown.status == 0, "\(shown)")
        #expect(shown.stdout.contains("Test Operator A") && shown.stdout.contains("Test Operator B") && shown.stdout.contains("Test Operator B 'b2' log"), "\(shown.stdout)")

        let target = try temporaryDirectory() + "/log_list.json"
        let config = try temporaryFile(ct.policy(ports: [443], proxy: "  ct_log_list_key: \(signed.key)", logList: target))
        let other = try signedList("ec")
        let refused = try pinproxy("ct-list", signed.list, "--signature", sig, "--key", other.key, "--install", "--config", config)
        #expect(refused.status != 0 && !FileManager.default.fileExists(atPath: target), "\(refused)")

        let installed = try pinproxy("ct-list", signed.list, "--signature", sig, "--key", signed.key, "--install", "--config", config)
        #expect(installed.status == 0, "\(installed)")
        #expect(FileManager.default.contents(atPath: target) == FileManager.default.contents(atPath: signed.list))
        #expect(FileManager.default.contents(atPath: (target as NSString).deletingPathExtension + ".sig") == FileManager.default.contents(atPath: sig))
        #expect(try pinproxy("check", "--config", config).status == 0)
    }
}
