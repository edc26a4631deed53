// What one CONNECT's rule lookup costs with many rules, in a release build:
// Benchmarks/manyrules.sh runs it as `pinproxy-rulelookup POLICY [ROUNDS=7]` on the policy it
// generated. Looks up, once per rule, a target that rule matches (a name under a wildcard, an
// address in a range, an IPv4-embedding IPv6 form of each IPv4 rule's address) and as many targets
// no rule matches (at most 2,000 of each, evenly spread), and prints the median over ROUNDS
// rounds of µs per lookup. CPU only; bounded by the counts. Not a test: numbers for
// docs/performance.md.
import Foundation
import PinPolicy

let arguments = CommandLine.arguments.dropFirst()
guard let path = arguments.first else { fatalError("usage: pinproxy-rulelookup POLICY [ROUNDS]") }
let rounds = Int(arguments.dropFirst().first ?? "") ?? 7
let policy = try PolicyLoader.load(file: path, pinFiles: nil)

var targets: [Authority] = [], misses: [Authority] = []
for (index, rule) in policy.rules.enumerated() {
    let port = rule.ports?.first ?? 443
    switch rule.pattern {
    case .host(.exact(let name)): targets.append(Authority(target: .name(name), port: port))
    case .host(.oneLabel(let suffix)): targets.append(Authority(target: .name("a." + suffix), port: port))
    case .host(.anyDepth(let suffix)): targets.append(Authority(target: .name("x.y." + suffix), port: port))
    case .ip(let cidr):
        targets.append(Authority(target: .ip(cidr.network), port: port))
        if cidr.network.isIPv4 {  // the NAT64 form reaches the same IPv4 host
            targets.append(Authority(target: .ip(IPAddress(bytes: [0, 0x64, 0xff, 0x9b] + [UInt8](repeating: 0, count: 8) + cidr.network.bytes)!), port: port))
        }
    }
    misses.append(Authority(target: .name("miss\(index).nowhere.example"), port: 443))
}

// At most 2,000 of each, spread over the file (a linear lookup at 50,000 rules takes ms each).
func spread(_ all: [Authority]) -> [Authority] { stride(from: 0, to: all.count, by: max(1, all.count / 2000)).map { all[$0] } }
targets = spread(targets) + spread(misses)

var samples: [Double] = []
var matched = 0
for _ in 0..<rounds {
    matched = 0
    let start = ContinuousClock.now
    for target in targets where policy.rule(for: target) != nil { matched += 1 }
    let elapsed = ContinuousClock.now - start
    samples.append(Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12)
}
let median = samples.sorted()[samples.count / 2] / Double(targets.count)
print(String(format: "rule lookup: %.2f µs median over %d rounds (%d lookups a round, %d matched a rule; %d rules)",
             median, rounds, targets.count, matched, policy.rules.count))
