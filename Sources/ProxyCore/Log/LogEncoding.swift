import Foundation

/// Renders a record straight into the bytes of its line: logfmt or JSON, byte for byte what the
/// log reference (docs/logs.md) shows. Every tunnel costs two such lines on the event loop's thread, so
/// this appends ASCII bytes to one buffer instead of building and joining a `String` per key; only a
/// value with bytes outside ASCII (a host or subject from the network) takes the scalar-by-scalar
/// path of `jsonString`.
struct LineEncoder {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 1024) { bytes.reserveCapacity(capacity) }

    mutating func text(_ record: LogRecord, at time: Date) {
        ascii("ts="); timestamp(time)
        ascii(" level="); ascii(record.levelName)
        ascii(" event="); ascii(record.event)
        for (key, value) in record.fields {
            switch value {
            case .objects(let list):
                for (index, object) in list.enumerated() {
                    for (field, inner) in object {
                        byte(0x20); ascii(key); byte(0x2E); decimal(index); byte(0x2E); ascii(field); byte(0x3D); logfmt(inner)
                    }
                }
            default:
                byte(0x20); ascii(key); byte(0x3D); logfmt(value)
            }
        }
    }

    mutating func json(_ record: LogRecord, at time: Date) {
        ascii("{\"ts\":\""); timestamp(time)
        ascii("\",\"level\":"); quoted(record.levelName)
        ascii(",\"event\":"); quoted(record.event)
        for (key, value) in record.fields {
            byte(0x2C); quoted(key); byte(0x3A); json(value)
        }
        byte(0x7D)
    }

    mutating func newline() { byte(0x0A) }

    // MARK: values

    private mutating func json(_ value: LogValue) {
        switch value {
        case .string(let s): quoted(s)
        case .int(let i): decimal(i)
        case .bool(let b): ascii(b ? "true" : "false")
        case .objects(let list):
            byte(0x5B)
            for (n, object) in list.enumerated() {
                if n > 0 { byte(0x2C) }
                byte(0x7B)
                for (m, (field, inner)) in object.enumerated() {
                    if m > 0 { byte(0x2C) }
                    quoted(field); byte(0x3A); json(inner)
                }
                byte(0x7D)
            }
            byte(0x5D)
        }
    }

    /// A logfmt value: as it is when it is plain printable ASCII without `"`, `=` or `\`, else a
    /// JSON string literal.
    private mutating func logfmt(_ value: LogValue) {
        switch value {
        case .int(let i): decimal(i)
        case .bool(let b): ascii(b ? "true" : "false")
        case .objects: ascii("[]")
        case .string(let s):
            var s = s
            let plain = s.withUTF8 { utf8 in
                !utf8.isEmpty && utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F && $0 != 0x22 && $0 != 0x3D && $0 != 0x5C }
            }
            if plain { s.withUTF8 { bytes.append(contentsOf: $0) } } else { quoted(s) }
        }
    }

    /// `jsonString(s)`'s bytes: escapes for `"`, `\`, newline, return, tab, other control bytes
    /// and DEL as `\u00XX`; non-ASCII through `jsonString` itself (UTF-16 `\u` escapes).
    private mutating func quoted(_ s: String) {
        var s = s
        let ascii = s.withUTF8 { utf8 -> Bool in
            guard utf8.allSatisfy({ $0 < 0x80 }) else { return false }
            bytes.append(0x22)
            // Most values (pins, names, subjects) need no escape at all: one copy.
            if utf8.allSatisfy({ $0 >= 0x20 && $0 != 0x7F && $0 != 0x22 && $0 != 0x5C }) {
                bytes.append(contentsOf: utf8)
                bytes.append(0x22)
                return true
            }
            for b in utf8 {
                switch b {
                case 0x22: bytes.append(0x5C); bytes.append(0x22)
                case 0x5C: bytes.append(0x5C); bytes.append(0x5C)
                case 0x0A: bytes.append(0x5C); bytes.append(0x6E)
                case 0x0D: bytes.append(0x5C); bytes.append(0x72)
                case 0x09: bytes.append(0x5C); bytes.append(0x74)
                case 0x00..<0x20, 0x7F:
                    bytes.append(contentsOf: [0x5C, 0x75, 0x30, 0x30, Self.hex[Int(b >> 4)], Self.hex[Int(b & 0x0F)]])
                default: bytes.append(b)
                }
            }
            bytes.append(0x22)
            return true
        }
        if !ascii { bytes.append(contentsOf: jsonString(s).utf8) }
    }

    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    // MARK: pieces

    private mutating func byte(_ b: UInt8) { bytes.append(b) }

    /// Text we wrote ourselves (keys, event names, levels): appended as it is.
    private mutating func ascii(_ s: String) {
        var s = s
        s.withUTF8 { bytes.append(contentsOf: $0) }
    }

    private mutating func decimal(_ i: Int) {
        guard i >= 0 else { return ascii(String(i)) }
        padded(i, width: 1)
    }

    /// A non-negative number in decimal, zero-padded to `width` digits (more when it needs them).
    private mutating func padded(_ value: Int, width: Int) {
        var digits: (UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                     UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8) =
            (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var v = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            repeat {
                buffer[count] = 0x30 + UInt8(v % 10)
                v /= 10
                count += 1
            } while v > 0
            while count < width { buffer[count] = 0x30; count += 1 }
            for n in stride(from: count - 1, through: 0, by: -1) { bytes.append(buffer[n]) }
        }
    }

    /// RFC 3339 UTC with milliseconds, as `timestamp(_:)` writes it.
    private mutating func timestamp(_ date: Date) {
        let ms = Int((date.timeIntervalSince1970 * 1000).rounded(.down))
        guard ms >= 0 else { return ascii(ProxyCore.timestamp(date)) }
        var t = time_t(ms / 1000)
        var parts = tm()
        gmtime_r(&t, &parts)
        padded(Int(parts.tm_year) + 1900, width: 4); byte(0x2D)
        padded(Int(parts.tm_mon) + 1, width: 2); byte(0x2D)
        padded(Int(parts.tm_mday), width: 2); byte(0x54)
        padded(Int(parts.tm_hour), width: 2); byte(0x3A)
        padded(Int(parts.tm_min), width: 2); byte(0x3A)
        padded(Int(parts.tm_sec), width: 2); byte(0x2E)
        padded(ms % 1000, width: 3); byte(0x5A)
    }
}
