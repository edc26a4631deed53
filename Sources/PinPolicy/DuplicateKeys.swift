import Yams

/// Composes YAML the way `Yams.compose` does, but reports every duplicate key at the duplicate
/// (not at the first occurrence, where Yams points) and goes on, so that the file's other errors
/// are reported in the same run.
///
/// Yams refuses a mapping with a duplicate key as a whole, naming the first occurrence. Here the
/// duplicate is found in the text (the next key at the same indentation with the same spelling,
/// or on the same line in a flow mapping), reported, and renamed to a placeholder, and the text
/// composed again; the reader then checks the rest. Errors that name a placeholder (an unknown key
/// in a rule, say) are about the renaming, not the file, and are left out.
struct DuplicateKeys {
    let file: String
    private(set) var text: String
    private(set) var errors: [PolicyError] = []
    /// A file has at most this many duplicates reported; beyond it, the last one stops the load.
    static let maxReported = 100

    init(yaml: String, file: String) {
        self.text = yaml
        self.file = file
    }

    /// Composes as `Yams.compose` with its default resolver does, without resolving most keys' tags.
    ///
    /// Yams tells a mapping's keys apart by text and resolved tag (`1` and `"1"` are two keys), and
    /// the default resolver tries a regular expression per rule on every plain key: a quarter of the
    /// load of 50,000 rules. With no rules (`.basic`) every plain scalar is a string, and two keys
    /// are one exactly as with the default rules except where a key's tag decides: `1` and `"1"`
    /// become one key (Yams refuses the mapping) and `1` and `!!int 1` two. So the text is composed
    /// again with the default rules when the first composition fails or a key has a tag of its own
    /// or is not a scalar; a policy has neither, and errors cost a second composition.
    static func composeAsDefault(_ text: String) throws -> Node? {
        if let root = try? Yams.compose(yaml: text, .basic), !hasKeyThatNeedsItsTag(root) { return root }
        return try Yams.compose(yaml: text)
    }

    /// Whether a mapping in `node` (at any depth; the nesting scan bounds it) has a key that is not
    /// a plain string scalar.
    private static func hasKeyThatNeedsItsTag(_ node: Node) -> Bool {
        switch node {
        case .mapping(let mapping):
            return mapping.contains { key, value in
                key.scalar == nil || Resolver.basic.resolveTag(of: key) != .str || hasKeyThatNeedsItsTag(value)
            }
        case .sequence(let sequence):
            return sequence.contains(where: hasKeyThatNeedsItsTag)
        case .scalar, .alias:
            return false
        }
    }

    static func placeholder(_ n: Int) -> String { "pinproxy_duplicate_key_\(n)" }

    func mentionsPlaceholder(_ message: String) -> Bool { message.contains("pinproxy_duplicate_key_") }

    mutating func compose() throws -> Node? {
        while true {
            do {
                return try Self.composeAsDefault(text)
            } catch YamlError.duplicatedKeysInMapping(let names, let context) {
                guard errors.count < Self.maxReported, let name = names.first,
                      let duplicate = Self.locate(after: context.mark, in: lines) else { throw YamlError.duplicatedKeysInMapping(duplicates: names, context: context) }
                errors.append(PolicyError(file: file, line: duplicate.line, column: duplicate.column,
                                          message: Printable.oneLine("duplicate key '\(name)': each key may appear once in a mapping (first at line \(context.mark.line))")))
                rename(duplicate, to: Self.placeholder(errors.count))
            }
        }
    }

    private var lines: [Substring] { text.split(separator: "\n", omittingEmptySubsequences: false) }

    /// A key's place and spelling: 1-based line and column, and the key as written (quotes included).
    struct KeyPlace {
        let line: Int
        let column: Int
        let spelling: String
    }

    /// The next occurrence of the key at `first` in the same mapping.
    static func locate(after first: Mark, in lines: [Substring]) -> KeyPlace? {
        guard first.line >= 1, first.line <= lines.count else { return nil }
        let firstLine = Array(lines[first.line - 1])
        let start = first.column - 1
        guard start >= 0, start < firstLine.count, let colon = keyEnd(firstLine, from: start) else { return nil }
        let spelling = String(firstLine[start..<colon]).trimmingTrailingSpaces
        // A flow mapping on one line: `{ pin: a, pin: b }`.
        if let column = occurrence(of: spelling, in: firstLine, from: colon) {
            return KeyPlace(line: first.line, column: column + 1, spelling: spelling)
        }
        // A block mapping: the following lines at the key's indentation, until one indented less.
        for index in first.line..<lines.count {
            let line = Array(lines[index])
            let indent = line.prefix { $0 == " " }.count
            let rest = line.dropFirst(indent)
            if rest.isEmpty || rest.first == "#" { continue }
            if indent < start { return nil }
            if indent == start, rest.starts(with: spelling), let end = keyEnd(line, from: start),
               String(line[start..<end]).trimmingTrailingSpaces == spelling {
                return KeyPlace(line: index + 1, column: start + 1, spelling: spelling)
            }
        }
        return nil
    }

    /// Where a key that starts at `start` ends: the `:` that follows it (outside quotes).
    private static func keyEnd(_ line: [Character], from start: Int) -> Int? {
        var quote: Character?
        var index = start
        while index < line.count {
            let c = line[index]
            if let open = quote {
                if c == open { quote = nil }
            } else if c == "\"" || c == "'" {
                quote = c
            } else if c == ":" {
                return index
            } else if c == "," || c == "}" || c == "#" {
                return nil
            }
            index += 1
        }
        return nil
    }

    /// `spelling` as a key later on a flow-mapping line: after `{` or `,` and spaces, followed by `:`.
    private static func occurrence(of spelling: String, in line: [Character], from index: Int) -> Int? {
        let key = Array(spelling)
        var i = index
        while i < line.count {
            if line[i] == "," || line[i] == "{" {
                var j = i + 1
                while j < line.count, line[j] == " " { j += 1 }
                if Array(line[j..<min(line.count, j + key.count)]) == key, let end = keyEnd(line, from: j),
                   String(line[j..<end]).trimmingTrailingSpaces == spelling {
                    return j
                }
            }
            i += 1
        }
        return nil
    }

    private mutating func rename(_ place: KeyPlace, to placeholder: String) {
        var all = lines.map(String.init)
        var line = Array(all[place.line - 1])
        line.replaceSubrange((place.column - 1)..<(place.column - 1 + place.spelling.count), with: Array(placeholder))
        all[place.line - 1] = String(line)
        text = all.joined(separator: "\n")
    }
}

extension String {
    var trimmingTrailingSpaces: String {
        var s = self
        while s.last == " " { s.removeLast() }
        return s
    }
}
