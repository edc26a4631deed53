/// A `host:` pattern of the policy (docs/policy.md, "Patterns and which rule applies"). A wildcard
/// is only ever the whole leftmost label.
public enum HostPattern: Hashable, Sendable, CustomStringConvertible {
    /// `a.b.c`: that name only.
    case exact(String)
    /// `*.b.c`: exactly one more label (`x.b.c`; not `b.c`, not `y.x.b.c`).
    case oneLabel(suffix: String)
    /// `**.b.c`: `b.c` itself and any depth below it.
    case anyDepth(suffix: String)

    public enum Problem: Error, Equatable, Sendable {
        case bareWildcard, misplacedWildcard, badName(HostName.Problem)

        public var message: String {
            switch self {
            case .bareWildcard: return "a bare '*' or '**' matches everything; list the domains instead"
            case .misplacedWildcard: return "a wildcard may only be the whole leftmost label ('*.example.com' or '**.example.com')"
            case .badName(let p): return p.message
            }
        }
    }

    public static func parse(_ text: String) -> Result<HostPattern, Problem> {
        if text == "*" || text == "**" || text == "*." || text == "**." { return .failure(.bareWildcard) }
        var rest = text
        var make: (String) -> HostPattern = { .exact($0) }
        if text.hasPrefix("**.") {
            rest = String(text.dropFirst(3)); make = { .anyDepth(suffix: $0) }
        } else if text.hasPrefix("*.") {
            rest = String(text.dropFirst(2)); make = { .oneLabel(suffix: $0) }
        }
        if rest.contains(Character("*")) { return .failure(.misplacedWildcard) }
        return HostName.normalize(rest).map(make).mapError { .badName($0) }
    }

    /// The part of the pattern that must appear literally at the end of a matching name.
    public var literalSuffix: String {
        switch self {
        case .exact(let s), .oneLabel(let s), .anyDepth(let s): return s
        }
    }

    /// For the same literal suffix: exact (0) beats `*.` (1) beats `**.` (2).
    var wildcardRank: Int {
        switch self {
        case .exact: return 0
        case .oneLabel: return 1
        case .anyDepth: return 2
        }
    }

    /// Whether the normalised name matches.
    public func matches(_ name: String) -> Bool {
        switch self {
        case .exact(let s):
            return name == s
        case .oneLabel(let s):
            guard name.hasSuffix("." + s) else { return false }
            return !name.dropLast(s.count + 1).contains(Character("."))
        case .anyDepth(let s):
            return name == s || name.hasSuffix("." + s)
        }
    }

    public var description: String {
        switch self {
        case .exact(let s): return s
        case .oneLabel(let s): return "*.\(s)"
        case .anyDepth(let s): return "**.\(s)"
        }
    }
}
