import Testing
@testable import PinPolicy

/// `Policy.rule(for:)` finds its rule through `RuleIndex`; the pass over every rule it replaced is
/// kept here as the oracle, and both are asked the same questions over generated rules and targets.
@Suite struct RuleIndexTests {
    /// The lookup as it was before the index: every rule that applies, the most specific first
    /// (the first in the file among equals), the IPv4 address an IPv6 literal embeds before it.
    static func scan(_ rules: [Rule], _ authority: Authority) -> Rule? {
        func mostSpecific(_ authority: Authority) -> Rule? {
            rules.filter { $0.applies(to: authority) }.min { $0.specificity < $1.specificity }
        }
        if case .ip(let address) = authority.target, let embedded = address.embeddedIPv4,
           let rule = mostSpecific(Authority(target: .ip(embedded), port: authority.port)) {
            return rule
        }
        return mostSpecific(authority)
    }

    /// A fixed-seed generator (SplitMix64): the same rules and targets on every run.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9e37_79b9_7f4a_7c15
            var z = state
            z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
            z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
            return z ^ (z >> 31)
        }
    }

    /// Names of one to four labels over a small alphabet, so that patterns and names often meet.
    static func name(_ random: inout Seeded, labels: ClosedRange<Int> = 1...4) -> String {
        (0..<Int.random(in: labels, using: &random)).map { _ in ["a", "b", "c", "x-1"].randomElement(using: &random)! }.joined(separator: ".")
    }

    static func ipv4(_ random: inout Seeded) -> [UInt8] {
        [10, UInt8.random(in: 0...1, using: &random), UInt8.random(in: 0...3, using: &random), UInt8.random(in: 0...3, using: &random)]
    }

    /// IPv6 addresses that embed an IPv4 one (mapped, compatible, both NAT64 prefixes), and others.
    static func ipv6(_ random: inout Seeded) -> [UInt8] {
        let v4 = ipv4(&random)
        switch Int.random(in: 0..<5, using: &random) {
        case 0: return [UInt8](repeating: 0, count: 10) + [0xff, 0xff] + v4
        case 1: return [UInt8](repeating: 0, count: 12) + v4
        case 2: return [0, 0x64, 0xff, 0x9b] + [UInt8](repeating: 0, count: 8) + v4
        case 3: return [0, 0x64, 0xff, 0x9b, 0, 1] + [UInt8](repeating: 0, count: 6) + v4
        default: return [0x20, 0x01, 0x0d, 0xb8] + [UInt8](repeating: 0, count: 10) + [0, UInt8.random(in: 0...3, using: &random)]
        }
    }

    static func rules(_ count: Int, _ random: inout Seeded) -> [Rule] {
        let portChoices: [[UInt16]?] = [nil, nil, [443], [8443], [443, 8443]]
        return (0..<count).map { line in
            let pattern: RulePattern
            switch Int.random(in: 0..<10, using: &random) {
            case 0..<3: pattern = .host(.exact(name(&random)))
            case 3..<5: pattern = .host(.oneLabel(suffix: name(&random, labels: 1...3)))
            case 5..<7: pattern = .host(.anyDepth(suffix: name(&random, labels: 1...3)))
            case 7, 8:  // a network not masked to its prefix (10.0.1.3/16) matches as the masked one
                pattern = .ip(CIDR(network: IPAddress(bytes: ipv4(&random))!, prefixLength: Int.random(in: 8...32, using: &random))!)
            default:
                pattern = .ip(CIDR(network: IPAddress(bytes: ipv6(&random))!, prefixLength: [32, 48, 96, 120, 128].randomElement(using: &random)!)!)
            }
            let mode: RuleMode = [.enforce, .report, .unpinned].randomElement(using: &random)!
            return Rule(pattern: pattern, ports: portChoices.randomElement(using: &random)!, mode: mode, line: line + 1)
        }
    }

    static func targets(_ count: Int, _ random: inout Seeded) -> [Authority] {
        (0..<count).map { _ in
            let port: UInt16 = [443, 8443, 80].randomElement(using: &random)!
            switch Int.random(in: 0..<4, using: &random) {
            case 0, 1: return Authority(target: .name(name(&random, labels: 1...5)), port: port)
            case 2: return Authority(target: .ip(IPAddress(bytes: ipv4(&random))!), port: port)
            default: return Authority(target: .ip(IPAddress(bytes: ipv6(&random))!), port: port)
            }
        }
    }

    /// Many rule sets, many targets: the indexed lookup picks exactly the rule the scan picks,
    /// duplicates of a pattern (which only a policy made in memory can have) included.
    @Test func theIndexPicksWhatTheScanPicks() {
        var random = Seeded(state: 30)
        var matched = 0
        for size in [1, 5, 40, 300] {
            for _ in 0..<20 {
                let rules = Self.rules(size, &random)
                let policy = Policy(defaults: PolicyDefaults(unpinned: .allow), rules: rules)
                for authority in Self.targets(200, &random) {
                    let expected = Self.scan(rules, authority)
                    #expect(policy.rule(for: authority) == expected, "\(authority) among \(rules.map(\.name))")
                    if expected != nil { matched += 1 }
                }
            }
        }
        #expect(matched > 5000)  // the generated targets do meet the generated rules
    }

    /// `rules(matching:)`: every rule whose pattern matches one of the targets on any port, once, in file order.
    @Test func rulesMatchingAreThoseThatMatchInFileOrder() {
        var random = Seeded(state: 6)
        for _ in 0..<20 {
            let rules = Self.rules(200, &random)
            let policy = Policy(defaults: PolicyDefaults(unpinned: .allow), rules: rules)
            for authority in Self.targets(200, &random) {
                #expect(policy.rules(matching: authority.target) == rules.filter { $0.pattern.matches(authority.target) })
                if case .ip(let address) = authority.target, let embedded = address.embeddedIPv4 {
                    #expect(policy.rules(matching: authority.target, .ip(embedded))
                            == rules.filter { $0.pattern.matches(authority.target) || $0.pattern.matches(.ip(embedded)) })
                }
            }
        }
    }

    /// The precedence of docs/policy.md, one case each: the longest literal suffix, then exact over
    /// `*.` over `**.`, then a rule with `ports`; for addresses the longest prefix, and an IPv4 rule
    /// for the address an IPv6 literal embeds before any IPv6 rule.
    @Test func precedenceAsDocumented() {
        let rules = [
            Rule(pattern: .host(.anyDepth(suffix: "example.com")), line: 1),
            Rule(pattern: .host(.oneLabel(suffix: "example.com")), line: 2),
            Rule(pattern: .host(.exact("api.example.com")), line: 3),
            Rule(pattern: .host(.anyDepth(suffix: "api.example.com")), line: 4),
            Rule(pattern: .host(.exact("api.example.com")), ports: [8443], line: 5),
            Rule(pattern: .ip(CIDR("10.0.0.0/8")!), line: 6),
            Rule(pattern: .ip(CIDR("10.1.0.0/16")!), line: 7),
            Rule(pattern: .ip(CIDR("64:ff9b::/96")!), line: 8),
        ]
        let policy = Policy(defaults: PolicyDefaults(unpinned: .allow), rules: rules)
        func line(_ target: String, _ port: UInt16 = 443) -> Int? {
            let parsed = IPAddress(target).map(Target.ip) ?? .name(target)
            return policy.rule(for: Authority(target: parsed, port: port))?.line
        }
        #expect(line("example.com") == 1)
        #expect(line("www.example.com") == 2)
        #expect(line("a.b.example.com") == 1)
        #expect(line("api.example.com") == 3)
        #expect(line("api.example.com", 8443) == 5)
        #expect(line("x.api.example.com") == 4)
        #expect(line("10.2.0.1") == 6)
        #expect(line("10.1.0.1") == 7)
        #expect(line("::ffff:10.1.0.1") == 7)
        #expect(line("64:ff9b::a01:1") == 7)
        #expect(line("64:ff9b::b00:1") == 8)
        #expect(line("11.0.0.1") == nil)
        #expect(line("example.org") == nil)
    }

    /// The index follows the rules: a policy whose rules are replaced finds the new ones, and two
    /// policies with the same rules are equal and hash alike whatever their indexes.
    @Test func theIndexFollowsTheRulesAndTakesNoPartInEquality() {
        var policy = Policy(defaults: PolicyDefaults(unpinned: .allow), rules: [Rule(pattern: .host(.exact("a.test")), line: 1)])
        policy.rules = [Rule(pattern: .host(.exact("b.test")), line: 1)]
        #expect(policy.rule(for: Authority(target: .name("a.test"), port: 443)) == nil)
        #expect(policy.rule(for: Authority(target: .name("b.test"), port: 443))?.line == 1)
        let same = Policy(defaults: PolicyDefaults(unpinned: .allow), rules: policy.rules)
        #expect(policy == same)
        #expect(policy.hashValue == same.hashValue)
    }
}
