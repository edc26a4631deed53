import Foundation
import Yams

/// The shape of values: mappings checked against a section's keys, scalars, lists, durations, paths.
extension PolicyReader {
    /// Yams resolves aliases silently; an aliased node keeps the position of its anchor, which lies
    /// before the place it is used. So any node that starts before its parent key (or previous
    /// sibling) was an alias; the error names the key (or list) that used it. Anchors without
    /// aliases do no harm and pass.
    func rejectAliases(_ node: Node, notBefore floor: Mark?, usedAt site: Node? = nil) -> Bool {
        if let floor, let mark = node.mark, (mark.line, mark.column) < (floor.line, floor.column) {
            let key = (site?.scalar?.string).map { " (the value of '\($0)')" } ?? ""
            fail(site ?? node, "YAML aliases (*name) are not allowed in a policy file\(key); write the value out")
            return false
        }
        switch node {
        case .mapping(let mapping):
            var previous = node.mark
            for (key, value) in mapping {
                if key.scalar?.string == "<<" {
                    fail(key, "YAML merge keys (<<) are not allowed in a policy file; write the keys out")
                    return false
                }
                guard rejectAliases(key, notBefore: previous, usedAt: node),
                      rejectAliases(value, notBefore: key.mark, usedAt: key) else { return false }
                previous = value.mark
            }
        case .sequence(let sequence):
            var previous = node.mark
            for item in sequence {
                guard rejectAliases(item, notBefore: previous, usedAt: node) else { return false }
                previous = item.mark
            }
        default:
            break
        }
        return true
    }

    func fields(_ node: Node, _ what: String, allowed section: PolicySection) -> Fields? {
        let allowed = section.keys
        guard case .mapping(let mapping) = node else {
            fail(node, "\(what) must be a mapping (key: value)")
            return nil
        }
        var fields = Fields(node: node)
        for (key, value) in mapping {
            guard let name = key.scalar?.string else {
                fail(key, "keys in \(what) must be plain names")
                continue
            }
            if name.hasPrefix("\t") {  // a tab that the YAML parser took into a key: the same cause, the same words
                fail(key, "tabs are not allowed for indentation in YAML; indent with spaces")
                continue
            }
            guard allowed.contains(name) else {
                fail(key, "unknown key '\(name)' in \(what); known keys: \(allowed.joined(separator: ", "))")
                continue
            }
            fields.set(name, value: value)
        }
        return fields
    }

    func isNull(_ node: Node) -> Bool {
        guard case .scalar(let s) = node, s.style == .plain else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(s.string)
    }

    func string(_ node: Node, _ what: String) -> String? {
        guard case .scalar(let s) = node else {
            fail(node, "\(what) must be a single value, not a list or mapping")
            return nil
        }
        if isNull(node) {
            fail(node, "\(what) needs a value")
            return nil
        }
        return s.string
    }

    func choice<T: RawRepresentable>(_ node: Node, _ what: String, _: T.Type, options: [T]) -> T? where T.RawValue == String {
        guard let text = string(node, what) else { return nil }
        guard let value = T(rawValue: text), options.contains(where: { $0.rawValue == text }) else {
            fail(node, "\(what) must be one of \(options.map(\.rawValue).joined(separator: ", ")), not '\(text)'")
            return nil
        }
        return value
    }

    func integer(_ node: Node, _ what: String, in range: ClosedRange<Int>) -> Int? {
        guard let text = string(node, what) else { return nil }
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }), !(text.count > 1 && text.hasPrefix("0")),
              let value = Int(text), range.contains(value) else {
            fail(node, "\(what) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
            return nil
        }
        return value
    }

    /// `500ms`, `10s`, `5m`, `1h`, `70d`, or `0`.
    func duration(_ node: Node, _ what: String) -> Double? {
        guard let text = string(node, what) else { return nil }
        if text == "0" { return 0 }
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600), ("d", 86400)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            let digits = text.dropLast(suffix.count)
            if !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(digits), n <= 1_000_000 {
                return Double(n) * scale
            }
        }
        fail(node, "\(what) must be a duration such as 500ms, 10s, 5m, 1h or 70d, not '\(text)'")
        return nil
    }

    func boolean(_ node: Node, _ what: String) -> Bool? {
        guard let text = string(node, what) else { return nil }
        switch text {
        case "true": return true
        case "false": return false
        default:
            fail(node, "\(what) must be true or false, not '\(text)'")
            return nil
        }
    }

    func date(_ node: Node, _ what: String) -> Date? {
        guard let text = string(node, what) else { return nil }
        guard let date = RFC3339.parse(text) else {
            fail(node, "\(what) must be an RFC 3339 time with a zone, such as \"2027-06-30T00:00:00Z\", not '\(text)'")
            return nil
        }
        return date
    }

    func list(_ node: Node, _ what: String, example: String) -> [Node]? {
        guard case .sequence(let sequence) = node else {
            fail(node, "\(what) must be a list, e.g. \(example)")
            return nil
        }
        return Array(sequence)
    }

    func ports(_ node: Node, _ what: String) -> [UInt16]? {
        guard let items = list(node, what, example: "[443, 8443]") else { return nil }
        var ports: [UInt16] = []
        for item in items {
            guard let n = integer(item, "a port in \(what)", in: 1...65535) else { continue }
            if ports.contains(UInt16(n)) { fail(item, "port \(n) is listed twice in \(what)") }
            ports.append(UInt16(n))
        }
        if items.isEmpty { fail(node, "\(what) must not be empty") }
        return ports
    }

    /// A `file:` path, relative to the policy file's directory. `.` and empty components are dropped
    /// (they only make messages odd: `./../pki/x.pem`); `..` is kept, since a symlink makes it mean
    /// more than the text says.
    func path(_ text: String) -> String {
        guard !text.hasPrefix("/") else { return text }
        let joined = baseDirectory + "/" + text
        let parts = joined.split(separator: "/").filter { $0 != "." }
        return (joined.hasPrefix("/") ? "/" : "") + (parts.isEmpty ? "." : parts.joined(separator: "/"))
    }
}
