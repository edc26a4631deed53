import Foundation

/// What a reload changed, for the `policy_reloaded` line: rules by name (pattern and ports), pins
/// across all rules, the deny list, and `defaults`.
public struct PolicyDiff: Equatable, Sendable {
    public var rulesAdded: [String] = []
    public var rulesRemoved: [String] = []
    /// Same name, different meaning: mode, trust, pins (or where they sit, or a backup mark),
    /// expiry, `ct`, `mirror_checks`, `quarantine`, `require_keylog` (`Rule.sameMeaning`).
    public var rulesChanged: [String] = []
    public var pinsAdded = 0
    public var pinsRemoved = 0
    public var denyAdded = 0
    public var denyRemoved = 0
    /// The `defaults` keys whose value changed, with the new value (`ct: require`), in file order.
    public var defaultsChanged: [String] = []

    public init(from old: Policy, to new: Policy) {
        // Each name made once, and rules found by their place: a reload of 50,000 rules copies none.
        let oldNames = old.rules.map(\.name), newNames = new.rules.map(\.name)
        let before = Dictionary(zip(oldNames, old.rules.indices), uniquingKeysWith: { first, _ in first })
        let after = Set(newNames)
        rulesAdded = newNames.filter { before[$0] == nil }
        rulesRemoved = oldNames.filter { !after.contains($0) }
        rulesChanged = zip(newNames, new.rules).compactMap { name, rule in
            guard let previous = before[name], !old.rules[previous].sameMeaning(as: rule) else { return nil }
            return name
        }
        let oldPins = Set(old.rules.flatMap { $0.pins.map(\.pin) }), newPins = Set(new.rules.flatMap { $0.pins.map(\.pin) })
        pinsAdded = newPins.subtracting(oldPins).count
        pinsRemoved = oldPins.subtracting(newPins).count
        denyAdded = Set(new.deny).subtracting(old.deny).count
        denyRemoved = Set(old.deny).subtracting(new.deny).count
        defaultsChanged = new.defaults.changes(since: old.defaults)
    }

    public var isEmpty: Bool {
        rulesAdded.isEmpty && rulesRemoved.isEmpty && rulesChanged.isEmpty && pinsAdded == 0 && pinsRemoved == 0
            && denyAdded == 0 && denyRemoved == 0 && defaultsChanged.isEmpty
    }

    /// `rules +1 -0 ~2 (api.example.com); pins +1 -1; deny +1 -0`, then `; defaults ~1 (ct: require)`
    /// when `defaults` changed, or `no change to rules, pins, deny or defaults`.
    public var summary: String {
        guard !isEmpty else { return "no change to rules, pins, deny or defaults" }
        var text = "rules +\(rulesAdded.count) -\(rulesRemoved.count) ~\(rulesChanged.count)"
        let named = rulesAdded.map { "+" + $0 } + rulesRemoved.map { "-" + $0 } + rulesChanged.map { "~" + $0 }
        if !named.isEmpty { text += " (\(named.prefix(5).joined(separator: " "))\(named.count > 5 ? " …" : ""))" }
        text += "; pins +\(pinsAdded) -\(pinsRemoved); deny +\(denyAdded) -\(denyRemoved)"
        if !defaultsChanged.isEmpty { text += "; defaults ~\(defaultsChanged.count) (\(defaultsChanged.joined(separator: ", ")))" }
        return text
    }
}

extension PolicyDefaults {
    /// Each key that differs from `old`, as `key: new value`, in the order the file lists them.
    func changes(since old: PolicyDefaults) -> [String] {
        var out: [String] = []
        func note(_ key: String, _ changed: Bool, _ value: String) { if changed { out.append("\(key): \(value)") } }
        note("unpinned", unpinned != old.unpinned, unpinned.rawValue)
        note("trust", trust != old.trust, trust.description)
        note("require_backup", requireBackup != old.requireBackup, requireBackup.rawValue)
        note("require_keylog", requireKeylog != old.requireKeylog, String(requireKeylog))
        note("quarantine", quarantine != old.quarantine, Self.durationText(quarantine))
        note("mirror_checks", mirrorChecks != old.mirrorChecks, String(mirrorChecks))
        note("ct", ct != old.ct, ct.rawValue)
        return out
    }

    /// A duration as the file would say it: `10m`, `1h`, `90s`.
    static func durationText(_ seconds: TimeInterval) -> String {
        let whole = Int(seconds)
        if whole > 0, whole % 3600 == 0 { return "\(whole / 3600)h" }
        if whole > 0, whole % 60 == 0 { return "\(whole / 60)m" }
        return "\(whole)s"
    }
}

extension Rule {
    /// The same rule in everything that decides how its tunnels are judged: what it matches, its
    /// mode, trust, pins (with where each may match and its backup mark), expiry, Certificate
    /// Transparency, mirrors, quarantine and key-log requirement. Where the rule and its pins sit in
    /// the file and the pins' labels do not count: an edit elsewhere in the file (a `deny:` key
    /// added above the rules shifts every line) leaves the rule as it was.
    public func sameMeaning(as other: Rule) -> Bool {
        pattern == other.pattern && ports == other.ports && mode == other.mode && trust == other.trust
            && pins.lazy.map(\.meaning).elementsEqual(other.pins.lazy.map(\.meaning)) && pinset == other.pinset
            && expires == other.expires && onExpiry == other.onExpiry && requireKeylog == other.requireKeylog
            && quarantine == other.quarantine && mirrorChecks == other.mirrorChecks && ct == other.ct && isStandIn == other.isStandIn
    }
}

extension PinEntry {
    /// What the pin means to a verdict: the pin, where it may match, and whether it is the accepted backup.
    fileprivate var meaning: PinMeaning { PinMeaning(pin: pin, position: position, acceptedBackup: acceptedBackup) }
}

private struct PinMeaning: Equatable {
    let pin: Pin
    let position: PinPosition
    let acceptedBackup: Bool
}
