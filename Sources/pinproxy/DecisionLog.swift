import Foundation

/// pinproxy's own log, read back: every record as the flat keys logfmt writes (`event`, `host`,
/// `chain.0.spki`), whichever form it was kept in:
///
/// - logfmt lines (`--log-format text`) and JSON lines (`--log-format json`);
/// - `journalctl -o json`: one object per entry, pinproxy's keys as `PINPROXY_*` fields;
/// - `journalctl -o export`: entries of `KEY=value` lines separated by a blank line, a value with a
///   newline as `KEY`, a 64-bit little-endian length, the bytes.
///
/// A journal entry without `PINPROXY_EVENT` (pinproxy's stderr as the journal's plain stream) is read
/// from its `MESSAGE`, a line of either form. Lines that are none of these are skipped and counted.
enum DecisionLog {
    struct Contents {
        var records: [[String: String]] = []
        /// Lines or entries that were not a pinproxy record.
        var skipped = 0
    }

    static func read(_ bytes: [UInt8]) -> Contents {
        let firstLine = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true).first.map { String(decoding: $0, as: UTF8.self) } ?? ""
        if !firstLine.hasPrefix("{"), !firstLine.hasPrefix("ts="), isExportField(firstLine) { return readExport(bytes) }
        var contents = Contents()
        for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") where !line.allSatisfy(\.isWhitespace) {
            if let record = record(line: String(line)) { contents.records.append(record) } else { contents.skipped += 1 }
        }
        return contents
    }

    /// One line: pinproxy's logfmt or JSON, or a `journalctl -o json` entry.
    static func record(line: String) -> [String: String]? {
        let text = line.trimmingCharacters(in: .whitespaces)
        if text.hasPrefix("{") {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any] else { return nil }
            if object["PINPROXY_EVENT"] != nil || object["MESSAGE"] != nil || object["__CURSOR"] != nil {
                return journal(object.compactMapValues(journalValue))
            }
            return flatten(object)
        }
        return logfmt(text)
    }

    // MARK: logfmt

    /// `ts=… level=info event=tunnel_allowed host=api.example.com subject="CN=a,O=b"`: values plain,
    /// or JSON string literals (what `LineEncoder` writes for anything else).
    static func logfmt(_ line: String) -> [String: String]? {
        var fields: [String: String] = [:]
        let scalars = Array(line.unicodeScalars)
        var i = 0
        while i < scalars.count {
            while i < scalars.count, scalars[i] == " " { i += 1 }
            guard i < scalars.count else { break }
            let keyStart = i
            while i < scalars.count, scalars[i] != "=", scalars[i] != " " { i += 1 }
            guard i < scalars.count, scalars[i] == "=", i > keyStart else { return nil }
            let key = String(String.UnicodeScalarView(scalars[keyStart..<i]))
            i += 1
            if i < scalars.count, scalars[i] == "\"" {
                // A JSON string literal: to its closing quote, skipping escaped characters.
                let start = i
                i += 1
                while i < scalars.count, scalars[i] != "\"" { i += scalars[i] == "\\" ? 2 : 1 }
                guard i < scalars.count else { return nil }
                i += 1
                let literal = String(String.UnicodeScalarView(scalars[start..<i]))
                guard let value = (try? JSONSerialization.jsonObject(with: Data(literal.utf8), options: .fragmentsAllowed)) as? String else { return nil }
                fields[key] = value
            } else {
                let start = i
                while i < scalars.count, scalars[i] != " " { i += 1 }
                fields[key] = String(String.UnicodeScalarView(scalars[start..<i]))
            }
        }
        return fields["event"] == nil ? nil : fields
    }

    // MARK: JSON

    /// pinproxy's JSON line: arrays of objects (`chain`, `expected`) flattened as logfmt writes them.
    static func flatten(_ object: [String: Any]) -> [String: String]? {
        var fields: [String: String] = [:]
        for (key, value) in object {
            if let list = value as? [[String: Any]] {
                for (index, item) in list.enumerated() {
                    for (field, inner) in item { fields["\(key).\(index).\(field)"] = scalar(inner) }
                }
            } else {
                fields[key] = scalar(value)
            }
        }
        return fields["event"] == nil ? nil : fields
    }

    private static func scalar(_ value: Any) -> String {
        if let s = value as? String { return s }
        if let n = value as? NSNumber {
            // JSONSerialization's booleans are NSNumbers too, of the C type `char` ("c").
            if String(cString: n.objCType) == "c" { return n.boolValue ? "true" : "false" }
            return n.stringValue
        }
        return "\(value)"
    }

    // MARK: the journal

    /// A `journalctl -o json` value: a string, or the bytes of a binary field as an array of
    /// numbers; a field present more than once is an array of those (the last one is kept).
    private static func journalValue(_ value: Any) -> String? {
        if let s = value as? String { return s }
        if let bytes = value as? [Int], bytes.allSatisfy({ (0...255).contains($0) }) {
            return String(decoding: bytes.map(UInt8.init), as: UTF8.self)
        }
        if let list = value as? [Any], let last = list.last { return journalValue(last) }
        return nil
    }

    /// A journal entry's fields as pinproxy's keys: `PINPROXY_CHAIN_0_SPKI` → `chain.0.spki`,
    /// `PINPROXY_LEAF_SUBJECT` → `leaf_subject`. An entry without them: its `MESSAGE` line.
    static func journal(_ entry: [String: String]) -> [String: String]? {
        guard let event = entry["PINPROXY_EVENT"] else {
            guard let message = entry["MESSAGE"] else { return nil }
            return record(line: message)
        }
        var fields: [String: String] = ["event": event]
        for (name, value) in entry where name.hasPrefix("PINPROXY_") && name != "PINPROXY_EVENT" {
            fields[key(journalField: String(name.dropFirst("PINPROXY_".count)))] = value
        }
        return fields
    }

    /// `CHAIN_0_SPKI` → `chain.0.spki`: the two list keys pinproxy writes (`chain`, `expected`)
    /// with an index take back their dots; every other key is its lower-case self.
    static func key(journalField name: String) -> String {
        let lower = name.lowercased()
        for list in ["chain", "expected"] where lower.hasPrefix(list + "_") {
            let rest = lower.dropFirst(list.count + 1)
            let index = rest.prefix { $0.isNumber }
            if !index.isEmpty, rest.dropFirst(index.count).first == "_" {
                return "\(list).\(index).\(rest.dropFirst(index.count + 1))"
            }
        }
        return lower
    }

    private static func isExportField(_ line: String) -> Bool {
        guard let first = line.unicodeScalars.first, first == "_" || ("A"..."Z").contains(first) else { return false }
        let name = line.prefix { $0 != "=" }
        return name.unicodeScalars.allSatisfy { $0 == "_" || ("A"..."Z").contains($0) || ("0"..."9").contains($0) }
    }

    /// `journalctl -o export` (systemd's Journal Export Format).
    static func readExport(_ bytes: [UInt8]) -> Contents {
        var contents = Contents()
        var entry: [String: String] = [:]
        var i = 0
        func finish() {
            guard !entry.isEmpty else { return }
            if let record = journal(entry) { contents.records.append(record) } else { contents.skipped += 1 }
            entry = [:]
        }
        while i < bytes.count {
            let end = bytes[i...].firstIndex(of: UInt8(ascii: "\n")) ?? bytes.count
            let line = bytes[i..<end]
            if line.isEmpty {
                finish()
                i = end + 1
                continue
            }
            if let equals = line.firstIndex(of: UInt8(ascii: "=")) {
                entry[String(decoding: line[..<equals], as: UTF8.self)] = String(decoding: line[(equals + 1)...], as: UTF8.self)
                i = end + 1
                continue
            }
            // A binary field: the name's line, then a 64-bit little-endian length, the data, "\n".
            let lengthStart = end + 1
            guard lengthStart + 8 <= bytes.count else { break }
            let length = bytes[lengthStart..<(lengthStart + 8)].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let dataStart = lengthStart + 8
            guard length <= UInt64(bytes.count - dataStart) else { break }
            let dataEnd = dataStart + Int(length)
            entry[String(decoding: line, as: UTF8.self)] = String(decoding: bytes[dataStart..<dataEnd], as: UTF8.self)
            i = dataEnd + 1
        }
        finish()
        return contents
    }
}
