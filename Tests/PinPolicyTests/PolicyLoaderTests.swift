import Foundation
import Testing
@testable import PinPolicy

let pinA = "spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="
let pinB = "spki-sha256:KCDrug7ej6zlHN6aFwgek+aRk6ExpqGsKfgGdPF+qhM="
let pinC = "spki-sha256:8xYmeC9Eb+1x3jKAb5kV+2ORTfldeg/FMzwVSTm3ptc="

/// Loads YAML text, or returns its errors.
func load(_ yaml: String, pinFiles: PinFileLoader? = nil) -> Result<Policy, PolicyLoadError> {
    Result { () throws(PolicyLoadError) in try PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: pinFiles) }
}

/// Asserts that loading fails with exactly one error at line:column whose message contains `text`.
func expectError(_ yaml: String, line: Int, column: Int, _ text: String, sourceLocation: SourceLocation = #_sourceLocation) {
    switch load(yaml) {
    case .success:
        Issue.record("loaded, but expected an error at \(line):\(column) containing \"\(text)\"", sourceLocation: sourceLocation)
    case .failure(let e):
        #expect(e.errors.count == 1, "errors: \(e.errors)", sourceLocation: sourceLocation)
        guard let first = e.errors.first else { return }
        #expect(first.line == line && first.column == column, "\(first)", sourceLocation: sourceLocation)
        #expect(first.message.contains(text), "\(first)", sourceLocation: sourceLocation)
        #expect(first.description.hasPrefix("test.yaml:\(line):\(column): "), sourceLocation: sourceLocation)
    }
}

let header = "version: 1\ndefaults:\n  unpinned: allow\n"

@Suite struct PolicyLoaderTests {
    @Test func aFullPolicyLoads() throws {
        let policy = try load("""
            version: 1
            proxy:
              listen: ["127.0.0.1:3128", "[::1]:3128"]
              allow_clients: [loopback]
              allowed_ports: [443, 8443]
              deny_destinations: [loopback, link-local, "100.64.0.0/10"]
              dns: { nameservers: ["127.0.0.1:5353", "::1"], hosts_file: none }
              max_tunnels: 10
              header_timeout: 500ms
              idle_timeout: 5m
              verify_cache_ttl: 0
              log_format: json
            defaults: { unpinned: deny, trust: pins-only, require_backup: off }
            resolve:
              API.Example.com.: 10.20.0.5
              multi.example.com: [127.0.0.2, "::1"]
            deny: ["\(pinC)"]
            pinsets:
              keys:
                - { pin: "\(pinA)", at: leaf, label: current }
                - "sha256/KCDrug7ej6zlHN6aFwgek+aRk6ExpqGsKfgGdPF+qhM="
            rules:
              - host: api.example.com
                pinset: keys
              - host: "**.example.com"
                pins: [ { pin: "\(pinB)", at: ca } ]
                mode: report
              - host: status.example.com
                mode: unpinned
              - ip: 10.0.0.0/8
                ports: [8443]
                trust: system
                pins: ["\(pinA)"]
                expires: "2027-06-30T00:00:00Z"
                on_expiry: report
            debug:
              until: "2026-12-01T18:00:00Z"
              hosts: ["**.example.com"]
            """).get()
        #expect(policy.proxy.listen.map(\.description) == ["127.0.0.1:3128", "[::1]:3128"])
        #expect(policy.proxy.allowedPorts == [443, 8443])
        #expect(policy.proxy.denyDestinations.contains(IPAddress("100.64.1.1")!))
        #expect(policy.proxy.dns.nameservers == .list([SocketAddress.parse("127.0.0.1:5353")!, SocketAddress.parse("[::1]:53")!]))
        #expect(policy.proxy.dns.hostsFile == nil)
        #expect(policy.proxy.headerTimeout == 0.5 && policy.proxy.idleTimeout == 300 && policy.proxy.verifyCacheTTL == 0)
        #expect(policy.proxy.logFormat == .json && policy.proxy.maxTunnels == 10)
        #expect(policy.defaults.unpinned == .deny && policy.defaults.trust == .pinsOnly)
        #expect(policy.resolve["api.example.com"] == [IPAddress("10.20.0.5")!])
        #expect(policy.resolve["multi.example.com"]?.count == 2)
        #expect(policy.deny == [try Pin.parse(pinC).get()])
        #expect(policy.rules.count == 4)
        #expect(policy.rules[0].pins.count == 2 && policy.rules[0].pinset == "keys" && policy.rules[0].trust == .pinsOnly)
        #expect(policy.rules[0].pins[1].pin.description == pinB)  // OkHttp alias normalised
        #expect(policy.rules[1].mode == .report && policy.rules[1].pins[0].position == .ca)
        #expect(policy.rules[3].pattern == .ip(CIDR("10.0.0.0/8")!) && policy.rules[3].ports == [8443])
        #expect(policy.rules[3].onExpiry == .report && policy.rules[3].line == 30)
        #expect(policy.debug?.until == RFC3339.parse("2026-12-01T18:00:00Z"))
    }

    @Test func defaultsApplyWhenProxySectionIsAbsent() throws {
        let policy = try load(header).get()
        #expect(policy.proxy == ProxySettings())
        #expect(policy.proxy.listen.map(\.description) == ["127.0.0.1:3128"])
        #expect(policy.proxy.allowedPorts == [443] && policy.proxy.maxRequestBytes == 8192 && policy.proxy.probeTimeout == 10)
        #expect(policy.proxy.denyDestinations.description == "loopback,link-local,unspecified,multicast")
    }

    /// `no`, `0777`, `2026-12-31` look like a boolean, a number and a date; where a string is meant they
    /// are the strings they are.
    @Test func scalarsAreReadAsTheTypeTheSchemaWants() throws {
        let policy = try load(header + """
            pinsets:
              no: ["\(pinA)", "\(pinB)"]
            rules:
              - host: "**.example.com"
                pinset: no
              - host: a.example.com
                pins:
                  - { pin: "\(pinA)", label: 0777 }
                  - { pin: "\(pinB)", label: 2026-12-31 }
                  - { pin: "\(pinC)", label: yes }
            """).get()
        #expect(policy.rules[0].pinset == "no")
        #expect(policy.rules[1].pins.map(\.label) == ["0777", "2026-12-31", "yes"])
    }

    @Test(arguments: [
        // (yaml, line, column, message fragment)
        (header + "colour: blue\n", 4, 1, "unknown key 'colour' in the policy file"),
        (header + "proxy:\n  listn: [\"127.0.0.1:3128\"]\n", 5, 3, "unknown key 'listn' in proxy"),
        ("version: 1\ndefaults:\n  unpinned: allow\n  unpinned: deny\n", 4, 3, "duplicate key 'unpinned'"),
        ("version: 2\ndefaults: {unpinned: allow}\n", 1, 10, "version must be 1"),
        ("defaults: {unpinned: allow}\n", 1, 1, "needs 'version: 1'"),
        ("version: 1\n", 1, 1, "needs a 'defaults:' section"),
        ("version: 1\ndefaults: {trust: system}\n", 2, 11, "defaults.unpinned is required"),
        ("version: 1\ndefaults: {unpinned: no}\n", 2, 22, "must be one of allow, deny, not 'no'"),
        (header + "rules:\n  - host: \"*\"\n    pins: [\"\(pinA)\"]\n", 5, 11, "a bare '*' or '**' matches everything"),
        (header + "rules:\n  - host: \"**\"\n    pins: [\"\(pinA)\"]\n", 5, 11, "a bare '*' or '**'"),
        (header + "rules:\n  - host: \"a.*.example.com\"\n    pins: [\"\(pinA)\"]\n", 5, 11, "only be the whole leftmost label"),
        (header + "rules:\n  - host: a.example.com\n    pins: [\"spki-sha256:AAAA\"]\n", 6, 12, "decodes to 3 bytes"),
        (header + "rules:\n  - host: a.example.com\n    pins: [\"sha1/AAAAAAAAAAAAAAAAAAAAAAAAAAA=\"]\n", 6, 12, "SHA-1 pins are refused"),
        (header + "rules:\n  - host: a.example.com\n    pinset: mine\n", 6, 13, "unknown pinset 'mine'; there is no pinsets: section"),
        (header + "pinsets:\n  keys: [\"\(pinA)\"]\nrules:\n  - host: a.example.com\n    pinset: kyes\n", 8, 13, "known pinsets: keys"),
        (header + "rules:\n  - host: a.example.com\n    pins: [\"\(pinA)\"]\n  - host: A.example.com.\n    pins: [\"\(pinB)\"]\n", 7, 5, "overlaps the rule at line 5"),
        (header + "proxy: {allowed_ports: [443, 8443]}\nrules:\n  - host: a.example.com\n    ports: [8443]\n    pins: [\"\(pinA)\"]\n  - host: a.example.com\n    ports: [443, 8443]\n    pins: [\"\(pinB)\"]\n", 9, 5, "overlaps the rule at line 6"),
        (header + "rules:\n  - host: a.example.com\n    ports: [8443]\n    pins: [\"\(pinA)\"]\n", 6, 13, "port 8443 is not in proxy.allowed_ports (443)"),
        (header + "rules:\n  - host: a.example.com\n    pins: [\"\(pinA)\"]\n    expires: \"2027-06-30T00:00:00Z\"\n", 7, 14, "'expires' needs 'on_expiry"),
        (header + "rules:\n  - host: a.example.com\n    pins: [\"\(pinA)\"]\n    expires: 2027-06-30\n    on_expiry: enforce\n", 7, 14, "must be an RFC 3339 time"),
        (header + "debug:\n  hosts: [\"**.example.com\"]\n", 5, 3, "debug needs 'until:'"),
        (header + "debug:\n  until: \"2030-01-01T00:00:00Z\"\n  hosts: [\"**\"]\n", 6, 11, "a bare '*' or '**'"),
        (header + "debug:\n  until: \"2030-01-01T00:00:00Z\"\n", 5, 3, "debug needs 'hosts:'"),
        (header + "rules:\n  - host: a.example.com\n", 5, 5, "has no pins"),
        (header + "rules:\n  - host: a.example.com\n    pins: []\n", 5, 5, "has no pins"),
        (header + "rules:\n  - host: a.example.com\n    mode: report\n", 5, 5, "has no pins; an report rule"),
        (header + "rules:\n  - host: a.example.com\n    mode: unpinned\n    pins: [\"\(pinA)\"]\n", 7, 11, "would never be checked"),
        (header + "rules:\n  - host: 10.0.0.5\n    pins: [\"\(pinA)\"]\n", 5, 11, "write 'ip: 10.0.0.5'"),
        (header + "rules:\n  - ip: 10.0.0.0/33\n    pins: [\"\(pinA)\"]\n", 5, 9, "not an IP address or CIDR"),
        (header + "rules:\n  - host: a.example.com\n    ip: 10.0.0.5\n    pins: [\"\(pinA)\"]\n", 5, 5, "either 'host:' or 'ip:'"),
        (header + "rules:\n  - pins: [\"\(pinA)\"]\n", 5, 5, "a rule needs 'host:'"),
        (header + "rules:\n  - host: a.example.com\n    pins: [\"\(pinA)\"]\n    trust: everything\n", 7, 12, "must be system, pins-only or ca-file"),
        (header + "rules:\n  - host: a.example.com\n    pins: [\"\(pinA)\"]\n    trust: ca-file:/nonexistent/ca.pem\n", 7, 12, "cannot be read"),
        (header + "proxy:\n  listen: [\"0.0.0.0:3128\"]\n", 5, 11, "needs an explicit proxy.allow_clients"),
        (header + "proxy:\n  listen: [\"localhost:3128\"]\n", 5, 12, "not a listen address"),
        (header + "proxy:\n  header_timeout: 10\n", 5, 19, "must be a duration such as 500ms"),
        (header + "proxy:\n  max_tunnels: 0777\n", 5, 16, "whole number from 1 to 1000000"),
        (header + "proxy:\n  allowed_ports: 443\n", 5, 18, "must be a list, e.g. [443, 8443]"),
        (header + "proxy:\n  allowed_ports: [443, 443]\n", 5, 24, "listed twice"),
        (header + "proxy:\n  deny_destinations: [lan]\n", 5, 23, "neither an address class"),
        (header + "proxy:\n  log_format: xml\n", 5, 15, "must be one of text, json"),
        (header + "proxy:\n  relay: sendfile\n", 5, 10, "proxy.relay must be one of copy, splice, not 'sendfile'"),
        (header + "resolve:\n  a.example.com: example.net\n", 5, 18, "not an IP address"),
        (header + "rules:\n  - host: a.example.com\n    pins:\n      - { pin: \"\(pinA)\", file: x.pem }\n", 7, 9, "either 'pin:' or 'file:'"),
        (header + "rules:\n  - host: a.example.com\n    pins:\n      - { pin: \"\(pinA)\", at: root }\n", 7, 80, "at must be one of leaf, ca, any"),
        (header + "x: &a 1\ny: *a\n", 5, 1, "YAML aliases (*name) are not allowed in a policy file (the value of 'y')"),
        (header + "pinsets:\n  k: &keys [\"\(pinA)\"]\nrules:\n  - host: a.example.com\n    pins: *keys\n", 8, 5, "(the value of 'pins')"),
        (header + "rules:\n  - host: a.example.com\n    <<: {pins: [\"\(pinA)\"]}\n", 6, 5, "merge keys"),
        (header + "rules: [\n", 5, 1, "not valid YAML"),
        ("", 1, 1, "the policy file is empty"),
    ])
    func loadErrors(yaml: String, line: Int, column: Int, message: String) {
        expectError(yaml, line: line, column: column, message)
    }

    @Test func theRelayMethodIsCopyUnlessSpliceIsWritten() throws {
        #expect(try load(header).get().proxy.relay == .copy)
        #expect(try load(header + "proxy:\n  relay: splice\n").get().proxy.relay == .splice)
    }

    @Test func allErrorsAreReportedInOneRun() throws {
        let result = load(header + "proxy:\n  log_format: xml\n  max_tunnels: -1\nrules:\n  - host: \"*\"\n    pins: [\"sha1/x\"]\n")
        guard case .failure(let e) = result else { Issue.record("loaded"); return }
        #expect(e.errors.map(\.line) == [5, 6, 8, 9])
    }

    @Test func requireBackupErrorRefusesSinglePinRules() {
        expectError("version: 1\ndefaults: {unpinned: allow, require_backup: error}\nrules:\n  - host: a.example.com\n    pins: [\"\(pinA)\"]\n",
                    line: 4, column: 5, "require_backup is 'error'")
        #expect(throws: Never.self) {
            try load("version: 1\ndefaults: {unpinned: allow, require_backup: error}\nrules:\n  - host: a.example.com\n    pins: [\"\(pinA)\", \"\(pinB)\"]\n").get()
        }
    }

    @Test func filePinsGoThroughTheCallersLoaderWithPathsRelativeToThePolicy() throws {
        let seen = LockedPaths()
        let loader: PinFileLoader = { path, kind in
            seen.append("\(path) \(kind.rawValue)")
            return PinFileContents(pin: try Pin.parse(kind == .spki ? pinA : "cert-sha256:\(pinB.dropFirst(12))").get(), notAfter: nil)
        }
        let policy = try PolicyLoader.load(yaml: header + """
            rules:
              - host: a.example.com
                pins:
                  - { file: keys/backup.pem, label: backup }
                  - { file: /abs/leaf.pem, kind: cert }
            """, source: "/etc/pinproxy/pinproxy.yaml", baseDirectory: "/etc/pinproxy", pinFiles: loader)
        #expect(seen.values == ["/etc/pinproxy/keys/backup.pem spki-sha256", "/abs/leaf.pem cert-sha256"])
        #expect(policy.rules[0].pins.map(\.position) == [.any, .leaf])
        #expect(policy.rules[0].pins[0].file == "/etc/pinproxy/keys/backup.pem")
    }

    @Test func aFailingPinFileIsALoadErrorAtItsLine() {
        struct Missing: Error, CustomStringConvertible { var description: String { "cannot read the file" } }
        let result = load(header + "rules:\n  - host: a.example.com\n    pins:\n      - { file: nope.pem }\n", pinFiles: { _, _ in throw Missing() })
        guard case .failure(let e) = result else { Issue.record("loaded"); return }
        #expect(e.errors.first?.line == 7 && e.errors.first?.message.contains("cannot use the pin file 'nope.pem': cannot read the file") == true)
    }
}

final class LockedPaths: @unchecked Sendable {
    private let lock = NSLock()
    private var storage: [String] = []
    func append(_ s: String) { lock.withLock { storage.append(s) } }
    var values: [String] { lock.withLock { storage } }
}
