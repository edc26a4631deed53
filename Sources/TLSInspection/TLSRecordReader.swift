// The passive TLS reader's lower half: the record layer and handshake reassembly under
// `ClientFlightReader` and `ServerFlightReader`. Pure Swift over bytes (no OpenSSL, no Foundation),
// so Fuzz/TLSReaderFuzz.swift can compile these files on their own.
//
// Shaped like swift-nio's SNIHandler: one function per wire struct with the RFC struct
// quoted above it, named constants, and every vector sliced to its declared length before anything
// inside it is read. Bytes are processed strictly in stream order and every decision is taken at a
// fixed stream position (a header byte, a record's end), so however the input is split into pieces
// the readers give the same result.

// RFC 8446 §5.1 / RFC 5246 §6.2.1: ContentType.
let tlsContentTypeChangeCipherSpec: UInt8 = 20
let tlsContentTypeAlert: UInt8 = 21
let tlsContentTypeHandshake: UInt8 = 22
let tlsContentTypeApplicationData: UInt8 = 23

let tlsRecordHeaderLength = 5
/// Every TLS version's record protocol has major version 3 (SSL 3.0 = 0x0300 … TLS 1.3's legacy 0x0303).
let tlsRecordVersionMajor: UInt8 = 3
/// RFC 5246 §6.2.3: TLSCiphertext.length MUST NOT exceed 2^14 + 2048 (the largest of any version).
let tlsMaxRecordLength = (1 << 14) + 2048
let tlsHandshakeHeaderLength = 4

// RFC 8446 §4 / RFC 5246 §7.4: HandshakeType.
let tlsHandshakeClientHello: UInt8 = 1
let tlsHandshakeServerHello: UInt8 = 2
let tlsHandshakeNewSessionTicket: UInt8 = 4
let tlsHandshakeCertificate: UInt8 = 11
let tlsHandshakeServerKeyExchange: UInt8 = 12       // TLS 1.2 only: ProbeTLS's key proof
let tlsHandshakeFinished: UInt8 = 20

// RFC 8446 §4.2: ExtensionType.
let tlsExtensionServerName: UInt16 = 0              // RFC 6066 §3
let tlsExtensionALPN: UInt16 = 16                   // RFC 7301 §3.1
let tlsExtensionSignedCertificateTimestamp: UInt16 = 18  // RFC 6962 §3.3.1: a TLS 1.2 ServerHello, a TLS 1.3 leaf's CertificateEntry
let tlsExtensionSessionTicket: UInt16 = 35          // RFC 5077 §3.2
let tlsExtensionPreSharedKey: UInt16 = 41           // RFC 8446 §4.2.11
let tlsExtensionSupportedVersions: UInt16 = 43      // RFC 8446 §4.2.1
/// RFC 6066 §3: NameType host_name, the only one defined.
let tlsServerNameTypeHostName: UInt8 = 0

let tlsVersion12: UInt16 = 0x0303
let tlsVersion13: UInt16 = 0x0304

/// Why the passive reader gave up on a direction of a tunnel.
public enum TLSReadError: Error, Equatable, Sendable {
    case notTLS                 // first bytes are not a TLS handshake record (e.g. "GET / HTTP/1.1")
    case tooLarge(limit: Int)   // the flight exceeded the reader's byte limit
    case malformed(String)      // contradictory lengths, bad record type, etc. (short reason)
}

extension TLSReadError: CustomStringConvertible {
    public var description: String {
        switch self {
        case .notTLS: return "not TLS"
        case .tooLarge(let limit): return "TLS flight larger than \(limit) bytes"
        case .malformed(let reason): return "malformed TLS: \(reason)"
        }
    }
}

/// What the record layer hands up: more bytes needed, or a value. Malformed input, the third
/// outcome, is thrown (`TLSReadError`), typed so the readers can rethrow it unchanged.
enum RecordRead<T> {
    case needMoreData
    case parsed(T)
}

/// One TLS record.
///
/// RFC 8446 §5.1:
///
///     struct {
///         ContentType type;
///         ProtocolVersion legacy_record_version;
///         uint16 length;
///         opaque fragment[TLSPlaintext.length];
///     } TLSPlaintext;
struct TLSRecord {
    let contentType: UInt8
    /// The whole fragment; empty for application_data, which is handed up at its header (the
    /// readers stop there and nothing in it is read).
    let fragment: [UInt8]
}

/// Reassembles records from pieces of any size, counting every byte it takes against `limit`, and
/// buffering at most one record. It takes from the input only the bytes the current record needs,
/// so the bytes after the record that ends a flight are never looked at.
struct TLSRecordLayer: Sendable {
    let limit: Int
    /// Content types a connection may start with; any other first byte (an SSLv2 header, "G" of
    /// "GET") is `.notTLS`.
    let firstContentTypes: [UInt8]
    /// Bytes taken from the input so far.
    private(set) var consumed = 0
    private var header: [UInt8] = []
    private var fragment: [UInt8] = []
    private var isFirstRecord = true

    init(limit: Int, firstContentTypes: [UInt8]) {
        self.limit = max(0, limit)
        self.firstContentTypes = firstContentTypes
        header.reserveCapacity(tlsRecordHeaderLength)
    }

    /// The next complete record starting at `index` (advanced past what was taken), or
    /// `.needMoreData` once the input is used up.
    mutating func next<C: Collection<UInt8>>(from input: C, at index: inout C.Index) throws(TLSReadError) -> RecordRead<TLSRecord> {
        while header.count < tlsRecordHeaderLength {
            guard index != input.endIndex else { return .needMoreData }
            try take(1)
            header.append(input[index])
            input.formIndex(after: &index)
            try checkHeader()
        }
        let contentType = header[0]
        let length = Int(header[3]) << 8 | Int(header[4])
        if contentType == tlsContentTypeApplicationData { return .parsed(finishRecord()) }
        if fragment.isEmpty { fragment.reserveCapacity(min(length, limit - consumed)) }
        let wanted = min(length - fragment.count, input.distance(from: index, to: input.endIndex))
        if wanted > 0 {
            try take(wanted)
            let end = input.index(index, offsetBy: wanted)
            fragment.append(contentsOf: input[index..<end])
            index = end
        }
        guard fragment.count == length else { return .needMoreData }
        return .parsed(finishRecord())
    }

    /// Counts `count` more bytes against the limit before they are stored.
    private mutating func take(_ count: Int) throws(TLSReadError) {
        guard count <= limit - consumed else { throw .tooLarge(limit: limit) }
        consumed += count
    }

    /// Judges the header byte just added. The first record decides "TLS or not": a wrong content
    /// type or major version there is `.notTLS`; later it is `.malformed`.
    private func checkHeader() throws(TLSReadError) {
        switch header.count {
        case 1:
            let type = header[0]
            if isFirstRecord && !firstContentTypes.contains(type) { throw .notTLS }
            guard (tlsContentTypeChangeCipherSpec...tlsContentTypeApplicationData).contains(type) else {
                throw .malformed("record type \(type)")
            }
        case 2:
            guard header[1] == tlsRecordVersionMajor else {
                if isFirstRecord { throw .notTLS }
                throw .malformed("record version major \(header[1])")
            }
        case tlsRecordHeaderLength:
            let length = Int(header[3]) << 8 | Int(header[4])
            guard length <= tlsMaxRecordLength else { throw .malformed("record of \(length) bytes") }
            // RFC 5246 §6.2.1: no zero-length fragments of handshake, alert or change_cipher_spec.
            guard length > 0 || header[0] == tlsContentTypeApplicationData else {
                throw .malformed("empty record of type \(header[0])")
            }
        default:
            break
        }
    }

    private mutating func finishRecord() -> TLSRecord {
        let record = TLSRecord(contentType: header[0], fragment: fragment)
        header.removeAll(keepingCapacity: true)
        fragment = []
        isFirstRecord = false
        return record
    }
}

/// One handshake message, kept whole (`raw`) for the TLS 1.3 transcript a later reader decrypts with.
///
/// RFC 8446 §4:
///
///     struct {
///         HandshakeType msg_type;    /* handshake type */
///         uint24 length;             /* remaining bytes in message */
///         select (Handshake.msg_type) { ... };
///     } Handshake;
struct HandshakeMessage {
    let type: UInt8
    /// Type, 3-byte length and body.
    let raw: [UInt8]
    var body: ArraySlice<UInt8> { raw[tlsHandshakeHeaderLength...] }
}

/// Handshake messages reassembled across records: one message may span several records and one
/// record may carry several messages (RFC 8446 §5.1).
struct HandshakeReassembler: Sendable {
    private var buffer: [UInt8] = []
    private var start = 0

    /// Bytes not yet read as a message are waiting: a message is incomplete, or one follows in the same
    /// record (a record of another type must not come now).
    var hasPendingBytes: Bool { start < buffer.count }
    /// The type of the message being assembled, as soon as its first byte is here.
    var pendingType: UInt8? { hasPendingBytes ? buffer[start] : nil }

    mutating func append(_ fragment: [UInt8]) {
        if start > 0 {
            buffer.removeFirst(start)
            start = 0
        }
        buffer.append(contentsOf: fragment)
    }

    /// The next complete message, or nil while it is incomplete. `budget` is how many more bytes the
    /// reader may take: a message declaring more than that is `.tooLarge` at once, not after
    /// buffering up to the limit.
    mutating func next(budget: Int, limit: Int) throws(TLSReadError) -> HandshakeMessage? {
        let available = buffer.count - start
        guard available >= tlsHandshakeHeaderLength else { return nil }
        let length = Int(buffer[start + 1]) << 16 | Int(buffer[start + 2]) << 8 | Int(buffer[start + 3])
        let total = tlsHandshakeHeaderLength + length
        guard total - available <= budget else { throw .tooLarge(limit: limit) }
        guard available >= total else { return nil }
        let raw = Array(buffer[start..<start + total])
        start += total
        if start == buffer.count {
            buffer.removeAll(keepingCapacity: true)
            start = 0
        }
        return HandshakeMessage(type: raw[0], raw: raw)
    }
}

/// Reads big-endian fields from a slice. Every read is bounds-checked, and a vector is sliced to
/// its declared length (a new cursor) before anything inside it is read, so a length that
/// contradicts its container is `.malformed`, never a read out of bounds.
struct ByteCursor {
    private(set) var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    var isEmpty: Bool { bytes.isEmpty }

    mutating func uint8(_ field: String) throws(TLSReadError) -> UInt8 {
        guard let byte = bytes.popFirst() else { throw .malformed("truncated \(field)") }
        return byte
    }

    mutating func uint16(_ field: String) throws(TLSReadError) -> UInt16 {
        UInt16(try uint(2, field))
    }

    mutating func uint(_ width: Int, _ field: String) throws(TLSReadError) -> Int {
        var value = 0
        for byte in try take(width, field) { value = value << 8 | Int(byte) }
        return value
    }

    mutating func take(_ count: Int, _ field: String) throws(TLSReadError) -> ArraySlice<UInt8> {
        guard count <= bytes.count else { throw .malformed("truncated \(field)") }
        let taken = bytes.prefix(count)
        bytes = bytes.dropFirst(count)
        return taken
    }

    /// `opaque field<floor..ceiling>`: a `lengthBytes`-byte length, then that many bytes.
    mutating func vector(_ field: String, lengthBytes: Int, _ allowed: ClosedRange<Int>) throws(TLSReadError) -> ByteCursor {
        let length = try uint(lengthBytes, "\(field) length")
        guard allowed.contains(length) else { throw .malformed("\(field) of \(length) bytes") }
        return ByteCursor(try take(length, field))
    }

    /// The end of a struct: bytes left over contradict the enclosing length.
    func expectEnd(_ field: String) throws(TLSReadError) {
        guard bytes.isEmpty else { throw .malformed("\(bytes.count) bytes after \(field)") }
    }
}

/// One extension, its data sliced to its declared length.
///
/// RFC 8446 §4.2:
///
///     struct {
///         ExtensionType extension_type;
///         opaque extension_data<0..2^16-1>;
///     } Extension;
///
/// The list is `Extension extensions<8..2^16-1>` in a ClientHello and `<6..2^16-1>` in a
/// ServerHello, but RFC 5246 §7.4.1.2 lets a TLS ≤ 1.2 hello end before it (no extensions at all),
/// so a hello that ends there gives []. RFC 8446 §4.2: no two extensions of one type.
func readExtensions(_ hello: inout ByteCursor, in message: String) throws(TLSReadError) -> [(type: UInt16, data: ByteCursor)] {
    guard !hello.isEmpty else { return [] }
    var list = try hello.vector("\(message) extensions", lengthBytes: 2, 0...0xFFFF)
    try hello.expectEnd("\(message) extensions")
    var extensions: [(type: UInt16, data: ByteCursor)] = []
    var seen = Set<UInt16>()
    while !list.isEmpty {
        let type = try list.uint16("extension type")
        let data = try list.vector("extension \(type)", lengthBytes: 2, 0...0xFFFF)
        guard seen.insert(type).inserted else { throw .malformed("\(message) repeats extension \(type)") }
        extensions.append((type, data))
    }
    return extensions
}

/// An alert before the handshake completed.
///
/// RFC 8446 §6:
///
///     struct {
///         AlertLevel level;
///         AlertDescription description;
///     } Alert;
func alertError(_ fragment: [UInt8]) -> TLSReadError {
    guard fragment.count >= 2 else { return .malformed("alert of \(fragment.count) byte") }
    let level = fragment[0] == 1 ? "warning" : fragment[0] == 2 ? "fatal" : "level \(fragment[0])"
    let names: [UInt8: String] = [
        0: "close_notify", 10: "unexpected_message", 20: "bad_record_mac", 22: "record_overflow",
        40: "handshake_failure", 42: "bad_certificate", 43: "unsupported_certificate", 44: "certificate_revoked",
        45: "certificate_expired", 46: "certificate_unknown", 47: "illegal_parameter", 48: "unknown_ca",
        49: "access_denied", 50: "decode_error", 51: "decrypt_error", 70: "protocol_version",
        71: "insufficient_security", 80: "internal_error", 86: "inappropriate_fallback", 90: "user_canceled",
        109: "missing_extension", 110: "unsupported_extension", 112: "unrecognized_name",
        116: "certificate_required", 120: "no_application_protocol",
    ]
    return .malformed("alert \(level) \(names[fragment[1]] ?? "description")(\(fragment[1]))")
}
