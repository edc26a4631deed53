/// What a reload changed, for the `policy_reloaded` line: rules by name (pattern and ports), pins
/// across all rules, and the deny list.
public struct PolicyDiff: Equatable, Sendable {
    public var rulesAdded: [String] = []
    public var rulesRemoved: [String] = []
    /// Same name, different mode, trust, pins, expiry or options.
    public var rulesChanged: [String] = []
    public var pinsAdded = 0
    public var pinsRemoved = 0
    public var denyAdded = 0
    public var denyRemoved = 0

    public init(from old: Policy, to new: Policy) {
        let before = Dictionary(old.rules.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        let after = Dictionary(new.rules.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        rulesAdded = new.rules.map(\.name).filter { before[$0] == nil }
        rulesRemoved = old.rules.map(\.name).filter { after[$0] == nil }
        rulesChanged = new.rules.compactMap { rule in
            guard let previous = before[rule.name], !previous.sameMeaning(as: rule) else { return nil }
            return rule.name
        }
        let oldPins = Set(old.rules.flatMap { $0.pins.map(\.pin) }), newPins = Set(new.rules.flatMap { $0.pins.map(\.pin) })
        pinsAdded = newPins.subtracting(oldPins).count
        pinsRemoved = oldPins.subtracting(newPins).count
        denyAdded = Set(new.deny).subtracting(old.deny).count
        denyRemoved = Set(old.deny).subtracting(new.deny).count
    }

    public var isEmpty: Bool {
        rulesAdded.isEmpty && rulesRemoved.isEmpty && rulesChanged.isEmpty && pinsAdded == 0 && pinsRemoved == 0
            && denyAdded == 0 && denyRemoved == 0
    }

    /// `rules +1 -0 ~2 (api.example.com); pins +1 -1; deny +1 -0`, or `no change to rules, pins or deny`.
    public var summary: String {
        guard !isEmpty else { return "no change to rules, pins or deny" }
        var text = "rules +\(rulesAdded.count) -\(rulesRemoved.count) ~\(rulesChanged.count)"
        let named = rulesAdded.map { "+" + $0 } + rulesRemoved.map { "-" + $0 } + rulesChanged.map { "~" + $0 }
        if !named.isEmpty { text += " (\(named.prefix(5).joined(separator: " "))\(named.count > 5 ? " …" : ""))" }
        return text + "; pins +\(pinsAdded) -\(pinsRemoved); deny +\(denyAdded) -\(denyRemoved)"
    }
}

extension Rule {
    /// Equal but for where the rule sits in the file.
    func sameMeaning(as other: Rule) -> Bool {
        pattern == other.pattern && ports == other.ports && mode == other.mode && trust == other.trust
            && pins.map(\.pin) == other.pins.map(\.pin) && pinset == other.pinset && expires == other.expires && onExpiry == other.onExpiry
    }
}
