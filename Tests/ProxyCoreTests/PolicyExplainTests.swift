import PinPolicy
import Testing
@testable import ProxyCore

/// `pinproxy check --explain`: the admission gate's decision for a target, in words.
@Suite struct PolicyExplainTests {
    static let pinA = "spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="
    static let pinB = "spki-sha256:KCDrug7ej6zlHN6aFwgek+aRk6ExpqGsKfgGdPF+qhM="
    static let pinC = "spki-sha256:8xYmeC9Eb+1x3jKAb5kV+2ORTfldeg/FMzwVSTm3ptc="

    /// A policy with `unpinned: allow` and these rules.
    func load(_ rules: String) throws -> Policy {
        try PolicyLoader.load(yaml: "version: 1\ndefaults:\n  unpinned: allow\n" + rules, source: "t.yaml", pinFiles: nil)
    }

    @Test func explainNamesTheRuleTheLosersAndThePins() throws {
        let p = try load("rules:\n  - host: \"**.example.com\"\n    pins: [\"\(Self.pinA)\", \"\(Self.pinB)\"]\n  - host: api.example.com\n    pins:\n      - { pin: \"\(Self.pinC)\", at: ca, label: issuing CA }\n      - \"\(Self.pinA)\"\n")
        let lines = p.explain(try Authority.parse("API.example.com.:443").get())
        #expect(lines == [
            "CONNECT api.example.com:443",
            "rule at line 7: 'api.example.com', mode: enforce, trust: system",
            "also matching but less specific (never combined): '**.example.com' (line 5)",
            "the chain must validate under trust system with the hostname check; then one of these pins must match:",
            "  \(Self.pinC)  at: ca  (issuing CA)",
            "  \(Self.pinA)  at: any",
            "no match → refused with 502 Certificate Pin Mismatch",
        ])
        #expect(p.explain(try Authority.parse("example.org:443").get()).last == "no rule matches; defaults.unpinned is allow → tunnelled without any certificate check (logged as tunnel_unpinned)")
        #expect(p.explain(try Authority.parse("example.org:8443").get()).last?.contains("port 8443 is not in proxy.allowed_ports") == true)
    }

    /// Under pins-only an unmatched chain has no anchor: the proxy refuses it as chain_invalid (502
    /// Certificate Invalid) in every mode, and the explanation says so rather than "Pin Mismatch".
    @Test(arguments: ["enforce", "report"]) func explainUnderPinsOnlySaysChainInvalid(mode: String) throws {
        let p = try load("rules:\n  - host: a.test\n    trust: pins-only\n    mode: \(mode)\n    pins: [\"\(Self.pinA)\", \"\(Self.pinB)\"]\n")
        #expect(p.explain(try Authority.parse("a.test:443").get()).last
            == "no match → refused with 502 Certificate Invalid (chain_invalid: under trust pins-only a pinned certificate is the only anchor; in every mode)")
    }

    /// The steps before any rule, from any client: `allow_clients` is not looked at.
    @Test func explainRefusesBeforeAnyRuleForAnyClient() throws {
        let p = try PolicyLoader.load(yaml: "version: 1\nproxy: { allow_clients: [10.9.0.0/16], deny_destinations: [private] }\ndefaults:\n  unpinned: deny\n",
                                      source: "t.yaml", pinFiles: nil)
        #expect(p.explain(try Authority.parse("10.0.0.1:443").get()).last?.hasPrefix("refused before any rule: the address is in proxy.deny_destinations") == true)
        #expect(p.explain(try Authority.parse("other.test:443").get()).last == "no rule matches; defaults.unpinned is deny → refused with 403")
    }
}
