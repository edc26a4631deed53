import Foundation
import PinPolicy

/// A small strict XML reader, enough for Android's network_security_config.xml: elements,
/// attributes, text, comments, processing instructions (the `<?xml …?>` declaration), CDATA, the five
/// predefined entities and character references. A DTD (`<!DOCTYPE`) is refused, so no entity can be
/// defined (no expansion, no external fetch). FoundationXML is in this toolchain, but it would tie
/// the statically linked binary to libxml2 for one file format.
enum XML {
    struct Element {
        let name: String
        let attributes: [String: String]
        var children: [Element] = []
        var text = ""
        let line: Int
        /// The comments inside it, each with how many child elements came before it: what a
        /// writer said beside an element (pinproxy's export keeps a pin's `at:` there).
        var comments: [(afterChildren: Int, text: String)] = []
    }

    struct Problem: Error, CustomStringConvertible {
        let line: Int
        let message: String
        var description: String { "line \(line): \(message)" }
    }

    static func parse(_ text: String) throws(Problem) -> Element {
        var reader = Reader(scalars: Array(text.unicodeScalars))
        return try reader.document()
    }

    private struct Reader {
        let scalars: [Unicode.Scalar]
        var i = 0
        var line = 1

        init(scalars: [Unicode.Scalar]) { self.scalars = scalars }

        func fail(_ message: String) -> Problem { Problem(line: line, message: message) }

        func starts(_ s: String) -> Bool {
            let u = Array(s.unicodeScalars)
            return i + u.count <= scalars.count && Array(scalars[i..<(i + u.count)]) == u
        }

        mutating func advance(_ n: Int = 1) {
            for _ in 0..<n where i < scalars.count {
                if scalars[i] == "\n" { line += 1 }
                i += 1
            }
        }

        mutating func skip(past end: String, what: String) throws(Problem) {
            while i < scalars.count, !starts(end) { advance() }
            guard i < scalars.count else { throw fail("\(what) does not end") }
            advance(end.unicodeScalars.count)
        }

        mutating func spaces() {
            while i < scalars.count, [" ", "\t", "\r", "\n"].contains(scalars[i]) { advance() }
        }

        /// Comments, processing instructions and white space between elements.
        mutating func misc() throws(Problem) {
            while true {
                spaces()
                if starts("<!--") { try skip(past: "-->", what: "a comment") }
                else if starts("<?") { try skip(past: "?>", what: "a processing instruction") }
                else if starts("<!DOCTYPE") || starts("<!ENTITY") { throw fail("a DTD (<!DOCTYPE …>) is not read") }
                else { return }
            }
        }

        mutating func document() throws(Problem) -> Element {
            try misc()
            guard starts("<") else { throw fail("no root element") }
            let root = try element(depth: 1)
            try misc()
            guard i == scalars.count else { throw fail("content after the root element") }
            return root
        }

        mutating func name() throws(Problem) -> String {
            let start = i
            while i < scalars.count, scalars[i].properties.isAlphabetic || ("0"..."9").contains(scalars[i]) || ["-", "_", ":", "."].contains(scalars[i]) {
                advance()
            }
            guard i > start else { throw fail("a name was expected") }
            return String(String.UnicodeScalarView(scalars[start..<i]))
        }

        /// Elements nest at most this deep (a network_security_config needs five): recursion is bounded.
        static let maxDepth = 32

        mutating func element(depth: Int) throws(Problem) -> Element {
            guard depth <= Self.maxDepth else { throw fail("elements nested deeper than \(Self.maxDepth)") }
            let at = line
            advance()  // <
            let tag = try name()
            var attributes: [String: String] = [:]
            while true {
                spaces()
                if starts("/>") {
                    advance(2)
                    return Element(name: tag, attributes: attributes, line: at)
                }
                if starts(">") { advance(); break }
                let key = try name()
                spaces()
                guard starts("=") else { throw fail("attribute '\(key)' of <\(tag)> has no value") }
                advance()
                spaces()
                guard i < scalars.count, scalars[i] == "\"" || scalars[i] == "'" else { throw fail("attribute '\(key)' needs a quoted value") }
                let quote = scalars[i]
                advance()
                var value = ""
                while i < scalars.count, scalars[i] != quote {
                    if scalars[i] == "<" { throw fail("'<' in the value of '\(key)'") }
                    if scalars[i] == "&" {
                        value += try reference()
                    } else {
                        value.unicodeScalars.append(scalars[i])
                        advance()
                    }
                }
                guard i < scalars.count else { throw fail("the value of '\(key)' does not end") }
                advance()
                guard attributes[key] == nil else { throw fail("attribute '\(key)' twice in <\(tag)>") }
                attributes[key] = value
            }
            var element = Element(name: tag, attributes: attributes, line: at)
            while true {
                guard i < scalars.count else { throw fail("<\(tag)> (line \(at)) is not closed") }
                if starts("</") {
                    advance(2)
                    let closing = try name()
                    spaces()
                    guard closing == tag, starts(">") else { throw fail("</\(closing)> closes <\(tag)> (line \(at))") }
                    advance()
                    return element
                }
                if starts("<!--") {
                    let start = i + 4
                    try skip(past: "-->", what: "a comment")
                    element.comments.append((element.children.count, String(String.UnicodeScalarView(scalars[start..<(i - 3)]))))
                    continue
                }
                if starts("<![CDATA[") {
                    advance(9)
                    while i < scalars.count, !starts("]]>") { element.text.unicodeScalars.append(scalars[i]); advance() }
                    guard i < scalars.count else { throw fail("a CDATA section does not end") }
                    advance(3)
                    continue
                }
                if starts("<?") { try skip(past: "?>", what: "a processing instruction"); continue }
                if starts("<!") { throw fail("a declaration inside <\(tag)> is not read") }
                if starts("<") { element.children.append(try self.element(depth: depth + 1)); continue }
                if scalars[i] == "&" { element.text += try reference(); continue }
                element.text.unicodeScalars.append(scalars[i])
                advance()
            }
        }

        /// `&amp;` … or `&#…;`: i at `&`, left past `;`.
        mutating func reference() throws(Problem) -> String {
            let start = i
            while i < scalars.count, scalars[i] != ";", i - start < 12 { advance() }
            guard i < scalars.count, scalars[i] == ";" else { throw fail("an '&' that starts no entity reference") }
            let body = String(String.UnicodeScalarView(scalars[(start + 1)..<i]))
            advance()
            switch body {
            case "amp": return "&"
            case "lt": return "<"
            case "gt": return ">"
            case "quot": return "\""
            case "apos": return "'"
            default:
                let number: UInt32?
                if body.hasPrefix("#x") { number = UInt32(body.dropFirst(2), radix: 16) }
                else if body.hasPrefix("#") { number = UInt32(body.dropFirst(), radix: 10) }
                else { throw fail("unknown entity '&\(body);' (no DTD defines any)") }
                guard let number, let scalar = Unicode.Scalar(number) else { throw fail("a bad character reference '&\(body);'") }
                return String(scalar)
            }
        }
    }
}

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
    struct Imported {
        let pattern: String
        let pins: [ImportedPin]
        let expires: String?
        let line: Int
        /// The domain-config (or a parent) names its own trust anchors, which are not imported.
        let ownAnchors: Bool
    }

    /// A pin and what the comment beside it kept (`at: any`, unmarked, without one).
    struct ImportedPin: Equatable {
        let pin: Pin
        var position: PinPosition = .any
        var backup = false
        /// A comment beside it said where it sits.
        var placed = false
    }

    struct PinSet {
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

    static func rules(_ text: String) throws(XML.Problem) -> [Imported] {
        let root = try XML.parse(text)
        guard root.name == "network-security-config" else {
            throw XML.Problem(line: root.line, message: "the root element is <\(root.name)>, not <network-security-config>")
        }
        var out: [Imported] = []
        for child in root.children where child.name == "domain-config" {
            try domainConfig(child, inherited: nil, anchors: false, into: &out)
        }
        return out
    }

    private static func domainConfig(_ element: XML.Element, inherited: PinSet?, anchors inheritedAnchors: Bool,
                                     into out: inout [Imported]) throws(XML.Problem) {
        try only(element, attributes: ["cleartextTrafficPermitted"])
        let anchors = inheritedAnchors || element.children.contains { $0.name == "trust-anchors" }
        var own: PinSet?
        for child in element.children where child.name == "pin-set" {
            guard own == nil else { throw XML.Problem(line: child.line, message: "a second <pin-set> in one <domain-config>") }
            own = try pinSet(child)
        }
        let set = own ?? inherited
        for domain in element.children where domain.name == "domain" {
            try only(domain, attributes: ["includeSubdomains"])
            let name = domain.text.trimmingCharacters(in: .whitespacesAndNewlines)
            let subdomains: Bool
            switch domain.attributes["includeSubdomains"] ?? "false" {
            case "true": subdomains = true
            case "false": subdomains = false
            case let other: throw XML.Problem(line: domain.line, message: "includeSubdomains must be true or false, not '\(other)'")
            }
            let pattern = subdomains ? "**." + name : name
            if case .failure(let problem) = HostPattern.parse(pattern) {
                throw XML.Problem(line: domain.line, message: "<domain>\(name)</domain>: \(problem.message)")
            }
            guard let set, !set.pins.isEmpty else { continue }  // a domain without pins: nothing to pin
            out.append(Imported(pattern: pattern, pins: set.pins, expires: set.expiration, line: domain.line, ownAnchors: anchors))
        }
        for nested in element.children where nested.name == "domain-config" {
            try domainConfig(nested, inherited: set, anchors: anchors, into: &out)
        }
    }

    private static func pinSet(_ element: XML.Element) throws(XML.Problem) -> PinSet {
        try only(element, attributes: ["expiration"])
        var expiration: String?
        if let date = element.attributes["expiration"] {
            guard let parsed = RFC3339.parse(date + "T00:00:00Z") else {
                throw XML.Problem(line: element.line, message: "expiration must be a date yyyy-MM-dd, not '\(date)'")
            }
            expiration = RFC3339.format(parsed)
        }
        var pins: [ImportedPin] = []
        for (index, pin) in element.children.enumerated() {
            guard pin.name == "pin" else { throw XML.Problem(line: pin.line, message: "<\(pin.name)> in a <pin-set>; only <pin> belongs there") }
            try only(pin, attributes: ["digest"])
            guard pin.attributes["digest"] == "SHA-256" else {
                throw XML.Problem(line: pin.line, message: "a <pin> needs digest=\"SHA-256\" (the only digest Android accepts), not '\(pin.attributes["digest"] ?? "")'")
            }
            let text = pin.text.filter { !$0.isWhitespace }
            switch Pin.parse("spki-sha256:" + text) {
            case .success(let parsed):
                guard !pins.contains(where: { $0.pin == parsed }) else { continue }
                // The comment right after this pin, before the next one, when it is pinproxy's.
                let beside = element.comments.filter { $0.afterChildren == index + 1 }
                pins.append(beside.lazy.compactMap { placed(parsed, by: $0.text) }.first ?? ImportedPin(pin: parsed))
            case .failure(let problem): throw XML.Problem(line: pin.line, message: problem.message)
            }
        }
        return PinSet(pins: pins, expiration: expiration)
    }

    private static func only(_ element: XML.Element, attributes allowed: Set<String>) throws(XML.Problem) {
        for name in element.attributes.keys.sorted() where !allowed.contains(name) {
            throw XML.Problem(line: element.line, message: "unknown attribute '\(name)' of <\(element.name)>")
        }
    }

    /// The rules, ready to paste under `rules:`.
    static func render(_ rules: [Imported], file: String) -> String {
        var lines = ["# pinproxy pin --import nsc \(file): \(rules.count) rule\(rules.count == 1 ? "" : "s") from its <pin-set>s.",
                     "# Android checks the pins on top of the system's trust, and so do these rules (trust: system, the default).",
                     "# Android matches a pin anywhere in the chain and has no word for a backup: a pin is imported at: any, unmarked,",
                     "# unless a comment beside it (as pinproxy pin --export nsc writes) says at: and backup: true. Ready-to-paste rules (under rules:):"]
        for rule in rules {
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
                lines.append("    # pinproxy check and the log say no_real_backup. Say at: leaf for the server's key and at: ca for a CA's")
                lines.append("    # (backup: true on the CA if you accept it as the backup), or add a spare key kept offline.")
            }
            if let expires = rule.expires {
                lines.append("  expires: \"\(expires)\"")
                lines.append("  on_expiry: report                 # Android stops checking the pins after its expiration date")
            }
        }
        return lines.joined(separator: "\n")
    }
}
