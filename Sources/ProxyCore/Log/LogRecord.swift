import Foundation
import Logging

/// A value in a log line. Arrays of objects carry the chain and the expected pins.
public enum LogValue: Sendable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case objects([[(String, LogValue)]])

    var json: String {
        switch self {
        case .string(let s): return jsonString(s)
        case .int(let i): return String(i)
        case .bool(let b): return b ? "true" : "false"
        case .objects(let list):
            return "[" + list.map { fields in "{" + fields.map { "\(jsonString($0.0)):\($0.1.json)" }.joined(separator: ",") + "}" }.joined(separator: ",") + "]"
        }
    }
}

/// One log line: an event and its fields in a fixed order. Built in one place per event and rendered
/// by one of two encoders; call sites never format strings.
public struct LogRecord: Sendable {
    public var level: Logger.Level
    public var event: String
    public var fields: [(String, LogValue)]

    public init(_ level: Logger.Level, _ event: String, _ fields: [(String, LogValue)] = []) {
        self.level = level
        self.event = event
        self.fields = fields
    }

    public subscript(_ key: String) -> LogValue? {
        get { fields.first { $0.0 == key }?.1 }
        set {
            fields.removeAll { $0.0 == key }
            if let newValue { fields.append((key, newValue)) }
        }
    }

    /// logfmt: `ts=… level=… event=… key=value …`. Arrays are flattened to `key.N.field=value`.
    /// Values are quoted when they contain spaces, quotes, `=` or anything not plain printable ASCII,
    /// and escaped, because hosts and SNIs arrive from the network. (`LineEncoder` writes it.)
    public func text(at time: Date) -> String {
        var encoder = LineEncoder()
        encoder.text(self, at: time)
        return String(decoding: encoder.bytes, as: UTF8.self)
    }

    /// One JSON object with the same keys (arrays as arrays of objects).
    public func json(at time: Date) -> String {
        var encoder = LineEncoder()
        encoder.json(self, at: time)
        return String(decoding: encoder.bytes, as: UTF8.self)
    }

    var levelName: String {
        switch level {
        case .trace: return "trace"
        case .debug: return "debug"
        case .info: return "info"
        case .notice: return "notice"
        case .warning: return "warning"
        case .error: return "error"
        case .critical: return "critical"
        }
    }
}

/// A JSON string literal; control bytes and non-ASCII are `\u` escapes so a line stays one line of ASCII.
func jsonString(_ s: String) -> String {
    var out = "\""
    for scalar in s.unicodeScalars {
        switch scalar {
        case "\"": out += "\\\""
        case "\\": out += "\\\\"
        case "\n": out += "\\n"
        case "\r": out += "\\r"
        case "\t": out += "\\t"
        default:
            if scalar.value < 0x20 || scalar.value >= 0x7f {
                for unit in String(scalar).utf16 { out += "\\u" + String(unit, radix: 16).leftPadded(to: 4) }
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
    }
    return out + "\""
}

/// RFC 3339 UTC with milliseconds.
func timestamp(_ date: Date) -> String {
    let ms = Int((date.timeIntervalSince1970 * 1000).rounded(.down))
    var t = time_t(ms / 1000)
    var parts = tm()
    gmtime_r(&t, &parts)
    func pad(_ v: Int32, _ n: Int) -> String { String(v).leftPadded(to: n) }
    return "\(pad(parts.tm_year + 1900, 4))-\(pad(parts.tm_mon + 1, 2))-\(pad(parts.tm_mday, 2))T\(pad(parts.tm_hour, 2)):\(pad(parts.tm_min, 2)):\(pad(parts.tm_sec, 2)).\(String(ms % 1000).leftPadded(to: 3))Z"
}

extension String {
    func leftPadded(to n: Int) -> String { String(repeating: "0", count: max(0, n - count)) + self }
}

/// Where log lines go. The caller's thread (the event loop's, mostly) renders a line and hands it to
/// a `LogWriter`, whose own thread writes it with one `write(2)`: lines never interleave, and a
/// reader that stops reading costs dropped lines (counted, then reported), never a blocked loop.
/// Copies share one writer.
public struct LogSink: Sendable {
    public let format: LogFormatChoice
    public let fd: Int32
    public let minimumLevel: Logger.Level
    let writer: LogWriter

    /// - Parameter queueBytes: the writer's bound in bytes; nil for `LogWriter.defaultCapacity`.
    /// When `fd` is the journal's stream (`JOURNAL_STREAM`) and journald's socket is there, records
    /// go to the journal as native entries with their priority and fields instead (without the
    /// socket, lines on the stream still reach the journal, only without fields).
    public init(format: LogFormatChoice, fd: Int32 = 2, minimumLevel: Logger.Level = .info, queueBytes: Int? = nil) {
        self.format = format
        self.fd = fd
        self.minimumLevel = minimumLevel
        let destination: LogDestination
        if Journal.stderrIsJournal(fd: fd), Journal.isSocket(Journal.socketPath()), let socket = JournalSocket(path: Journal.socketPath()) {
            destination = .journal(socket)
        } else {
            destination = .stream(fd: fd, format: format)
        }
        self.writer = LogWriter(destination: destination, capacity: queueBytes ?? LogWriter.defaultCapacity)
    }

    /// Lines dropped so far because the reader did not keep up (or a write failed).
    public var droppedLines: Int { writer.counts.dropped }

    /// Whether records go to the journal's socket rather than to `fd`.
    public var isJournal: Bool {
        if case .journal = writer.destination { return true }
        return false
    }

    public func emit(_ record: LogRecord) {
        guard record.level >= minimumLevel else { return }
        writer.enqueue(writer.destination.render(record, at: Date()))
    }

    /// Waits (at most `timeout` seconds) until the lines emitted so far are written; call it before
    /// the process exits. Returns false when the reader did not take them in time.
    @discardableResult
    public func flush(timeout: Double) -> Bool {
        writer.flush(timeout: timeout)
    }
}

public enum LogFormatChoice: String, Sendable {
    case text, json
}

/// The order of keys in a line: what an operator scans for first (the target, the reason, the
/// verdict and what to do about it) right after `ts level event`, so `journalctl` and a pager show
/// it without scrolling; then the identity of the connection, the decision's details and the
/// evidence. Keys not listed follow in alphabetical order; the expected pins and the chain, the
/// longest values, come last.
enum LogKeys {
    static let order = [
        "host", "port", "reason", "verdict", "hint",
        "source", "version", "listen", "accepted", "active_sessions", "tunnels", "allowed", "refused", "bypassed", "unpinned_total",
        "rejected", "closed", "conn", "client", "address", "sni", "tls", "probe_tls", "key_proof", "rule", "rule_line", "mode", "trust",
        "stage", "would_refuse", "bypass", "bypass_until", "status", "detail", "pin", "pin_label",
        "pin_at", "pin_position", "denylisted_pin", "leaf_subject", "leaf_issuer", "leaf_not_after",
        "bytes_up", "bytes_down", "duration_ms", "verify", "relay", "close_reason",
    ]
    /// After every other key, in this order.
    static let last = ["expected", "chain"]
    static let objectOrder = ["position", "spki", "cert", "subject", "issuer", "not_after", "anchor", "pin", "at", "label"]

    /// Each key's place: `order`'s keys first, unlisted keys next (`order.count`), then `last`'s.
    /// Looked up in a table built once: a line has ~30 keys and every comparison of a sort asks twice.
    private static let ranks = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0) } + last.enumerated().map { ($1, order.count + 1 + $0) })
    private static let objectRanks = Dictionary(uniqueKeysWithValues: objectOrder.enumerated().map { ($1, $0) })

    static func sorted<V>(_ pairs: [(String, V)], by order: [String], last: [String] = []) -> [(String, V)] {
        let table: [String: Int]
        if order == Self.order && last == Self.last { table = ranks }
        else if order == objectOrder && last.isEmpty { table = objectRanks }
        else { table = Dictionary(uniqueKeysWithValues: order.enumerated().map { ($1, $0) } + last.enumerated().map { ($1, order.count + 1 + $0) }) }
        return sorted(pairs, ranks: table, unlisted: order.count)
    }

    /// `pairs` by rank, then by key among equal ranks (the unlisted ones), ranks computed once per
    /// key; of pairs with the same key only the last one set is kept, as a dictionary would.
    private static func sorted<V>(_ pairs: [(String, V)], ranks: [String: Int], unlisted: Int) -> [(String, V)] {
        // Indices are sorted, not the pairs: moving values (strings, the chain) costs retains.
        let rank = pairs.map { ranks[$0.0] ?? unlisted }
        func before(_ a: Int, _ b: Int) -> Bool {
            if rank[a] != rank[b] { return rank[a] < rank[b] }
            if pairs[a].0 != pairs[b].0 { return pairs[a].0 < pairs[b].0 }
            return a < b
        }
        // SessionLog builds many lines in order already, without a key twice: nothing to do.
        if pairs.indices.dropLast().allSatisfy({ before($0, $0 + 1) && pairs[$0].0 != pairs[$0 + 1].0 }) { return pairs }
        let order = pairs.indices.sorted(by: before)
        var out: [(String, V)] = []
        out.reserveCapacity(order.count)
        for (n, index) in order.enumerated() where n + 1 == order.count || pairs[order[n + 1]].0 != pairs[index].0 {
            out.append(pairs[index])
        }
        return out
    }

    /// The fields as swift-log's metadata round trip leaves them: one value per key (the last one
    /// set, as a dictionary keeps it), in the canonical order, objects' keys in `objectOrder`.
    static func canonical(_ fields: [(String, LogValue)]) -> [(String, LogValue)] {
        var fields = fields
        for n in fields.indices {
            guard case .objects(let list) = fields[n].1 else { continue }
            fields[n].1 = .objects(list.map { canonicalObject($0) })
        }
        return sorted(fields, ranks: ranks, unlisted: order.count)
    }

    /// One object of an array as its dictionary round trip leaves it: nested objects become arrays of
    /// objects as `LogValue(metadata:)` reads them back.
    private static func canonicalObject(_ object: [(String, LogValue)]) -> [(String, LogValue)] {
        var object = object
        for n in object.indices {
            guard case .objects = object[n].1 else { continue }
            object[n].1 = LogValue(metadata: object[n].1.metadataValue)
        }
        return sorted(object, ranks: objectRanks, unlisted: objectOrder.count)
    }
}

extension LogRecord {
    /// The record as swift-log metadata (arrays of objects become arrays of dictionaries).
    var metadata: Logger.Metadata {
        var out: Logger.Metadata = [:]
        for (key, value) in fields { out[key] = value.metadataValue }
        return out
    }

    /// The record a handler rebuilds from swift-log metadata, in the canonical key order.
    init(level: Logger.Level, event: String, metadata: Logger.Metadata) {
        let fields = metadata.map { ($0.key, LogValue(metadata: $0.value)) }
        self.init(level, event, LogKeys.sorted(fields, by: LogKeys.order, last: LogKeys.last))
    }
}

extension LogValue {
    var metadataValue: Logger.MetadataValue {
        switch self {
        case .string(let s): return .string(s)
        case .int(let i): return .stringConvertible(i)
        case .bool(let b): return .stringConvertible(b)
        case .objects(let list):
            return .array(list.map { object in .dictionary(Dictionary(uniqueKeysWithValues: object.map { ($0.0, $0.1.metadataValue) })) })
        }
    }

    init(metadata: Logger.MetadataValue) {
        switch metadata {
        case .string(let s): self = .string(s)
        case .stringConvertible(let c):
            if let i = c as? Int { self = .int(i) } else if let b = c as? Bool { self = .bool(b) } else { self = .string(c.description) }
        case .array(let items):
            self = .objects(items.map { item in
                guard case .dictionary(let d) = item else { return [("value", LogValue(metadata: item))] }
                return LogKeys.sorted(d.map { ($0.key, LogValue(metadata: $0.value)) }, by: LogKeys.objectOrder)
            })
        case .dictionary(let d):
            self = .objects([LogKeys.sorted(d.map { ($0.key, LogValue(metadata: $0.value)) }, by: LogKeys.objectOrder)])
        }
    }
}

/// pinproxy's swift-log handler: the message is the event name, metadata the fields, written as one
/// logfmt or JSON line with the keys in `LogKeys.order`.
public struct LineLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var logLevel: Logger.Level
    let sink: LogSink

    public init(sink: LogSink) {
        self.sink = sink
        self.logLevel = sink.minimumLevel
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        sink.emit(LogRecord(level: event.level, event: event.message.description, metadata: all))
    }
}

extension Logger {
    /// Writes one record through swift-log. With pinproxy's own handler (and no metadata attached
    /// to the logger), the record goes to the sink directly, in the order swift-log's round trip
    /// would give it (`LogKeys.canonical`): the same bytes without turning every field and chain
    /// entry into a dictionary and back, which was most of what a tunnel's lines cost.
    func emit(_ record: LogRecord) {
        guard record.level >= logLevel else { return }
        if let handler = handler as? LineLogHandler, handler.metadata.isEmpty {
            handler.sink.emit(LogRecord(record.level, record.event, LogKeys.canonical(record.fields)))
            return
        }
        log(level: record.level, Logger.Message(stringLiteral: record.event), metadata: record.metadata)
    }
}
