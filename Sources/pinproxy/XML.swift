import Foundation

/// A small strict XML reader, enough for Android's network_security_config.xml: elements,
/// attributes, text, comments, processing instructions (the `<?xml …?>` declaration), CDATA, the five
/// predefined entities and character references. A DTD (`<!DOCTYPE`) is refused, so no entity can be
/// defined (no expansion, no external fetch). FoundationXML is in this toolchain, but it would tie
/// the statically linked binary to libxml2 for one file format.
enum XML {
    /// What the reader meets, in document order. A self-closing element is a start and an end.
    enum Event {
        case start(name: String, attributes: [String: String], line: Int)
        case end
        /// Character data (text, CDATA, a reference), in pieces.
        case text(String)
        case comment(String)
    }

    struct Problem: Error, CustomStringConvertible {
        let line: Int
        let message: String
        var description: String { "line \(line): \(message)" }
    }

    /// Hands out a document's events one at a time, holding only the open elements' names: what a
    /// file of any number of elements needs. The text is read as UTF-8 (a malformed sequence as
    /// U+FFFD); everything the grammar looks for is ASCII, so it is matched byte by byte.
    struct Reader {
        private let bytes: [UInt8]
        private var i = 0
        private var line = 1
        /// The open elements: name and line.
        private var open: [(name: String, line: Int)] = []
        private enum Stage { case prolog, root, epilog, done }
        private var stage = Stage.prolog
        private var pendingEnd = false

        init(bytes: [UInt8]) { self.bytes = bytes }

        /// Elements nest at most this deep (a network_security_config needs five).
        static let maxDepth = 32

        mutating func next() throws(Problem) -> Event? {
            if pendingEnd {
                pendingEnd = false
                return end()
            }
            switch stage {
            case .prolog:
                try misc()
                guard starts("<") else { throw fail("no root element") }
                stage = .root
                return try startTag()
            case .epilog:
                try misc()
                guard i == bytes.count else { throw fail("content after the root element") }
                stage = .done
                return nil
            case .done:
                return nil
            case .root:
                break
            }
            // Bounded by the text: each turn moves past at least one byte or returns.
            while true {
                let (tag, at) = open[open.count - 1]
                guard i < bytes.count else { throw fail("<\(tag)> (line \(at)) is not closed") }
                if starts("</") {
                    advance(2)
                    let closing = try name()
                    spaces()
                    guard closing == tag, starts(">") else { throw fail("</\(closing)> closes <\(tag)> (line \(at))") }
                    advance()
                    return end()
                }
                if starts("<!--") {
                    let start = i + 4
                    try skip(past: "-->", what: "a comment")
                    return .comment(String(decoding: bytes[start..<(i - 3)], as: UTF8.self))
                }
                if starts("<![CDATA[") {
                    advance(9)
                    let start = i
                    while i < bytes.count, !starts("]]>") { advance() }
                    guard i < bytes.count else { throw fail("a CDATA section does not end") }
                    advance(3)
                    return .text(String(decoding: bytes[start..<(i - 3)], as: UTF8.self))
                }
                if starts("<?") { try skip(past: "?>", what: "a processing instruction"); continue }
                if starts("<!") { throw fail("a declaration inside <\(tag)> is not read") }
                if starts("<") { return try startTag() }
                if bytes[i] == ascii("&") { return .text(try reference()) }
                let start = i
                while i < bytes.count, bytes[i] != ascii("<"), bytes[i] != ascii("&") { advance() }
                return .text(String(decoding: bytes[start..<i], as: UTF8.self))
            }
        }

        private mutating func end() -> Event {
            open.removeLast()
            if open.isEmpty { stage = .epilog }
            return .end
        }

        private func fail(_ message: String) -> Problem { Problem(line: line, message: message) }

        private static func ascii(_ c: Unicode.Scalar) -> UInt8 { UInt8(c.value) }
        private func ascii(_ c: Unicode.Scalar) -> UInt8 { Self.ascii(c) }

        /// Whether the text at `i` is `s` (ASCII).
        private func starts(_ s: StaticString) -> Bool {
            let count = s.utf8CodeUnitCount
            guard i + count <= bytes.count else { return false }
            return s.withUTF8Buffer { pattern in (0..<count).allSatisfy { bytes[i + $0] == pattern[$0] } }
        }

        /// The scalar at `i` and how many bytes it takes (a malformed sequence: U+FFFD).
        private func scalar() -> (Unicode.Scalar, Int) {
            if bytes[i] < 0x80 { return (Unicode.Scalar(bytes[i]), 1) }
            var parser = Unicode.UTF8.ForwardParser()
            var rest = bytes[i...].makeIterator()
            switch parser.parseScalar(from: &rest) {
            case .valid(let encoded): return (Unicode.UTF8.decode(encoded), encoded.count)
            case .error(let length): return ("\u{FFFD}", length)
            case .emptyInput: return ("\u{FFFD}", 1)
            }
        }

        /// Past `n` scalars.
        private mutating func advance(_ n: Int = 1) {
            for _ in 0..<n where i < bytes.count {
                if bytes[i] == ascii("\n") { line += 1 }
                i += scalar().1
            }
        }

        private mutating func skip(past end: StaticString, what: String) throws(Problem) {
            while i < bytes.count, !starts(end) { advance() }
            guard i < bytes.count else { throw fail("\(what) does not end") }
            advance(end.utf8CodeUnitCount)
        }

        private mutating func spaces() {
            while i < bytes.count, bytes[i] == ascii(" ") || bytes[i] == ascii("\t") || bytes[i] == ascii("\r") || bytes[i] == ascii("\n") { advance() }
        }

        /// Comments, processing instructions and white space outside the root element.
        private mutating func misc() throws(Problem) {
            while true {
                spaces()
                if starts("<!--") { try skip(past: "-->", what: "a comment") }
                else if starts("<?") { try skip(past: "?>", what: "a processing instruction") }
                else if starts("<!DOCTYPE") || starts("<!ENTITY") { throw fail("a DTD (<!DOCTYPE …>) is not read") }
                else { return }
            }
        }

        private mutating func name() throws(Problem) -> String {
            let start = i
            while i < bytes.count {
                let c = scalar().0
                guard c.properties.isAlphabetic || ("0"..."9").contains(c) || ["-", "_", ":", "."].contains(c) else { break }
                advance()
            }
            guard i > start else { throw fail("a name was expected") }
            return String(decoding: bytes[start..<i], as: UTF8.self)
        }

        /// `<name attributes>` or `<name attributes/>`: i at `<`.
        private mutating func startTag() throws(Problem) -> Event {
            guard open.count < Self.maxDepth else { throw fail("elements nested deeper than \(Self.maxDepth)") }
            let at = line
            advance()  // <
            let tag = try name()
            var attributes: [String: String] = [:]
            while true {
                spaces()
                if starts("/>") {
                    advance(2)
                    pendingEnd = true
                    break
                }
                if starts(">") { advance(); break }
                let key = try name()
                spaces()
                guard starts("=") else { throw fail("attribute '\(key)' of <\(tag)> has no value") }
                advance()
                spaces()
                guard i < bytes.count, bytes[i] == ascii("\"") || bytes[i] == ascii("'") else { throw fail("attribute '\(key)' needs a quoted value") }
                let quote = bytes[i]
                advance()
                var value = ""
                while i < bytes.count, bytes[i] != quote {
                    if bytes[i] == ascii("<") { throw fail("'<' in the value of '\(key)'") }
                    if bytes[i] == ascii("&") {
                        value += try reference()
                    } else {
                        let start = i
                        while i < bytes.count, bytes[i] != quote, bytes[i] != ascii("<"), bytes[i] != ascii("&") { advance() }
                        value += String(decoding: bytes[start..<i], as: UTF8.self)
                    }
                }
                guard i < bytes.count else { throw fail("the value of '\(key)' does not end") }
                advance()
                guard attributes[key] == nil else { throw fail("attribute '\(key)' twice in <\(tag)>") }
                attributes[key] = value
            }
            open.append((tag, at))
            return .start(name: tag, attributes: attributes, line: at)
        }

        /// `&amp;` … or `&#…;`: i at `&`, left past `;`.
        private mutating func reference() throws(Problem) -> String {
            let start = i
            var scalars = 0
            while i < bytes.count, bytes[i] != ascii(";"), scalars < 12 { advance(); scalars += 1 }
            guard i < bytes.count, bytes[i] == ascii(";") else { throw fail("an '&' that starts no entity reference") }
            let body = String(decoding: bytes[(start + 1)..<i], as: UTF8.self)
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
