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
    struct Counts {
        /// pinproxy records read.
        var read = 0
        /// Lines or entries that were not a pinproxy record.
        var skipped = 0
    }

    /// Calls `each` with every record, in order, without keeping them: a day of a busy proxy's log
    /// is millions of lines.
    static func read(_ bytes: [UInt8], _ each: ([String: String]) -> Void) -> Counts {
        var counts = Counts()
        let lines = bytes.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)
        let firstLine = lines.first.map { String(decoding: $0, as: UTF8.self) } ?? ""
        if !firstLine.hasPrefix("{"), !firstLine.hasPrefix("ts="), isExportField(firstLine) {
            return readExport(bytes, each)
        }
        for line in lines where !line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) {
            if let record = record(line: line) {
                counts.read += 1
                each(record)
            } else {
                counts.skipped += 1
            }
        }
        return counts
    }

    /// The events whose other keys matter here; of any other line only `event` is read.
    static let decisionEvents: Set<String> = ["tunnel_allowed", "tunnel_bypassed", "tunnel_refused"]

    /// One line: pinproxy's logfmt or JSON, or a `journalctl -o json` entry.
    static func record(line: String) -> [String: String]? { record(line: Array(line.utf8)[...]) }

    static func record(line: ArraySlice<UInt8>) -> [String: String]? {
        var text = line.drop { $0 == 0x20 || $0 == 0x09 }
        if text.first != UInt8(ascii: "{"), !text.starts(with: Array("ts=".utf8)), let start = payload(of: text) {
            text = text[start...]  // a syslog-style prefix (journalctl's default view of pinproxy's stderr)
        }
        if text.first == UInt8(ascii: "{") {
            guard let object = (try? JSONSerialization.jsonObject(with: Data(text))) as? [String: Any] else { return nil }
            if object["PINPROXY_EVENT"] != nil || object["MESSAGE"] != nil || object["__CURSOR"] != nil {
                return journal(object.compactMapValues(journalValue))
            }
            return flatten(object)
        }
        return logfmt(text)
    }

    /// Where a pinproxy line starts after a prefix such as `Nov 25 10:00:00 host pinproxy[7]: `.
    private static func payload(of line: ArraySlice<UInt8>) -> Int? {
        let logfmt = Array(" ts=".utf8), json = Array(": {".utf8)
        var i = line.startIndex
        while i + 4 <= line.endIndex {
            if line[i..<(i + 4)].elementsEqual(logfmt) { return i + 1 }
            if line[i..<(i + 3)].elementsEqual(json) { return i + 2 }
            i += 1
        }
        return nil
    }

    // MARK: logfmt

    /// `ts=… level=info event=tunnel_allowed host=api.example.com subject="CN=a,O=b"`: values plain,
    /// or JSON string literals (what `LineEncoder` writes for anything else). Read as bytes: a day
    /// of a busy proxy's log is millions of lines.
    static func logfmt(_ line: ArraySlice<UInt8>) -> [String: String]? {
        var fields: [String: String] = [:]
        var i = line.startIndex
        let end = line.endIndex
        while i < end {
            while i < end, line[i] == 0x20 { i += 1 }
            guard i < end else { break }
            let keyStart = i
            while i < end, line[i] != UInt8(ascii: "="), line[i] != 0x20 { i += 1 }
            guard i < end, line[i] == UInt8(ascii: "="), i > keyStart else { return nil }
            let key = String(decoding: line[keyStart..<i], as: UTF8.self)
            if key == "event", fields["event"] == nil {
                // pinproxy writes `event` third: a line of another event is counted, not read.
                let start = i + 1
                var stop = start
                while stop < end, line[stop] != 0x20 { stop += 1 }
                let event = String(decoding: line[start..<stop], as: UTF8.self)
                if !decisionEvents.contains(event) { return ["event": event] }
            }
            i += 1
            if i < end, line[i] == UInt8(ascii: "\"") {
                guard let (value, next) = jsonString(line, from: i) else { return nil }
                fields[key] = value
                i = next
            } else {
                let start = i
                while i < end, line[i] != 0x20 { i += 1 }
                fields[key] = String(decoding: line[start..<i], as: UTF8.self)
            }
        }
        return fields["event"] == nil ? nil : fields
    }

    /// The JSON string literal at `start` (its opening quote): its value and the index past its
    /// closing quote. JSON's escapes, `\uXXXX` with surrogate pairs included.
    static func jsonString(_ bytes: ArraySlice<UInt8>, from start: Int) -> (String, Int)? {
        var out: [UInt8] = []
        var i = start + 1
        var pendingHigh: UInt32?
        func hex4(_ at: Int) -> UInt32? {
            guard at + 4 <= bytes.endIndex else { return nil }
            return UInt32(String(decoding: bytes[at..<(at + 4)], as: UTF8.self), radix: 16)
        }
        while i < bytes.endIndex {
            let b = bytes[i]
            if b == UInt8(ascii: "\"") { return (String(decoding: out, as: UTF8.self), i + 1) }
            guard b == UInt8(ascii: "\\") else {
                out.append(b)
                i += 1
                continue
            }
            guard i + 1 < bytes.endIndex else { return nil }
            let e = bytes[i + 1]
            i += 2
            switch e {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(e)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                guard let unit = hex4(i) else { return nil }
                i += 4
                var scalar: UInt32 = unit
                if (0xD800..<0xDC00).contains(unit) {
                    pendingHigh = unit
                    continue
                }
                if (0xDC00..<0xE000).contains(unit) {
                    guard let high = pendingHigh else { return nil }
                    scalar = 0x10000 + ((high - 0xD800) << 10) + (unit - 0xDC00)
                }
                pendingHigh = nil
                guard let u = Unicode.Scalar(scalar) else { return nil }
                out += Array(String(u).utf8)
            default:
                return nil
            }
        }
        return nil
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
    static func readExport(_ bytes: [UInt8], _ each: ([String: String]) -> Void) -> Counts {
        var counts = Counts()
        var entry: [String: String] = [:]
        var i = 0
        func finish() {
            guard !entry.isEmpty else { return }
            if let record = journal(entry) {
                counts.read += 1
                each(record)
            } else {
                counts.skipped += 1
            }
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
        return counts
    }
}
