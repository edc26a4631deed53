import Foundation

/// How deep a YAML text nests its collections, found by a scan of the text before Yams composes it.
/// Yams 6.2.2 compares mapping keys recursively when it checks for duplicates, which costs time
/// exponential in the nesting; a policy needs about 5 levels, so anything deeper than `limit` is
/// refused here, before Yams sees it.
///
/// The scan counts what YAML nests: flow brackets (`[`, `{`) outside quotes and comments, block
/// indentation levels, and the `- ` / `? ` markers that open a collection on a line. A level whose
/// first line starts with `- ` is itself the sequence; a `- ` line at the indentation of a mapping
/// opens a sequence inside it. Block scalars (`|`, `>`) and quoted text are skipped. For block and
/// flow styles this is the nesting depth; for exotic text (a multi-line plain scalar indented
/// deeper) it can only count more, never less.
struct NestingScan {
    static let limit = 16

    /// The first line (1-based) and column at which the nesting exceeds `limit`, if any.
    static func firstTooDeep(_ text: String) -> (line: Int, column: Int)? {
        // Each block indentation level, and what its first line made it: a sequence (`- `), a
        // mapping, or neither (a flow collection or a scalar standing alone, counted by its brackets).
        enum Kind { case sequence, mapping, other }
        var levels: [(indent: Int, kind: Kind)] = []
        var blockDepth: Int { levels.count(where: { $0.kind != .other }) }
        var flowDepth = 0
        var quote: Character?               // inside a quoted scalar that may span lines
        var blockScalarParent: Int?         // indentation of the line that opened a block scalar
        var lineNumber = 0
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            lineNumber += 1
            let chars = Array(line)
            let indent = chars.prefix { $0 == " " }.count
            let blank = chars.dropFirst(indent).allSatisfy { $0 == " " || $0 == "\t" }
            if let parent = blockScalarParent {
                if blank || indent > parent { continue }
                blockScalarParent = nil
            }
            var position = indent
            var depth = blockDepth          // the block collections around this line's content
            if quote == nil && flowDepth == 0 {
                if blank || chars[indent] == "#" { continue }
                if indent == 0 && (chars.starts(with: Array("---")) || chars.starts(with: Array("...")) || chars[0] == "%") { levels = []; continue }
                while let last = levels.last, last.indent > indent { levels.removeLast() }
                var markers = 0
                while position + 1 < chars.count, chars[position] == "-" || chars[position] == "?", chars[position + 1] == " " {
                    markers += 1
                    position += 2
                    while position < chars.count, chars[position] == " " { position += 1 }
                }
                if levels.last?.indent != indent {
                    let standsAlone = position < chars.count && (chars[position] == "[" || chars[position] == "{" || !isMappingEntry(chars[position...]))
                    levels.append((indent, markers > 0 ? .sequence : standsAlone ? .other : .mapping))
                    depth = blockDepth + max(markers - 1, 0)
                } else {
                    depth = blockDepth + (levels.last!.kind == .sequence ? max(markers - 1, 0) : markers)
                }
                if depth > limit { return (lineNumber, indent + 1) }
            }
            var previous: Character = " "
            while position < chars.count {
                let c = chars[position]
                if let open = quote {
                    if c == open {
                        if open == "'", position + 1 < chars.count, chars[position + 1] == "'" { position += 1 } else { quote = nil }
                    } else if open == "\"", c == "\\" {
                        position += 1
                    }
                } else if c == "#" && (previous == " " || previous == "\t") {
                    break
                } else if c == "\"" || c == "'" {
                    if previous == " " || previous == "\t" || "[{,:-?".contains(previous) || position == indent { quote = c }
                } else if c == "[" || c == "{" {
                    flowDepth += 1
                    if depth + flowDepth > limit { return (lineNumber, position + 1) }
                } else if c == "]" || c == "}" {
                    flowDepth = max(flowDepth - 1, 0)
                }
                previous = c
                position += 1
            }
            // A block scalar header (`key: |`, `- >-`) ends the line: what follows, indented more, is text.
            // Only a line with a `|` or `>` can have one: the others (nearly all) are not made into a string.
            let content = chars[..<min(position, chars.count)]
            if quote == nil, flowDepth == 0, content.contains(where: { $0 == "|" || $0 == ">" }) {
                let content = String(content).trimmingCharacters(in: .whitespaces)
                if let last = content.split(separator: " ").last, let first = last.first, first == "|" || first == ">",
                   last.dropFirst().allSatisfy({ $0 == "+" || $0 == "-" || $0.isNumber }) {
                    blockScalarParent = indent
                }
            }
        }
        return nil
    }

    /// Whether a line's content (after any `- ` markers) is `key: …` or `key:`, roughly: a colon
    /// followed by a space or the end, before any comment. A quoted key counts too. Saying yes
    /// when unsure only counts a level more.
    private static func isMappingEntry(_ content: ArraySlice<Character>) -> Bool {
        var previous: Character = " "
        var index = content.startIndex
        while index < content.endIndex {
            let c = content[index]
            if c == "#" && previous == " " { return false }
            if c == ":" && (index + 1 == content.endIndex || content[index + 1] == " " || content[index + 1] == "\t") { return true }
            previous = c
            index += 1
        }
        return false
    }
}
