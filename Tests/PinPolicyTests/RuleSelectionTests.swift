import Testing
@testable import PinPolicy

@Suite struct RuleSelectionTests {
    static let policy = try! load("""
        version: 1
        proxy: { allowed_ports: [443, 8443] }
        defaults: { unpinned: allow }
        rules:
          - host: "*.example.com"                #  5
            pins: ["\(pinA)"]
          - host: "**.api.example.com"           #  7
            pins: ["\(pinA)"]
          - host: api.example.com                #  9
            pins: ["\(pinA)"]
          - host: api.example.com                # 11
            ports: [8443]
            pins: ["\(pinA)"]
          - host: "**.example.com"               # 14
            pins: ["\(pinA)"]
          - host: "*.api.example.com"            # 16
            pins: ["\(pinA)"]
          - ip: 10.0.0.0/8                       # 18
            pins: ["\(pinA)"]
          - ip: 10.1.0.0/16                      # 20
            pins: ["\(pinA)"]
          - ip: 10.1.2.3                         # 22
            ports: [8443]
            pins: ["\(pinA)"]
          - ip: "2001:db8::/32"                  # 25
            pins: ["\(pinA)"]
        """).get()

    /// Exactly one rule: the most specific. Longest literal suffix first, then exact > `*.` > `**.`,
    /// then a rule with ports. Never a union.
    @Test(arguments: [
        ("api.example.com:443", 9),          // exact api.example.com beats **.api.example.com (same suffix)
        ("api.example.com:8443", 11),        // the port-split rule
        ("x.api.example.com:443", 16),       // *.api beats **.api (same suffix) and beats *.example.com (longer suffix)
        ("y.x.api.example.com:443", 7),      // only **.api.example.com among the api rules; longer suffix than **.example.com
        ("www.example.com:443", 5),          // *.example.com beats **.example.com
        ("example.com:443", 14),
        ("a.b.example.com:443", 14),
        ("10.9.9.9:443", 18),
        ("10.1.9.9:443", 20),
        ("10.1.2.3:443", 20),                // the /32 rule has ports [8443] only
        ("10.1.2.3:8443", 22),
        ("[::ffff:10.1.2.3]:8443", 22),      // IPv4-mapped IPv6 matches as the IPv4
        ("[::10.1.2.3]:8443", 22),           // so do IPv4-compatible and NAT64 spellings: they reach that host
        ("[64:ff9b::a01:203]:8443", 22),
        ("[64:ff9b:1::a01:203]:8443", 22),
        ("[64:ff9b::a09:909]:443", 18),
        ("[2001:db8::5]:443", 25),
    ])
    func mostSpecificRuleApplies(target: String, line: Int) throws {
        let authority = try Authority.parse(target).get()
        #expect(Self.policy.rule(for: authority)?.line == line)
    }

    @Test(arguments: ["example.org:443", "[2001:db9::1]:443", "11.0.0.1:443", "EXAMPLE.org.:443"])
    func noRuleMatches(target: String) throws {
        #expect(Self.policy.rule(for: try Authority.parse(target).get()) == nil)
    }

    @Test func hostPatternsNeverMatchIPLiteralsAndIPRulesNeverMatchNames() throws {
        let policy = try load(header + "rules:\n  - host: \"**.in-addr.arpa\"\n    pins: [\"\(pinA)\"]\n  - ip: 0.0.0.0/0\n    pins: [\"\(pinA)\"]\n").get()
        #expect(policy.rule(for: try Authority.parse("10.0.0.1:443").get())?.line == 7)
        #expect(policy.rule(for: try Authority.parse("host.example:443").get()) == nil)
    }

    @Test func trailingDotAndCaseSelectTheSameRule() throws {
        for target in ["API.EXAMPLE.COM.:443", "api.example.com:443", "Api.Example.Com:443"] {
            #expect(Self.policy.rule(for: try Authority.parse(target).get())?.line == 9)
        }
    }
}
