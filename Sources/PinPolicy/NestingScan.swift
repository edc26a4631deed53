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
    /// The text is scanned by UTF-8 bytes (everything the scan looks for is ASCII); a column is
    /// counted in characters, as Yams counts it, only when it is reported.
    static func firstTooDeep(_ text: String) -> (line: Int, column: Int)? {
        // Each block indentation level, and what its first line made it: a sequence (`- `), a
        // mapping, or neither (a flow collection or a scalar standing alone, counted by its brackets).
        enum Kind { case sequence, mapping, other }
        var levels: [(indent: Int, kind: Kind)] = []
        var blockDepth: Int { levels.count(where: { $0.kind != .other }) }
        var flowDepth = 0
        var quote: UInt8?                   // inside a quoted scalar that may span lines
        var blockScalarParent: Int?         // indentation of the line that opened a block scalar
        var lineNumber = 0
        let bytes = Array(text.utf8)
        var lineStart = 0
        while lineStart <= bytes.count {
            // The line: up to `\n`, `\r\n` or `\r`.
            var lineEnd = lineStart
            while lineEnd < bytes.count, bytes[lineEnd] != 0x0a, bytes[lineEnd] != 0x0d { lineEnd += 1 }
            let next = lineEnd + (lineEnd + 1 < bytes.count && bytes[lineEnd] == 0x0d && bytes[lineEnd + 1] == 0x0a ? 2 : 1)
            defer { lineStart = next }
            lineNumber += 1
            let chars = bytes[lineStart..<lineEnd]
            func at(_ i: Int) -> UInt8 { chars[lineStart + i] }
            let count = chars.count
            func column(_ i: Int) -> Int { String(decoding: chars.prefix(i), as: UTF8.self).count + 1 }
            let indent = chars.prefix { $0 == space }.count
            let blank = chars.dropFirst(indent).allSatisfy { $0 == space || $0 == tab }
            if let parent = blockScalarParent {
                if blank || indent > parent { continue }
                blockScalarParent = nil
            }
            var position = indent
            var depth = blockDepth          // the block collections around this line's content
            if quote == nil && flowDepth == 0 {
                if blank || at(indent) == ascii("#") { continue }
                if indent == 0 && (chars.starts(with: Array("---".utf8)) || chars.starts(with: Array("...".utf8)) || at(0) == ascii("%")) { levels = []; continue }
                while let last = levels.last, last.indent > indent { levels.removeLast() }
                var markers = 0
                while position + 1 < count, at(position) == ascii("-") || at(position) == ascii("?"), at(position + 1) == space {
                    markers += 1
                    position += 2
                    while position < count, at(position) == space { position += 1 }
                }
                if levels.last?.indent != indent {
                    let standsAlone = position < count && (at(position) == ascii("[") || at(position) == ascii("{") || !isMappingEntry(chars.dropFirst(position)))
                    levels.append((indent, markers > 0 ? .sequence : standsAlone ? .other : .mapping))
                    depth = blockDepth + max(markers - 1, 0)
                } else {
                    depth = blockDepth + (levels.last!.kind == .sequence ? max(markers - 1, 0) : markers)
                }
                if depth > limit { return (lineNumber, indent + 1) }
            }
            var previous = space
            while position < count {
                let c = at(position)
                if let open = quote {
                    if c == open {
                        if open == ascii("'"), position + 1 < count, at(position + 1) == ascii("'") { position += 1 } else { quote = nil }
                    } else if open == ascii("\""), c == ascii("\\") {
                        position += 1
                    }
                } else if c == ascii("#") && (previous == space || previous == tab) {
                    break
                } else if c == ascii("\"") || c == ascii("'") {
                    if previous == space || previous == tab || "[{,:-?".utf8.contains(previous) || position == indent { quote = c }
                } else if c == ascii("[") || c == ascii("{") {
                    flowDepth += 1
                    if depth + flowDepth > limit { return (lineNumber, column(position)) }
                } else if c == ascii("]") || c == ascii("}") {
                    flowDepth = max(flowDepth - 1, 0)
                }
                previous = c
                position += 1
            }
            // A block scalar header (`key: |`, `- >-`) ends the line: what follows, indented more, is text.
            // Only a line with a `|` or `>` can have one: the others (nearly all) are not made into a string.
            let content = chars.prefix(min(position, count))
            if quote == nil, flowDepth == 0, content.contains(where: { $0 == ascii("|") || $0 == ascii(">") }) {
                let content = String(decoding: content, as: UTF8.self).trimmingCharacters(in: .whitespaces)
                if let last = content.split(separator: " ").last, let first = last.first, first == "|" || first == ">",
                   last.dropFirst().allSatisfy({ $0 == "+" || $0 == "-" || $0.isNumber }) {
                    blockScalarParent = indent
                }
            }
        }
        return nil
    }

    private static let space = ascii(" ")
    private static let tab = ascii("\t")
    private static func ascii(_ c: Unicode.Scalar) -> UInt8 { UInt8(c.value) }

    /// Whether a line's content (after any `- ` markers) is `key: …` or `key:`, roughly: a colon
    /// followed by a space or the end, before any comment. A quoted key counts too. Saying yes
    /// when unsure only counts a level more.
    private static func isMappingEntry(_ content: ArraySlice<UInt8>) -> Bool {
        var previous = space
        var index = content.startIndex
        while index < content.endIndex {
            let c = content[index]
            if c == ascii("#") && previous == space { return false }
            if c == ascii(":") && (index + 1 == content.endIndex || content[index + 1] == space || content[index + 1] == tab) { return true }
            previous = c
            index += 1
        }
        return false
    }
}
