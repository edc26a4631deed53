/// Where the rules of a policy are, by what they match: the rules a target can match are found with
/// a few hash lookups (one per label of a name, one per prefix length in use for an address)
/// instead of a pass over every rule. Which of them applies is still decided by `Rule.applies` and
/// `Rule.specificity` on the few found (`Policy.rule(for:)`), so the index only narrows, never judges.
struct RuleIndex: Sendable {
    /// Positions in `Policy.rules`, in file order, by the name or suffix of the pattern.
    private var exact: [String: [Int]] = [:]
    private var oneLabel: [String: [Int]] = [:]
    private var anyDepth: [String: [Int]] = [:]
    /// IP rules by prefix length and network masked to it (`CIDR.contains` compares masked bytes).
    private var ranges: [MaskedNetwork: [Int]] = [:]
    /// The prefix lengths in use, per address length in bytes (4 or 16): at most 33 or 129 lookups.
    private var prefixLengths: [Int: [Int]] = [:]

    private struct MaskedNetwork: Hashable {
        let prefixLength: Int
        let bytes: [UInt8]
    }

    init(_ rules: [Rule]) {
        for (position, rule) in rules.enumerated() {
            switch rule.pattern {
            case .host(.exact(let name)): exact[name, default: []].append(position)
            case .host(.oneLabel(let suffix)): oneLabel[suffix, default: []].append(position)
            case .host(.anyDepth(let suffix)): anyDepth[suffix, default: []].append(position)
            case .ip(let cidr):
                let key = MaskedNetwork(prefixLength: cidr.prefixLength, bytes: Self.masked(cidr.network.bytes, to: cidr.prefixLength))
                if ranges[key] == nil, !prefixLengths[key.bytes.count, default: []].contains(key.prefixLength) {
                    prefixLengths[key.bytes.count, default: []].append(key.prefixLength)
                }
                ranges[key, default: []].append(position)
            }
        }
    }

    /// The positions of every rule whose pattern matches `target` (on any port), in file order:
    /// those `RulePattern.matches` says yes to, found without looking at the others.
    func positions(matching target: Target) -> [Int] {
        var found: [Int] = []
        switch target {
        case .name(let name):
            found += exact[name] ?? []
            // `*.s` matches one label more than `s`; `**.s` matches `s` and every name ending in `.s`.
            found += anyDepth[name] ?? []
            var rest = Substring(name)
            var first = true
            while let dot = rest.firstIndex(of: ".") {
                rest = rest[rest.index(after: dot)...]
                let suffix = String(rest)
                if first { found += oneLabel[suffix] ?? [] }
                found += anyDepth[suffix] ?? []
                first = false
            }
        case .ip(let address):
            let bytes = address.unmapped.bytes
            for length in prefixLengths[bytes.count] ?? [] {
                found += ranges[MaskedNetwork(prefixLength: length, bytes: Self.masked(bytes, to: length))] ?? []
            }
        }
        return found.sorted()
    }

    /// The first `prefixLength` bits of `bytes`, the rest zero.
    private static func masked(_ bytes: [UInt8], to prefixLength: Int) -> [UInt8] {
        bytes.enumerated().map { index, byte in
            let bits = min(8, max(0, prefixLength - index * 8))
            return bits == 8 ? byte : byte & ~(0xff >> UInt8(bits))
        }
    }
}
