import Foundation

/// Google's v3 Certificate Transparency log list (`log_list.json`, schema
/// https://www.gstatic.com/ct/log_list/v3/log_list_schema.json), loaded strictly: a list that loads
/// holds only logs whose `log_id` is the SHA-256 of their `key`, each in exactly one state, and no log
/// twice. Unknown fields are ignored (the schema grows); a wrong type, a missing field, a bad base64 or
/// timestamp is a `CTLogListError` naming the JSON path (`operators[2].logs[0].state`).
///
/// Stricter than the schema where pinproxy must judge with the list: `log_list_timestamp` is required
/// (the list's age is a policy input) and may not be in the future; each log's `state` is required (a
/// log in no state cannot count), and its `key` must parse (a log whose key does not could never
/// verify an SCT, and would silently count for nothing).
public struct CTLogList: Hashable, Sendable {
    public let version: String?
    /// `log_list_timestamp`: when Google published this list; its age is judged by `freshness(at:maxAge:)`.
    public let timestamp: Date
    public let operators: [CTLogOperator]
    private let logsByID: [CTLogID: CTLog]

    /// The log that signed an SCT with this log id, if the list knows it.
    public func log(_ id: CTLogID) -> CTLog? { logsByID[id] }

    /// Whether a log's `key` (DER SubjectPublicKeyInfo) is a key SCTs can be verified with. Parsing
    /// one takes OpenSSL, which this module does not link: `TLSInspection`'s `CTLogList.load` passes it.
    public typealias KeyCheck = (_ spki: [UInt8]) -> Bool

    /// How far ahead of this machine's clock a list's `log_list_timestamp` may be: a clock a little
    /// behind the publisher's is no reason to refuse a list, but one stamped further ahead would
    /// stay "0 days old" until that date, never go stale, and make `ct-list --install` refuse every
    /// list published before it.
    public static let futureSkew: TimeInterval = 86400

    /// Loads the JSON text of a list as of `now`; the first problem found is thrown.
    public static func parse(_ json: [UInt8], at now: Date, keyCheck: KeyCheck) throws(CTLogListError) -> CTLogList {
        let raw: RawList
        do {
            raw = try JSONDecoder().decode(RawList.self, from: Data(json))
        } catch let error as DecodingError {
            if case .dataCorrupted(let context) = error, context.codingPath.isEmpty {
                throw CTLogListError(path: "", problem: "not JSON: \(syntaxError(json))")
            }
            throw CTLogListError(error)
        } catch {
            throw CTLogListError(path: "", problem: "not JSON: \(error)")
        }
        return try CTLogList(raw, at: now, keyCheck: keyCheck)
    }

    /// JSONDecoder says only "not valid JSON"; JSONSerialization says where ("Invalid value around character 22.").
    private static func syntaxError(_ json: [UInt8]) -> String {
        let fallback = "the text is not valid JSON"
        do {
            _ = try JSONSerialization.jsonObject(with: Data(json), options: [.fragmentsAllowed])
            return fallback
        } catch {
            return (error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String ?? fallback
        }
    }

    private init(_ raw: RawList, at now: Date, keyCheck: KeyCheck) throws(CTLogListError) {
        guard raw.timestamp.date.timeIntervalSince(now) <= Self.futureSkew else {
            throw CTLogListError(path: "log_list_timestamp",
                                 problem: "\(RFC3339.format(raw.timestamp.date)) is more than \(Self.days(Self.futureSkew)) day after this machine's clock (\(RFC3339.format(now))); "
                                     + "a list is stamped when it is published, so the list or the clock is wrong")
        }
        var byID: [CTLogID: (log: CTLog, path: String)] = [:]
        var operatorAt: [String: Int] = [:]
        var operators: [CTLogOperator] = []
        for (o, rawOperator) in raw.operators.enumerated() {
            if let first = operatorAt[rawOperator.name] {
                throw CTLogListError(path: "operators[\(o)].name",
                                     problem: "operator '\(rawOperator.name)' is listed twice (also operators[\(first)])")
            }
            operatorAt[rawOperator.name] = o
            var logs: [CTLog] = []
            let all = rawOperator.logs.enumerated().map { ("operators[\(o)].logs[\($0.offset)]", $0.element.fields) }
                + (rawOperator.tiledLogs ?? []).enumerated().map { ("operators[\(o)].tiled_logs[\($0.offset)]", $0.element.fields) }
            for (path, rawLog) in all {
                guard keyCheck(rawLog.key) else {
                    throw CTLogListError(path: path + ".key", problem: "is not the DER SubjectPublicKeyInfo of an RSA or EC key, so no SCT of this log could be verified")
                }
                guard SHA256.hash(rawLog.key) == rawLog.logID.bytes else {
                    throw CTLogListError(path: path + ".log_id", problem: "is not the SHA-256 of the log's key")
                }
                if let other = byID[rawLog.logID] {
                    throw CTLogListError(path: path + ".log_id", problem: "\(rawLog.logID) is listed twice (also \(other.path))")
                }
                let log = CTLog(id: rawLog.logID, key: rawLog.key, description: rawLog.description ?? "",
                                operatorName: rawOperator.name, previousOperators: rawLog.previousOperators,
                                endpoint: rawLog.endpoint, mmd: rawLog.mmd,
                                state: rawLog.state, temporalInterval: rawLog.temporalInterval, logType: rawLog.logType)
                byID[rawLog.logID] = (log, path)
                logs.append(log)
            }
            operators.append(CTLogOperator(name: rawOperator.name, email: rawOperator.email, logs: logs))
        }
        version = raw.version
        timestamp = raw.timestamp.date
        self.operators = operators
        logsByID = byID.mapValues(\.log)
    }

    /// Chrome stops enforcing CT with a list older than 70 days; pinproxy warns (and the wiring decides
    /// what to enforce) past the same age unless `ct_list_max_age` says otherwise.
    public static let defaultMaxAge: TimeInterval = 70 * 86400

    /// How old the list is at `now`, against `maxAge`. A list stamped in the future by up to
    /// `futureSkew` (a clock behind the publisher's) counts as fresh with age 0; one further ahead
    /// does not load.
    public func freshness(at now: Date, maxAge: TimeInterval = CTLogList.defaultMaxAge) -> CTListFreshness {
        let age = max(0, now.timeIntervalSince(timestamp))
        return age > maxAge ? .stale(age: age) : .fresh(age: age)
    }
}

public enum CTListFreshness: Hashable, Sendable {
    case fresh(age: TimeInterval)
    case stale(age: TimeInterval)
}

/// A log's identity: the SHA-256 of its public key (RFC 6962 §3.2), as carried in every SCT.
public struct CTLogID: Hashable, Sendable, CustomStringConvertible {
    public let bytes: [UInt8]

    /// nil unless exactly 32 bytes.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count == 32 else { return nil }
        self.bytes = bytes
    }

    /// Base64, as the log list writes it.
    public var description: String { Base64.encode(bytes) }
}

public struct CTLogOperator: Hashable, Sendable {
    public let name: String
    public let email: [String]
    /// The operator's `logs` then its `tiled_logs`.
    public let logs: [CTLog]
}

public struct CTLog: Hashable, Sendable {
    /// Where the log takes submissions: RFC 6962 (`url`) or a tiled, static-CT log (`submission_url`,
    /// `monitoring_url`). Either kind signs the same SCTs; the policy does not tell them apart.
    public enum Endpoint: Hashable, Sendable {
        case rfc6962(url: String)
        case tiled(submissionURL: String, monitoringURL: String)
    }

    public let id: CTLogID
    /// DER SubjectPublicKeyInfo: what `TLSInspection` verifies SCT signatures with.
    public let key: [UInt8]
    public let description: String
    /// The operator the list files the log under today.
    public let operatorName: String
    /// Who ran the log before, oldest first (`previous_operators`); see `operatorName(at:)`.
    public let previousOperators: [CTPreviousOperator]
    public let endpoint: Endpoint
    /// Maximum merge delay, seconds.
    public let mmd: Int
    public let state: CTLogState
    /// The certificates this log accepts, by their notAfter; nil: any.
    public let temporalInterval: CTTemporalInterval?
    /// `prod` or `test` where the list says.
    public let logType: String?

    /// Who operated the log at `time`: a log that changed hands counts for the operator that ran it when
    /// it signed the SCT (Chrome's rule), so a transfer neither breaks nor pads operator diversity.
    public func operatorName(at time: Date) -> String {
        previousOperators.first { time <= $0.endTime }?.name ?? operatorName
    }
}

/// A former operator of a log, and the last moment it ran it (`end_time`).
public struct CTPreviousOperator: Hashable, Sendable {
    public let name: String
    public let endTime: Date
}

/// The one state a log is in, since `timestamp`.
public enum CTLogState: Hashable, Sendable {
    case pending(since: Date)
    case qualified(since: Date)
    case usable(since: Date)
    case readonly(since: Date, finalTreeHead: CTTreeHead)
    case retired(since: Date)
    case rejected(since: Date)

    /// The list's name for the state.
    public var name: String {
        switch self {
        case .pending: "pending"
        case .qualified: "qualified"
        case .usable: "usable"
        case .readonly: "readonly"
        case .retired: "retired"
        case .rejected: "rejected"
        }
    }
}

public struct CTTreeHead: Hashable, Sendable {
    public let treeSize: Int
    public let sha256RootHash: [UInt8]
}

/// `[startInclusive, endExclusive)`: the notAfter dates of the certificates a log accepts.
public struct CTTemporalInterval: Hashable, Sendable {
    public let startInclusive: Date
    public let endExclusive: Date

    public func contains(_ date: Date) -> Bool { date >= startInclusive && date < endExclusive }
}

/// What is wrong with a log list, and where: `operators[2].logs[0].state: 2 states (usable, retired); exactly one expected`.
public struct CTLogListError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The JSON path (`operators[2].logs[0].log_id`); empty for the document itself.
    public let path: String
    public let problem: String

    /// `problem` may quote the list (an operator's name, a bad value): it is escaped to one printable line.
    public init(path: String, problem: String) {
        self.path = path
        self.problem = Printable.oneLine(problem)
    }

    public var description: String { path.isEmpty ? problem : "\(path): \(problem)" }

    init(_ error: DecodingError) {
        switch error {
        case .keyNotFound(let key, let context):
            self.init(path: Self.path(context.codingPath + [key]), problem: "missing")
        case .typeMismatch(let type, let context):
            self.init(path: Self.path(context.codingPath), problem: "expected \(Self.words(type))")
        case .valueNotFound(let type, let context):
            self.init(path: Self.path(context.codingPath), problem: "null; expected \(Self.words(type))")
        case .dataCorrupted(let context):
            self.init(path: Self.path(context.codingPath), problem: context.debugDescription)
        @unknown default:
            self.init(path: "", problem: "\(error)")
        }
    }

    /// `operators[2].logs[0].state` from a coding path.
    static func path(_ keys: [any CodingKey]) -> String {
        keys.enumerated().map { i, key in
            if let index = key.intValue { "[\(index)]" } else { i == 0 ? key.stringValue : "." + key.stringValue }
        }.joined()
    }

    private static func words(_ type: Any.Type) -> String {
        switch type {
        case is String.Type, is Base64Field.Type, is TimestampField.Type: "a string"
        case is Int.Type: "an integer"
        case is [String].Type, is [RawOperator].Type, is [RawPreviousOperator].Type, is [RawLog<RFC6962Shape>].Type, is [RawLog<TiledShape>].Type,
             is [Any].Type: "an array"
        default: "an object"
        }
    }
}

// MARK: - The JSON's shape

/// Each raw type checks its own field's form where it decodes it, so a problem carries its coding path;
/// cross-field checks (log_id against key, duplicates) come after, in `CTLogList.init`.
private struct RawList: Decodable {
    let version: String?
    let timestamp: TimestampField
    let operators: [RawOperator]

    enum CodingKeys: String, CodingKey { case version, timestamp = "log_list_timestamp", operators }
}

private struct RawOperator: Decodable {
    let name: String
    let email: [String]
    let logs: [RawLog<RFC6962Shape>]
    let tiledLogs: [RawLog<TiledShape>]?

    enum CodingKeys: String, CodingKey { case name, email, logs, tiledLogs = "tiled_logs" }
}

/// One entry of `logs` (RFC 6962: `url`) or of `tiled_logs` (`submission_url`, `monitoring_url`).
private struct RawLog<Shape: EndpointShape>: Decodable {
    let fields: LogFields

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: LogKeys.self)
        let idBytes = try c.decode(Base64Field.self, forKey: .logID).bytes
        guard let id = CTLogID(idBytes) else {
            throw DecodingError.dataCorruptedError(forKey: .logID, in: c,
                                                   debugDescription: "decodes to \(idBytes.count) bytes; a log id is 32 (SHA-256)")
        }
        let key = try c.decode(Base64Field.self, forKey: .key).bytes
        guard !key.isEmpty else { throw DecodingError.dataCorruptedError(forKey: .key, in: c, debugDescription: "is empty") }
        let mmd = try c.decode(Int.self, forKey: .mmd)
        guard mmd >= 1 else {
            throw DecodingError.dataCorruptedError(forKey: .mmd, in: c, debugDescription: "\(mmd); the merge delay is at least 1 second")
        }
        fields = LogFields(description: try c.decodeIfPresent(String.self, forKey: .description), logID: id, key: key,
                           endpoint: try Shape.endpoint(c), mmd: mmd, state: try c.decode(RawState.self, forKey: .state).state,
                           temporalInterval: try c.decodeIfPresent(RawInterval.self, forKey: .temporalInterval)?.interval,
                           logType: try c.decodeIfPresent(String.self, forKey: .logType),
                           previousOperators: (try c.decodeIfPresent([RawPreviousOperator].self, forKey: .previousOperators) ?? [])
                               .map { CTPreviousOperator(name: $0.name, endTime: $0.endTime.date) }
                               .sorted { $0.endTime < $1.endTime })
    }
}

private struct LogFields {
    let description: String?
    let logID: CTLogID
    let key: [UInt8]
    let endpoint: CTLog.Endpoint
    let mmd: Int
    let state: CTLogState
    let temporalInterval: CTTemporalInterval?
    let logType: String?
    let previousOperators: [CTPreviousOperator]
}

private enum LogKeys: String, CodingKey {
    case description, logID = "log_id", key, url, submissionURL = "submission_url", monitoringURL = "monitoring_url"
    case mmd, state, temporalInterval = "temporal_interval", logType = "log_type", previousOperators = "previous_operators"
}

private struct RawPreviousOperator: Decodable {
    let name: String
    let endTime: TimestampField

    enum CodingKeys: String, CodingKey { case name, endTime = "end_time" }
}

private protocol EndpointShape { static func endpoint(_ c: KeyedDecodingContainer<LogKeys>) throws -> CTLog.Endpoint }

private enum RFC6962Shape: EndpointShape {
    static func endpoint(_ c: KeyedDecodingContainer<LogKeys>) throws -> CTLog.Endpoint {
        .rfc6962(url: try c.decode(String.self, forKey: .url))
    }
}

private enum TiledShape: EndpointShape {
    static func endpoint(_ c: KeyedDecodingContainer<LogKeys>) throws -> CTLog.Endpoint {
        .tiled(submissionURL: try c.decode(String.self, forKey: .submissionURL),
               monitoringURL: try c.decode(String.self, forKey: .monitoringURL))
    }
}

/// `state`: an object with exactly one of the six state names; other keys are ignored as unknown fields.
private struct RawState: Decodable {
    let state: CTLogState

    enum CodingKeys: String, CodingKey, CaseIterable { case pending, qualified, usable, readonly, retired, rejected }
    private struct Since: Decodable { let timestamp: TimestampField }
    private struct Frozen: Decodable {
        let timestamp: TimestampField
        let finalTreeHead: RawTreeHead
        enum CodingKeys: String, CodingKey { case timestamp, finalTreeHead = "final_tree_head" }
    }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let present = CodingKeys.allCases.filter { c.contains($0) }
        guard present.count == 1, let only = present.first else {
            let names = CodingKeys.allCases.map(\.rawValue).joined(separator: ", ")
            let problem = present.isEmpty
                ? "no state; exactly one of \(names) expected"
                : "\(present.count) states (\(present.map(\.rawValue).joined(separator: ", "))); exactly one expected"
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: problem))
        }
        if only == .readonly {
            let frozen = try c.decode(Frozen.self, forKey: .readonly)
            state = .readonly(since: frozen.timestamp.date, finalTreeHead: frozen.finalTreeHead.head)
            return
        }
        let since = try c.decode(Since.self, forKey: only).timestamp.date
        switch only {
        case .pending: state = .pending(since: since)
        case .qualified: state = .qualified(since: since)
        case .usable: state = .usable(since: since)
        case .retired: state = .retired(since: since)
        case .rejected: state = .rejected(since: since)
        case .readonly: preconditionFailure("readonly is decoded above")
        }
    }
}

private struct RawTreeHead: Decodable {
    let head: CTTreeHead

    enum CodingKeys: String, CodingKey { case treeSize = "tree_size", rootHash = "sha256_root_hash" }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let size = try c.decode(Int.self, forKey: .treeSize)
        guard size >= 0 else { throw DecodingError.dataCorruptedError(forKey: .treeSize, in: c, debugDescription: "is negative") }
        let hash = try c.decode(Base64Field.self, forKey: .rootHash).bytes
        guard hash.count == 32 else {
            throw DecodingError.dataCorruptedError(forKey: .rootHash, in: c, debugDescription: "decodes to \(hash.count) bytes; a SHA-256 root hash is 32")
        }
        head = CTTreeHead(treeSize: size, sha256RootHash: hash)
    }
}

private struct RawInterval: Decodable {
    let interval: CTTemporalInterval

    enum CodingKeys: String, CodingKey { case start = "start_inclusive", end = "end_exclusive" }

    init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let start = try c.decode(TimestampField.self, forKey: .start).date
        let end = try c.decode(TimestampField.self, forKey: .end).date
        guard start < end else {
            throw DecodingError.dataCorruptedError(forKey: .end, in: c, debugDescription: "is not after start_inclusive")
        }
        interval = CTTemporalInterval(startInclusive: start, endExclusive: end)
    }
}

/// A string holding canonical padded base64 (RFC 4648 §4).
private struct Base64Field: Decodable {
    let bytes: [UInt8]

    init(from decoder: any Decoder) throws { bytes = try decodeString(decoder, isNot: "base64", Base64.decode) }
}

/// A string holding an RFC 3339 timestamp.
private struct TimestampField: Decodable {
    let date: Date

    init(from decoder: any Decoder) throws { date = try decodeString(decoder, isNot: "an RFC 3339 timestamp", RFC3339.parse) }
}

/// One string value that `parse` must accept. Both field types quote a rejected value the same way:
/// its first 60 characters, since a downloaded list may hold anything, of any length.
private func decodeString<T>(_ decoder: any Decoder, isNot what: String, _ parse: (String) -> T?) throws -> T {
    let c = try decoder.singleValueContainer()
    let text = try c.decode(String.self)
    guard let value = parse(text) else {
        throw DecodingError.dataCorruptedError(in: c, debugDescription: "'\(text.prefix(60))' is not \(what)")
    }
    return value
}
