import Foundation
import PinPolicy

/// `pinproxy pin --import nsc FILE`: the `<pin-set>`s of an Android network_security_config.xml as
/// policy rules. A `<domain-config>` without a pin-set of its own takes its parent's (Android's
/// inheritance); `includeSubdomains="true"` becomes `**.`; a pin-set's `expiration` becomes the rule's
/// `expires` with `on_expiry: report`, since Android stops checking the pins from that date on.
///
/// The format has no word for where a pin sits in the chain or which pin is the backup: Android
/// matches a pin anywhere. pinproxy's export writes a pin's `at:` and `backup: true` in a comment
/// beside it (`<!-- at: ca, backup: true -->`), and the import takes them back from there; a pin
/// without one is imported `at: any`, and the rule says what that means for its backup, so that
/// `check` and the log say the same of it (`no_real_backup`).
enum NetworkSecurityConfigImport {
    /// One rule: a `<domain>` with its pin-set.
    struct Imported {
        let pattern: String
        let pins: [ImportedPin]
        let expires: String?
        let line: Int
        /// The domain-config (or a parent) names its own trust anchors, which are not imported.
        let ownAnchors: Bool
    }

    /// A pin and what the comment beside it kept (`at: any`, unmarked, without one).
    struct ImportedPin: Hashable {
        let pin: Pin
        var position: PinPosition = .any
        var backup = false
        /// A comment beside it said where it sits.
        var placed = false
    }

    struct PinSet: Hashable {
        let pins: [ImportedPin]
        let expiration: String?
    }

    /// The comment pinproxy's export writes beside a pin (`at: leaf`, `at: ca, backup: true`),
    /// read back onto `pin`; nil for any other comment.
    static func placed(_ pin: Pin, by comment: String) -> ImportedPin? {
        let words = comment.trimmingCharacters(in: .whitespacesAndNewlines)
        if words == "at: ca, backup: true" { return ImportedPin(pin: pin, position: .ca, backup: true, placed: true) }
        guard words.hasPrefix("at: "), let position = PinPosition(rawValue: String(words.dropFirst(4))) else { return nil }
        return ImportedPin(pin: pin, position: position, placed: true)
    }

    /// Writes the rules of the file's `<pin-set>`s, ready to paste under `rules:`, a line at a time.
    /// The file is read twice: the first reading checks it all (nothing is written if it has an
    /// error) and learns what the second needs before it reaches a `<domain>`: the number of rules
    /// (the header says it) and each `<domain-config>`'s pin-set and trust anchors, which may come
    /// after its domains. The second writes each rule as its `<domain>` closes.
    static func write(_ bytes: [UInt8], file: String, line: @escaping (String) -> Void) throws(XML.Problem) {
        var survey = Walk(bytes: bytes, configs: nil, rule: { _ in })
        let configs = try survey.run()
        for text in header(rules: configs.rules, file: file) { line(text) }
        var writing = Walk(bytes: bytes, configs: configs) { rule in render(rule).forEach(line) }
        _ = try writing.run()
    }

    /// What the first reading keeps of each `<domain-config>` it walks, in document order: 13 bytes
    /// apiece, and each distinct pin-set once.
    struct Configs {
        var parent: [Int32] = []
        var ownSet: [Int32] = []
        var ownAnchors: [Bool] = []
        var domains: [Int32] = []
        var sets: [PinSet] = []
        var setNumbers: [PinSet: Int32] = [:]
        /// Worked out once all are read: the pin-set each one's domains take (its own, else its
        /// parent's: Android's inheritance), whether it or a parent names trust anchors, and the
        /// number of rules.
        var effectiveSet: [Int32] = []
        var anchors: [Bool] = []
        var rules = 0

        mutating func add(under enclosing: Int?) -> Int {
            parent.append(Int32(enclosing ?? -1)); ownSet.append(-1); ownAnchors.append(false); domains.append(0)
            return parent.count - 1
        }

        mutating func close(_ config: Int, set: PinSet?, anchors: Bool, domains count: Int) {
            if let set {
                if setNumbers[set] == nil { setNumbers[set] = Int32(sets.count); sets.append(set) }
                ownSet[config] = setNumbers[set]!
            }
            ownAnchors[config] = anchors
            domains[config] = Int32(count)
        }

        /// Parents come before their children, so one pass in document order settles each.
        mutating func settle() {
            for config in parent.indices {
                let up = Int(parent[config])
                effectiveSet.append(ownSet[config] >= 0 ? ownSet[config] : up >= 0 ? effectiveSet[up] : -1)
                anchors.append(ownAnchors[config] || (up >= 0 && anchors[up]))
                if effectiveSet[config] >= 0, !sets[Int(effectiveSet[config])].pins.isEmpty { rules += Int(domains[config]) }
            }
        }

        func set(of config: Int) -> PinSet? { effectiveSet[config] >= 0 ? sets[Int(effectiveSet[config])] : nil }
    }

    /// One reading of the file's events, checking them as Android reads the file. The first error
    /// in the order a walk of the whole tree would meet it is the one reported: for each
    /// `<domain-config>`, its attributes, then its pin-sets, then its domains, then its nested
    /// domain-configs. With `configs` (the first reading's), it hands out each rule as its
    /// `<domain>` closes, a domain-config's own domains before those of the ones nested in it.
    struct Walk {
        private var reader: XML.Reader
        private let known: Configs?
        private let rule: (Imported) -> Void
        private var configs = Configs()

        /// What each open element is to the walk.
        private enum Role { case root, config, pinSet, pin, domain, ignored }
        private var roles: [Role] = []
        /// The open domain-configs, innermost last.
        private var open: [OpenConfig] = []
        private var rootProblem: XML.Problem?
        private var firstProblem: XML.Problem?
        private var text = ""
        private var elementLine = 0
        private var attributes: [String: String] = [:]

        private struct OpenConfig {
            let number: Int
            var attributeProblem: XML.Problem?
            var pinSetProblem: XML.Problem?
            var domainProblem: XML.Problem?
            var nestedProblem: XML.Problem?
            var problem: XML.Problem? { attributeProblem ?? pinSetProblem ?? domainProblem ?? nestedProblem }
            var hasPinSet = false
            var set: PinSet?
            var anchors = false
            var domains = 0
            /// The pin-set being read: its pins, its expiration, and the pin a comment would be beside.
            var pins: [ImportedPin] = []
            var expiration: String?
            var besidePin: Int?
            /// The rules of the domain-configs nested in it, held until its own are out.
            var nestedRules: [Imported] = []
        }

        init(bytes: [UInt8], configs: Configs?, rule: @escaping (Imported) -> Void) {
            reader = XML.Reader(bytes: bytes)
            known = configs
            self.rule = rule
        }

        /// Reads to the end; the configs as the first reading learns them.
        mutating func run() throws(XML.Problem) -> Configs {
            // Bounded by the file: each event moves the reader on.
            while let event = try reader.next() {
                switch event {
                case .start(let name, let attributes, let line): start(name, attributes, line)
                case .end: end()
                case .text(let piece): if roles.last == .pin || roles.last == .domain { text += piece }
                case .comment(let comment): besideLastPin(comment)
                }
            }
            if let problem = rootProblem ?? firstProblem { throw problem }
            configs.settle()
            return configs
        }

        private mutating func start(_ name: String, _ attributes: [String: String], _ line: Int) {
            let parent = roles.last
            if parent == .pinSet { open[open.count - 1].besidePin = nil }
            let role: Role
            switch (parent, name) {
            case (nil, "network-security-config"): role = .root
            case (nil, _):
                rootProblem = XML.Problem(line: line, message: "the root element is <\(name)>, not <network-security-config>")
                role = .ignored
            case (.root?, "domain-config"), (.config?, "domain-config"):
                let number = configs.add(under: parent == .config ? open.last!.number : nil)
                open.append(OpenConfig(number: number, attributeProblem: Self.only(name, attributes, line, ["cleartextTrafficPermitted"])))
                role = .config
            case (.config?, "pin-set"):
                role = open[open.count - 1].hasPinSet ? .ignored : .pinSet
                pinSetStarts(attributes, line)
            case (.config?, "domain"):
                role = .domain
            case (.config?, "trust-anchors"):
                open[open.count - 1].anchors = true
                role = .ignored
            case (.pinSet?, "pin"):
                role = .pin
                if let problem = Self.only(name, attributes, line, ["digest"]) {
                    pinSetProblem(problem)
                } else if attributes["digest"] != "SHA-256" {
                    pinSetProblem(XML.Problem(line: line, message: "a <pin> needs digest=\"SHA-256\" (the only digest Android accepts), not '\(attributes["digest"] ?? "")'"))
                }
            case (.pinSet?, _):
                pinSetProblem(XML.Problem(line: line, message: "<\(name)> in a <pin-set>; only <pin> belongs there"))
                role = .ignored
            default:
                role = .ignored
            }
            roles.append(role)
            if role == .pin || role == .domain {
                text = ""
                elementLine = line
                self.attributes = attributes
            }
        }

        private mutating func pinSetStarts(_ attributes: [String: String], _ line: Int) {
            guard !open[open.count - 1].hasPinSet else {
                return pinSetProblem(XML.Problem(line: line, message: "a second <pin-set> in one <domain-config>"))
            }
            open[open.count - 1].hasPinSet = true
            if let problem = Self.only("pin-set", attributes, line, ["expiration"]) { return pinSetProblem(problem) }
            if let date = attributes["expiration"] {
                guard let parsed = RFC3339.parse(date + "T00:00:00Z") else {
                    return pinSetProblem(XML.Problem(line: line, message: "expiration must be a date yyyy-MM-dd, not '\(date)'"))
                }
                open[open.count - 1].expiration = RFC3339.format(parsed)
            }
        }

        private mutating func pinSetProblem(_ problem: XML.Problem) {
            if open[open.count - 1].pinSetProblem == nil { open[open.count - 1].pinSetProblem = problem }
        }

        private mutating func end() {
            switch roles.removeLast() {
            case .pin: pinEnds()
            case .pinSet:
                let config = open[open.count - 1]
                open[open.count - 1].set = PinSet(pins: config.pins, expiration: config.expiration)
            case .domain: domainEnds()
            case .config: configEnds()
            case .root, .ignored: break
            }
        }

        private mutating func pinEnds() {
            guard open[open.count - 1].pinSetProblem == nil else { return }
            switch Pin.parse("spki-sha256:" + text.filter { !$0.isWhitespace }) {
            case .success(let parsed):
                guard !open[open.count - 1].pins.contains(where: { $0.pin == parsed }) else { return }
                open[open.count - 1].pins.append(ImportedPin(pin: parsed))
                open[open.count - 1].besidePin = open[open.count - 1].pins.count - 1
            case .failure(let problem): pinSetProblem(XML.Problem(line: elementLine, message: problem.message))
            }
        }

        /// The first of pinproxy's comments right after a pin, before the next element, places it.
        private mutating func besideLastPin(_ comment: String) {
            guard roles.last == .pinSet, let index = open[open.count - 1].besidePin, !open[open.count - 1].pins[index].placed,
                  let placed = placed(open[open.count - 1].pins[index].pin, by: comment) else { return }
            open[open.count - 1].pins[index] = placed
        }

        private mutating func domainEnds() {
            open[open.count - 1].domains += 1
            let pattern: String
            switch Self.pattern(text, attributes, elementLine) {
            case .success(let p): pattern = p
            case .failure(let problem):
                if open[open.count - 1].domainProblem == nil { open[open.count - 1].domainProblem = problem }
                return
            }
            let config = open[open.count - 1]
            guard let known, let set = known.set(of: config.number), !set.pins.isEmpty else { return }  // a domain without pins: nothing to pin
            let imported = Imported(pattern: pattern, pins: set.pins, expires: set.expiration, line: elementLine, ownAnchors: known.anchors[config.number])
            hand(imported, from: open.count)
        }

        /// A rule of the domain-config `depth` deep out: to the caller for a top-level one's, else held
        /// by the one it is nested in until that one's own are out.
        private mutating func hand(_ imported: Imported, from depth: Int) {
            if depth == 1 { rule(imported) } else { open[depth - 2].nestedRules.append(imported) }
        }

        private mutating func configEnds() {
            let config = open.removeLast()
            configs.close(config.number, set: config.set, anchors: config.anchors, domains: config.domains)
            if let problem = config.problem {
                if open.isEmpty {
                    if firstProblem == nil { firstProblem = problem }
                } else if open[open.count - 1].nestedProblem == nil {
                    open[open.count - 1].nestedProblem = problem
                }
            }
            for imported in config.nestedRules { hand(imported, from: open.count + 1) }
        }

        /// A `<domain>`'s host pattern.
        private static func pattern(_ text: String, _ attributes: [String: String], _ line: Int) -> Result<String, XML.Problem> {
            if let problem = only("domain", attributes, line, ["includeSubdomains"]) { return .failure(problem) }
            let name = text.trimmingCharacters(in: .whitespacesAndNewlines)
            let subdomains: Bool
            switch attributes["includeSubdomains"] ?? "false" {
            case "true": subdomains = true
            case "false": subdomains = false
            case let other: return .failure(XML.Problem(line: line, message: "includeSubdomains must be true or false, not '\(other)'"))
            }
            let pattern = subdomains ? "**." + name : name
            if case .failure(let problem) = HostPattern.parse(pattern) {
                return .failure(XML.Problem(line: line, message: "<domain>\(name)</domain>: \(problem.message)"))
            }
            return .success(pattern)
        }

        /// The first attribute (in name order) the element may not have.
        private static func only(_ element: String, _ attributes: [String: String], _ line: Int, _ allowed: Set<String>) -> XML.Problem? {
            attributes.keys.sorted().first { !allowed.contains($0) }.map { XML.Problem(line: line, message: "unknown attribute '\($0)' of <\(element)>") }
        }
    }

    /// The header above the rules.
    static func header(rules: Int, file: String) -> [String] {
        ["# pinproxy pin --import nsc \(file): \(rules) rule\(rules == 1 ? "" : "s") from its <pin-set>s.",
         "# Android checks the pins on top of the system's trust, and so do these rules (trust: system, the default).",
         "# Android matches a pin anywhere in the chain and has no word for a backup: a pin is imported at: any, unmarked,",
         "# unless a comment beside it (as pinproxy pin --export nsc writes) says at: and backup: true. Ready-to-paste rules (under rules:):"]
    }

    /// One rule's lines.
    static func render(_ rule: Imported) -> [String] {
        var lines: [String] = []
        if rule.ownAnchors {
            lines.append("# line \(rule.line): its <domain-config> names <trust-anchors>, which are not imported: if the server's chain needs that CA, add trust: \"ca-file:/path/to/ca.pem\"")
        }
        lines.append("- host: \"\(rule.pattern)\"")
        lines.append("  pins:")
        for pin in rule.pins {
            lines.append("    - { pin: \"\(pin.pin)\", at: \(pin.position.rawValue)\(pin.backup ? ", backup: true" : "") }")
        }
        if rule.pins.count < 2 {
            lines.append("    # add a backup: \(BackupRule.advice)")
        } else if !rule.pins.contains(where: \.backup), rule.pins.contains(where: { !$0.placed }) {
            // BackupRule: what check and the log will say of these pins, said where they are pasted.
            lines.append("    # The file does not say which of these is the server's key, which a CA's, nor which is the backup. If they are the")
            lines.append("    # server's key and its issuing CA's, every pin matches the one chain the server serves: no real backup, and")
            lines.append("    # pinproxy check and the log say \(RuntimeWarning.noRealBackup.code). Say at: leaf for the server's key and at: ca for a CA's")
            lines.append("    # (backup: true on the CA if you accept it as the backup), or add a spare key kept offline.")
        }
        if let expires = rule.expires {
            lines.append("  expires: \"\(expires)\"")
            lines.append("  on_expiry: report                 # Android stops checking the pins after its expiration date")
        }
        return lines
    }
}
