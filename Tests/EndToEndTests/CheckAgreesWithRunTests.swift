import Foundation
import PinPolicy
import Testing
import TestSupport

/// `pinproxy check` says what `pinproxy run` will say: for every warning a rule can make the proxy
/// log (`tunnel_warning` reasons, `policy_warning` codes), the same policy is checked and run, and
/// both name the warning with the same code. What only the server's chain can tell (a leaf about to
/// expire, every pin matching one chain) `check --probe` says, in the log's words.
@Suite(.serialized) struct CheckAgreesWithRunTests {
    /// The policy file of `yaml`, checked (with `--probe` when asked): exit status and stdout.
    func check(_ yaml: String, probe: Bool = false) throws -> (config: String, run: Run) {
        let config = try temporaryFile(yaml)
        return (config, try run(Paths.pinproxy, ["check", "--config", config] + (probe ? ["--probe"] : []), timeout: 60))
    }

    /// The lint lines of `check`'s stdout, without the file name.
    func warnings(_ r: (config: String, run: Run)) -> [String] {
        r.run.stdout.split(separator: "\n").filter { $0.hasPrefix("\(r.config):") && $0.contains(": warning[") }
            .map { String($0.dropFirst(r.config.count + 1)) }
    }

    /// One tunnel through `proxy`, waited for to its close line.
    func tunnel(_ proxy: ProxyProcess, _ server: Upstream, name: String = "leaf-ec256", count: Int = 1) throws {
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from \(name)\n")
        #expect(proxy.events("tunnel_closed", count: count).count == count)
    }

    static let backupAdvice = "a real backup is a key not in the served chain (a spare kept offline: '{ file: next-key.pub.pem, at: leaf, label: backup }') or a CA pin marked 'backup: true' (then any key that CA certifies for the name passes)"

    /// Two `at: any` pins, the server's key and its issuing CA (as pins from an Android
    /// network_security_config.xml say): `check` warns `no_real_backup`, the log says it on the
    /// first tunnel.
    @Test func noRealBackupForAtAnyPins() throws {
        let server = try Upstream("leaf-ec256")
        let yaml = policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC, Pins.intermediate)))
            .warningOfBackups
        let checked = try check(yaml)
        #expect(checked.run.status == 0, "\(checked.run)")
        #expect(warnings(checked) == ["15: warning[no_real_backup]: the rule for 'api.pinproxy.test' may have no real backup: its pins at: any (line 16) may be the server's key and its issuing CA's, in the one chain the server serves (as pins imported from network_security_config.xml are), and then every pin of the rule matches that chain and pinproxy logs no_real_backup on its tunnels; say where each sits (at: leaf for the server's key, at: ca for a CA's) so that check can tell; \(Self.backupAdvice)"])
        let proxy = try ProxyProcess(config: yaml)
        #expect(proxy.events("policy_warning").map { $0["code"] } == ["no_real_backup"])
        try tunnel(proxy, server)
        let line = try #require(proxy.waitFor("tunnel_warning") { $0["reason"] == "no_real_backup" }, "\(proxy.log)")
        #expect(line["rule_line"] == "15" && line["level"] == "warning", "\(line)")
        #expect(proxy.stop() == 0)
    }

    /// The path the issue took: a network_security_config.xml written by another tool (no comment
    /// of pinproxy's beside its pins) imported with `pin --import nsc` and pasted. The import says
    /// what the format could not tell, `check` warns `no_real_backup`, and the log says it.
    @Test func anImportedNSCRuleIsWarnedOfAsTheLogWill() throws {
        let server = try Upstream("leaf-ec256")
        let b64 = { (pin: String) in String(pin.dropFirst("spki-sha256:".count)) }
        let xml = try temporaryFile("""
            <?xml version="1.0" encoding="utf-8"?>
            <network-security-config>
              <domain-config>
                <domain includeSubdomains="false">api.pinproxy.test</domain>
                <pin-set>
                  <pin digest="SHA-256">\(b64(Pins.leafEC))</pin>
                  <pin digest="SHA-256">\(b64(Pins.intermediate))</pin>
                </pin-set>
              </domain-config>
            </network-security-config>
            """, name: "network_security_config.xml")
        let imported = try run(Paths.pinproxy, ["pin", "--import", "nsc", xml], timeout: 30)
        #expect(imported.status == 0 && imported.stdout.contains("\n    # pinproxy check and the log say no_real_backup."), "\(imported)")
        let pasted = imported.stdout.split(separator: "\n").filter { !$0.hasPrefix("#") }.map { "  " + $0 }.joined(separator: "\n")
        let yaml = policy(ports: [server.port], rules: "rules:\n" + pasted).warningOfBackups
        let checked = try check(yaml)
        #expect(checked.run.status == 0, "\(checked.run)")
        #expect(warnings(checked).count == 1 && warnings(checked).first?.hasPrefix("15: warning[no_real_backup]: the rule for 'api.pinproxy.test' may have no real backup: its pins at: any (lines 17, 18) may be") == true,
                "\(checked.run.stdout)")
        let proxy = try ProxyProcess(config: yaml)
        try tunnel(proxy, server)
        #expect(proxy.waitFor("tunnel_warning") { $0["reason"] == "no_real_backup" }?["rule_line"] == "15", "\(proxy.log)")
        #expect(proxy.stop() == 0)
    }

    /// The same rule with an unmarked `at: ca` pin beside its leaf pin.
    @Test func noRealBackupForAnUnmarkedCAPin() throws {
        let server = try Upstream("leaf-ec256")
        let yaml = policy(ports: [server.port], rules: BackupWarningTests.rule(marked: false))
            .warningOfBackups
        let checked = try check(yaml)
        #expect(checked.run.status == 0, "\(checked.run)")
        #expect(warnings(checked) == ["15: warning[no_real_backup]: the rule for 'api.pinproxy.test' has no real backup: its CA pin (line 18) is in the same chain as its leaf pin; \(Self.backupAdvice)"])
        let proxy = try ProxyProcess(config: yaml)
        try tunnel(proxy, server)
        #expect(proxy.waitFor("tunnel_warning") { $0["reason"] == "no_real_backup" } != nil, "\(proxy.log)")
        // Marked, both are silent.
        let marked = policy(ports: [server.port], rules: BackupWarningTests.rule(marked: true)).warningOfBackups
        #expect(warnings(try check(marked)).isEmpty)
        #expect(proxy.stop() == 0)
    }

    /// A rule whose `expires` is within 30 days: `rule_expires_soon` from both.
    @Test func ruleExpiresSoon() throws {
        let server = try Upstream("leaf-ec256")
        let expires = RFC3339Text.inSeconds(10 * 86400)
        let yaml = policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC, Pins.backup) + "\n    expires: \"\(expires)\"\n    on_expiry: enforce"))
        let checked = try check(yaml)
        #expect(checked.run.status == 0, "\(checked.run)")
        #expect(warnings(checked) == ["15: warning[rule_expires_soon]: the rule for 'api.pinproxy.test' expires \(expires); refresh its pins and its expires before then"])
        let proxy = try ProxyProcess(config: yaml)
        #expect(proxy.events("policy_warning").map { $0["code"] } == ["rule_expires_soon"])
        try tunnel(proxy, server)
        let line = try #require(proxy.waitFor("tunnel_warning") { $0["reason"] == "rule_expires_soon" }, "\(proxy.log)")
        #expect(line["detail"] == "the rule expires \(expires); refresh its pins and expires before then" && line["level"] == "warning", "\(line)")
        #expect(proxy.stop() == 0)
    }

    /// A rule past its `expires` (still enforced): `rule_expired`, an error in the log.
    @Test func ruleExpired() throws {
        let server = try Upstream("leaf-ec256")
        let expired = RFC3339Text.inSeconds(-86400)
        let yaml = policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC, Pins.backup) + "\n    expires: \"\(expired)\"\n    on_expiry: enforce"))
        let checked = try check(yaml)
        #expect(checked.run.status == 0, "\(checked.run)")
        #expect(warnings(checked) == ["15: warning[rule_expired]: the rule for 'api.pinproxy.test' expired \(expired) (on_expiry: enforce); refresh its pins and its expires"])
        let proxy = try ProxyProcess(config: yaml)
        #expect(proxy.events("policy_warning").map { $0["code"] } == ["rule_expired"])
        try tunnel(proxy, server)
        let line = try #require(proxy.waitFor("tunnel_warning") { $0["reason"] == "rule_expired" }, "\(proxy.log)")
        #expect(line["level"] == "error" && line["detail"] == "the rule expired \(expired) (on_expiry: enforce); refresh its pins and expires", "\(line)")
        #expect(proxy.stop() == 0)
    }

    /// Every lint code: the policy that causes it, checked and run. `check` prints each as
    /// `warning[CODE]`, `run` logs each as `policy_warning code=CODE` (the log list's staleness as its
    /// own `ct_list_stale` line), and both name the same codes.
    @Test(arguments: ["missing_backup_pin", "no_real_backup", "cert_leaf_pins_only", "pinned_cert_expires_soon", "pin_denylisted",
                      "rule_expires_soon", "rule_expired", "weaker_rule_shadows_enforced", "debug_bypass_present", "debug_bypass_expired",
                      "resolve_to_denied_destination", "ct_list_few_operators", "ct_list_stale"])
    func everyLintCodeIsSaidByBoth(code: String) throws {
        let two = "pins: [{ pin: \"\(Pins.leafEC)\", at: leaf }, { pin: \"\(Pins.backup)\", at: leaf }]"
        var rules = "rules:\n  - host: api.pinproxy.test\n    \(two)"
        var resolve = "  api.pinproxy.test: 127.0.0.1"
        var proxy = "", extra = ""
        switch code {
        case "missing_backup_pin": rules = apiRule(pinsLine(Pins.leafEC))
        case "no_real_backup": rules = apiRule(pinsLine(Pins.leafEC, Pins.intermediate))
        case "cert_leaf_pins_only": rules = apiRule(pinsLine(Pins.selfSignedCert, "cert-sha256:" + String(repeating: "A", count: 43) + "="))
        case "pinned_cert_expires_soon":
            let files = try RotationTests.shortLivedChain(days: 20)
            rules = "rules:\n  - host: api.pinproxy.test\n    pins: [{ pin: \"\(Pins.leafEC)\", at: leaf }, { file: \((files.chain as NSString).deletingLastPathComponent)/leaf.pem, kind: cert }]"
        case "pin_denylisted": extra = "deny: [\"\(Pins.backup)\"]"
        case "rule_expires_soon": rules += "\n    expires: \"\(RFC3339Text.inSeconds(10 * 86400))\"\n    on_expiry: enforce"
        case "rule_expired": rules += "\n    expires: \"\(RFC3339Text.inSeconds(-86400))\"\n    on_expiry: report"
        case "weaker_rule_shadows_enforced": rules = "rules:\n  - host: \"**.pinproxy.test\"\n    \(two)\n  - host: api.pinproxy.test\n    mode: unpinned"
        case "debug_bypass_present": extra = "debug:\n  until: \"\(RFC3339Text.inSeconds(3600))\"\n  hosts: [api.pinproxy.test]"
        case "debug_bypass_expired": extra = "debug:\n  until: \"\(RFC3339Text.inSeconds(-3600))\"\n  hosts: [api.pinproxy.test]"
        case "resolve_to_denied_destination": resolve += "\n  link.pinproxy.test: 169.254.0.9"
        case "ct_list_few_operators":
            let ct = try CTFixtures.made()
            let list = try ct.editedLogList { list in list["operators"] = (list["operators"] as? [Any]).map { Array($0.prefix(1)) } }
            proxy = "ct_log_list: \(list)"
        case "ct_list_stale":
            let ct = try CTFixtures.made()
            proxy = "ct_log_list: " + (try ct.editedLogList { $0["log_list_timestamp"] = RFC3339.format(Date().addingTimeInterval(-100 * 86400)) })
        default: Issue.record("no policy for \(code)")
        }
        let yaml = policy(ports: [443], rules: rules, resolve: resolve, proxy: proxy, extra: extra)
            .warningOfBackups
        let checked = try check(yaml)
        #expect(checked.run.status == 0, "\(checked.run)")
        let checkCodes = warnings(checked).compactMap { $0.split(separator: "[").dropFirst().first?.split(separator: "]").first.map(String.init) }
        #expect(checkCodes == [code], "\(checked.run.stdout)")
        let run = try ProxyProcess(config: yaml)
        let logged = run.events("policy_warning").compactMap { $0["code"] } + run.events("ct_list_stale").map { _ in "ct_list_stale" }
        #expect(logged == checkCodes, "\(run.log)")
        #expect(run.stop() == 0)
    }

    /// A leaf that expires within 30 days: only the chain tells, so `check` is silent and `check
    /// --probe` says `leaf_expires_soon` in the log's words; the log says it on the tunnel (with
    /// `certificate_expiring`).
    @Test func leafExpiresSoon() throws {
        let files = try RotationTests.shortLivedChain(days: 20)
        let server = try Upstream("leaf-ec256", name: "short", extra: ["--cert", files.chain, "--key", files.key])
        let yaml = policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC, Pins.backup)))
        #expect(warnings(try check(yaml)).isEmpty)
        let probed = try check(yaml, probe: true)
        #expect(probed.run.status == 0, "\(probed.run)")
        let proxy = try ProxyProcess(config: yaml)
        try tunnel(proxy, server, name: "short")
        let line = try #require(proxy.waitFor("tunnel_warning") { $0["reason"] == "leaf_expires_soon" }, "\(proxy.log)")
        let detail = try #require(line["detail"])
        #expect(detail.hasPrefix("the leaf certificate expires ") && detail.hasSuffix("; make sure the rule's pins survive its renewal"), "\(line)")
        #expect(probed.run.stdout.hasSuffix("""

            line 15 api.pinproxy.test:\(server.port): matches (\(Pins.leafEC) at position 0) via 127.0.0.1 TLSv1.3
            line 15 api.pinproxy.test:\(server.port): warning[leaf_expires_soon]: \(detail)

            """), "\(probed.run.stdout)")
        #expect(proxy.waitFor("certificate_expiring") != nil)
        #expect(proxy.stop() == 0)
    }
}

private extension String {
    /// The test policy with `require_backup: warn` (`policy(...)` turns the backup warnings off).
    var warningOfBackups: String { replacingOccurrences(of: "require_backup: off", with: "require_backup: warn") }
}
