// The mirror ClientHello (issue 18): pinproxy's own copy of a client's ClientHello, sent on a
// connection of its own at the same moment as the client's, so that an interceptor cannot tell the
// check from the client's connection by its bytes. Byte for byte the client's hello, in the same
// record split, except what must be fresh:
//
// - `random` and `legacy_session_id`: fresh bytes, same lengths;
// - every `key_share` entry: pinproxy's own ephemeral key of the same group and length for X25519,
//   X448, P-256, P-384, P-521 (OpenSSL), ML-KEM-768 and ML-KEM-1024 (swift-crypto) and the hybrids
//   X25519MLKEM768, SecP256r1MLKEM768 and SecP384r1MLKEM1024 (both; MirrorKEM.swift); a GREASE
//   entry (RFC 8701): random bytes of the same length, as clients send it; an FFDHE entry: a real
//   public key of its group whose private key is dropped (pinproxy computes no FFDHE secret). Both
//   are remembered as not computable. An entry of any other group (an unknown or retired
//   post-quantum group, say) is not mirrored at all: random bytes in its place would be refused by
//   a server that checks the share, and would tell an interceptor which connection is the mirror,
//   so `MirrorError.uncomputableShare` says so and no mirror is sent;
// - `pre_shared_key`: identities, obfuscated ticket ages and binders as random bytes of the same
//   lengths (the server cannot resume them, and answers with a full handshake).
//
// Everything else — extension order, GREASE values, padding, early_data, ALPN, SNI, suites — is
// the client's.

// RFC 8446 §4.2: ExtensionType values the mirror rewrites.
let tlsExtensionEarlyData: UInt16 = 42
let tlsExtensionCookie: UInt16 = 44
let tlsExtensionKeyShare: UInt16 = 51

/// Why a mirror hello could not be made. The tunnel's check says so (`verify=probe-only reason=…`).
public enum MirrorError: Error, Equatable, Sendable, CustomStringConvertible {
    case malformedHello(TLSReadError)        // the client's hello (or the server's HelloRetryRequest) does not parse
    case noKeyShare                          // no key_share extension: the client offers no TLS 1.3 handshake
    case framing(String)                     // the client's records do not carry exactly its hello
    case notAfterHelloRetry                  // a second hello asked for, but the server sent no HelloRetryRequest
    case cookieMismatch                      // the client's second hello and the mirror's HelloRetryRequest disagree on a cookie
    case retryGroupDiffers(client: UInt16, mirror: UInt16)  // the two HelloRetryRequests asked for different groups
    case uncomputableShare(UInt16)           // a key share (not GREASE, not FFDHE) in a group pinproxy cannot make a key of

    public var description: String {
        switch self {
        case .malformedHello(let error): return "mirror hello: \(error)"
        case .noKeyShare: return "mirror hello: the ClientHello has no key_share"
        case .framing(let reason): return "mirror hello: \(reason)"
        case .notAfterHelloRetry: return "mirror hello: no HelloRetryRequest to answer"
        case .cookieMismatch: return "mirror hello: cookie in one HelloRetryRequest only"
        case .retryGroupDiffers(let client, let mirror):
            return "mirror hello: the client was asked for group \(hex(client)), the mirror for \(hex(mirror))"
        case .uncomputableShare(let group):
            return "mirror hello: the ClientHello has a key share in group \(hex(group)), which pinproxy cannot compute; a look-alike would give the mirror away, so the mirror is not sent"
        }
    }
}

/// The mirror of one client ClientHello. Made from the client's hello and the records it arrived
/// in; `bytes` is what pinproxy writes on its own connection to the server. Hand it to
/// `MirrorHandshake(hello:)`, which reads the server's answer with its keys.
public struct MirrorHello: Sendable {
    /// The mirror's records, ready to write: the client's record headers (same version, same split)
    /// around the mirror's handshake message, and the client's ChangeCipherSpec where it sent one.
    public let bytes: [UInt8]
    /// The mirror's ClientHello handshake message (type, length, body): its transcript entry.
    public let raw: [UInt8]
    public let random: [UInt8]
    public let sessionID: [UInt8]
    /// Groups whose share is pinproxy's own key, in the hello's order.
    public var computableGroups: [UInt16] { keys.map { $0.group.rawValue } }
    /// Groups whose share pinproxy holds no private key of (GREASE: random bytes; FFDHE: a public
    /// key whose private key was dropped), in the hello's order.
    public let uncomputableGroups: [UInt16]
    /// The private keys of the computable shares (freed with the last copy of this hello).
    let keys: [MirrorKey]

    /// - Parameters:
    ///   - client: the client's first ClientHello (`ClientFlightReader.feed`).
    ///   - records: the client's bytes that carried it: the tunnel's first `bytesConsumed` bytes.
    ///   - tls12: a hello that offers no TLS 1.3 (no key_share) is copied too — for a confirming
    ///     look at what a TLS ≤ 1.2 server shows it, in clear — with its session ticket replaced by
    ///     random bytes of the same length (the server cannot resume it: a full handshake).
    public init(of client: ClientHello, records: some Collection<UInt8>, tls12: Bool = false) throws(MirrorError) {
        let framing = try RecordFraming(records, carrying: client.raw)
        var hello = try HelloFields(client.raw)
        hello.random = randomBytes(hello.random.count)
        hello.sessionID = randomBytes(hello.sessionID.count)
        var keys: [MirrorKey] = []
        var uncomputable: [UInt16] = []
        guard let shares = hello.extensionIndex(tlsExtensionKeyShare) else {
            guard tls12 else { throw .noKeyShare }
            if let ticket = hello.extensionIndex(tlsExtensionSessionTicket), !hello.extensions[ticket].data.isEmpty {
                hello.extensions[ticket].data = randomBytes(hello.extensions[ticket].data.count)
            }
            self.init(hello: hello, framing: framing, keys: [], uncomputable: [])
            return
        }
        hello.extensions[shares].data = try mirrorKeyShares(hello.extensions[shares].data, keys: &keys, uncomputable: &uncomputable)
        if let psk = hello.extensionIndex(tlsExtensionPreSharedKey) {
            hello.extensions[psk].data = try randomOfferedPsks(hello.extensions[psk].data)
        }
        self.init(hello: hello, framing: framing, keys: keys, uncomputable: uncomputable)
    }

    /// The mirror of the client's second ClientHello, after the server sent the mirror
    /// `retry` (a HelloRetryRequest). RFC 8446 §4.1.2: the mirror's first random and session id are
    /// kept; the key shares are fresh (the client's second hello has the one its own retry asked
    /// for); the cookie is the one of the mirror's retry, not the client's; PSK fields random.
    init(secondOf client: ClientHello, records: some Collection<UInt8>, first: MirrorHello, retry: [UInt8]) throws(MirrorError) {
        let framing = try RecordFraming(records, carrying: client.raw)
        var hello = try HelloFields(client.raw)
        guard let shares = hello.extensionIndex(tlsExtensionKeyShare) else { throw .noKeyShare }
        guard hello.random.count == first.random.count, hello.sessionID.count == first.sessionID.count else {
            throw .framing("second ClientHello with another random or session id length")
        }
        hello.random = first.random
        hello.sessionID = first.sessionID
        var keys: [MirrorKey] = []
        var uncomputable: [UInt16] = []
        hello.extensions[shares].data = try mirrorKeyShares(hello.extensions[shares].data, keys: &keys, uncomputable: &uncomputable)
        if let psk = hello.extensionIndex(tlsExtensionPreSharedKey) {
            hello.extensions[psk].data = try randomOfferedPsks(hello.extensions[psk].data)
        }
        let retryFields = try HelloRetryFields(retry)
        let groups = keys.map { $0.group.rawValue } + uncomputable
        if let asked = retryFields.selectedGroup, !groups.contains(asked) {
            throw .retryGroupDiffers(client: groups.first ?? 0, mirror: asked)
        }
        switch (hello.extensionIndex(tlsExtensionCookie), retryFields.cookie) {
        case (nil, nil): break
        case (let index?, let cookie?): hello.extensions[index].data = cookie
        default: throw .cookieMismatch
        }
        self.init(hello: hello, framing: framing, keys: keys, uncomputable: uncomputable)
    }

    /// The second ClientHello a client sends after `retry`, made from the mirror's `first` when the
    /// client's own connection got no HelloRetryRequest (a balancer whose backends prefer other
    /// groups) or there is no client (a confirming look). RFC 8446 §4.1.2: the same hello, but the
    /// key_share holds one fresh share of the group the retry asks for, early_data is gone, the
    /// retry's cookie is echoed, and the PSK fields are fresh (random, as in every mirror). As
    /// OpenSSL, BoringSSL and Go send it: one record, after a ChangeCipherSpec when the first hello
    /// had a session id (middlebox compatibility mode).
    init(answering retry: [UInt8], after first: MirrorHello) throws(MirrorError) {
        var hello = try HelloFields(first.raw)
        let retryFields = try HelloRetryFields(retry)
        guard let shares = hello.extensionIndex(tlsExtensionKeyShare) else { throw .noKeyShare }
        var keys: [MirrorKey] = []
        if let asked = retryFields.selectedGroup {
            // §4.2.8: the group is one the hello offered and had no share for.
            guard first.key(for: asked) == nil, !first.uncomputableGroups.contains(asked) else {
                throw .retryGroupDiffers(client: asked, mirror: asked)
            }
            guard let group = MirrorGroup(rawValue: asked), let key = MirrorKey(group, stock: EphemeralKeyStock.shared) else {
                throw .uncomputableShare(asked)
            }
            let entry = uint16Bytes(Int(asked)) + uint16Bytes(key.publicShare.count) + key.publicShare
            hello.extensions[shares].data = uint16Bytes(entry.count) + entry
            keys = [key]
        } else {
            keys = first.keys  // a retry for a cookie alone keeps the shares (§4.1.4)
        }
        hello.extensions.removeAll { $0.type == tlsExtensionEarlyData }
        hello.extensions.removeAll { $0.type == tlsExtensionCookie }
        if let cookie = retryFields.cookie {
            // pre_shared_key stays the last extension (§4.2.11).
            let at = hello.extensionIndex(tlsExtensionPreSharedKey) ?? hello.extensions.count
            hello.extensions.insert((tlsExtensionCookie, cookie), at: at)
        }
        if let psk = hello.extensionIndex(tlsExtensionPreSharedKey) {
            hello.extensions[psk].data = try randomOfferedPsks(hello.extensions[psk].data)
        }
        raw = hello.serialized()
        var records = first.sessionID.isEmpty ? [] : [tlsContentTypeChangeCipherSpec, 0x03, 0x03, 0x00, 0x01, 0x01]
        var offset = 0
        while offset < raw.count {
            let piece = min(raw.count - offset, 1 << 14)
            records += [tlsContentTypeHandshake, 0x03, 0x03] + uint16Bytes(piece) + raw[offset..<offset + piece]
            offset += piece
        }
        bytes = records
        random = first.random
        sessionID = first.sessionID
        self.keys = keys
        uncomputableGroups = []
    }

    private init(hello: HelloFields, framing: RecordFraming, keys: [MirrorKey], uncomputable: [UInt16]) {
        raw = hello.serialized()
        bytes = framing.frame(raw)
        random = hello.random
        sessionID = hello.sessionID
        self.keys = keys
        uncomputableGroups = uncomputable
    }

    /// The private key of the share for `group`, if the mirror computed one.
    func key(for group: UInt16) -> MirrorKey? { keys.first { $0.group.rawValue == group } }
}

/// The key_share of a ClientHello with every entry made fresh. RFC 8446 §4.2.8:
///
///     struct {
///         NamedGroup group;
///         opaque key_exchange<1..2^16-1>;
///     } KeyShareEntry;
///
///     struct {
///         KeyShareEntry client_shares<0..2^16-1>;
///     } KeyShareClientHello;
private func mirrorKeyShares(_ data: [UInt8], keys: inout [MirrorKey], uncomputable: inout [UInt16]) throws(MirrorError) -> [UInt8] {
    var clientShares: [(group: UInt16, length: Int)] = []
    try parsing { () throws(TLSReadError) in
        var cursor = ByteCursor(data[...])
        var list = try cursor.vector("client_shares", lengthBytes: 2, 0...0xFFFF)
        try cursor.expectEnd("key_share")
        while !list.isEmpty {
            let group = try list.uint16("key share group")
            let length = try list.vector("key_exchange", lengthBytes: 2, 1...0xFFFF).bytes.count
            clientShares.append((group, length))
        }
    }
    var entries: [UInt8] = []
    for (group, length) in clientShares {
        let share: [UInt8]
        if let known = MirrorGroup(rawValue: group) {
            guard known.clientShareLength == length else {
                throw .malformedHello(.malformed("a key share of group \(hex(group)) with \(length) bytes, not \(known.clientShareLength)"))
            }
            guard let key = MirrorKey(known, stock: EphemeralKeyStock.shared) else { throw .uncomputableShare(group) }
            share = key.publicShare
            keys.append(key)
        } else if isGREASE(group) {
            share = randomBytes(length)
            uncomputable.append(group)
        } else if isFFDHE(group) {
            // RFC 7919 §5.1: a server checks an FFDHE share (below the prime, in the prime-order
            // subgroup), which random bytes fail half the time: the share is a real public key
            // of the group, its private key dropped at once.
            share = ffdhePublicShare(group: group, length: length) ?? randomBytes(length)
            uncomputable.append(group)
        } else {
            throw .uncomputableShare(group)
        }
        entries += uint16Bytes(Int(group)) + uint16Bytes(length) + share
    }
    return uint16Bytes(entries.count) + entries
}

/// RFC 8701 §2: GREASE NamedGroups are 0x?A?A with both bytes equal (0x0A0A, 0x1A1A … 0xFAFA).
func isGREASE(_ group: UInt16) -> Bool { group & 0x0F0F == 0x0A0A && group >> 8 == group & 0xFF }

/// RFC 7919 §2: ffdhe2048 … ffdhe8192.
func isFFDHE(_ group: UInt16) -> Bool { (0x0100...0x0104).contains(group) }

/// The pre_shared_key offer with identities, ages and binders replaced by random bytes of the same
/// lengths (RFC 8446 §4.2.11; the structure is quoted at `readOfferedPsks`).
private func randomOfferedPsks(_ data: [UInt8]) throws(MirrorError) -> [UInt8] {
    var identities: [UInt8] = []
    var binders: [UInt8] = []
    try parsing { () throws(TLSReadError) in
        var cursor = ByteCursor(data[...])
        var identityList = try cursor.vector("psk identities", lengthBytes: 2, 7...0xFFFF)
        var binderList = try cursor.vector("psk binders", lengthBytes: 2, 33...0xFFFF)
        try cursor.expectEnd("pre_shared_key")
        while !identityList.isEmpty {
            let length = try identityList.vector("psk identity", lengthBytes: 2, 1...0xFFFF).bytes.count
            _ = try identityList.take(4, "obfuscated_ticket_age")
            identities += uint16Bytes(length) + randomBytes(length + 4)
        }
        while !binderList.isEmpty {
            let length = try binderList.vector("psk binder", lengthBytes: 1, 32...255).bytes.count
            binders += [UInt8(length)] + randomBytes(length)
        }
    }
    return uint16Bytes(identities.count) + identities + uint16Bytes(binders.count) + binders
}

private func parsing(_ body: () throws(TLSReadError) -> Void) throws(MirrorError) {
    do throws(TLSReadError) { try body() } catch { throw .malformedHello(error) }
}

func uint16Bytes(_ value: Int) -> [UInt8] { [UInt8(truncatingIfNeeded: value >> 8), UInt8(truncatingIfNeeded: value)] }

/// A ClientHello cut into the fields the mirror changes and the ones it keeps; `serialized()` of
/// an unchanged one gives back the message exactly (every length is recomputed from its content,
/// and the content is the client's).
private struct HelloFields {
    var legacyVersion: [UInt8]
    var random: [UInt8]
    var sessionID: [UInt8]
    /// cipher_suites and legacy_compression_methods with their lengths, as sent.
    let suitesAndCompression: [UInt8]
    var extensions: [(type: UInt16, data: [UInt8])]
    /// A TLS ≤ 1.2 hello may end without an extensions block (RFC 5246 §7.4.1.2).
    let hasExtensionBlock: Bool

    /// The structure is quoted at `ClientHello.init`.
    init(_ raw: [UInt8]) throws(MirrorError) {
        guard raw.count >= tlsHandshakeHeaderLength, raw[0] == tlsHandshakeClientHello else {
            throw .malformedHello(.malformed("not a ClientHello"))
        }
        var legacyVersion: [UInt8] = [], random: [UInt8] = [], sessionID: [UInt8] = [], suites: [UInt8] = []
        var extensions: [(type: UInt16, data: [UInt8])] = []
        var hasExtensionBlock = false
        try parsing { () throws(TLSReadError) in
            var hello = ByteCursor(raw[tlsHandshakeHeaderLength...])
            legacyVersion = Array(try hello.take(2, "ClientHello version"))
            random = Array(try hello.take(32, "ClientHello random"))
            sessionID = Array(try hello.vector("ClientHello session_id", lengthBytes: 1, 0...32).bytes)
            let suitesStart = hello.bytes.startIndex
            _ = try hello.vector("cipher_suites", lengthBytes: 2, 2...0xFFFE)
            _ = try hello.vector("compression_methods", lengthBytes: 1, 1...0xFF)
            suites = Array(raw[suitesStart..<hello.bytes.startIndex])
            hasExtensionBlock = !hello.isEmpty
            extensions = try readExtensions(&hello, in: "ClientHello").map { ($0.type, Array($0.data.bytes)) }
        }
        self.legacyVersion = legacyVersion
        self.random = random
        self.sessionID = sessionID
        suitesAndCompression = suites
        self.extensions = extensions
        self.hasExtensionBlock = hasExtensionBlock
        guard serialized() == raw else { throw .malformedHello(.malformed("ClientHello with bytes after its length")) }
    }

    func extensionIndex(_ type: UInt16) -> Int? { extensions.firstIndex { $0.type == type } }

    func serialized() -> [UInt8] {
        var body = legacyVersion + random + [UInt8(sessionID.count)] + sessionID + suitesAndCompression
        if hasExtensionBlock {
            let block = extensions.flatMap { uint16Bytes(Int($0.type)) + uint16Bytes($0.data.count) + $0.data }
            body += uint16Bytes(block.count) + block
        }
        let length = body.count
        return [tlsHandshakeClientHello, UInt8(truncatingIfNeeded: length >> 16), UInt8(truncatingIfNeeded: length >> 8), UInt8(truncatingIfNeeded: length)] + body
    }
}

/// What the mirror needs of its HelloRetryRequest: the group it asks a share for and its cookie.
/// RFC 8446 §4.2.8 and §4.2.2:
///
///     struct {
///         NamedGroup selected_group;
///     } KeyShareHelloRetryRequest;
///
///     struct {
///         opaque cookie<1..2^16-1>;
///     } Cookie;
struct HelloRetryFields {
    let selectedGroup: UInt16?
    /// The cookie extension's whole data (length included), as a second ClientHello echoes it.
    let cookie: [UInt8]?

    init(_ raw: [UInt8]) throws(MirrorError) {
        var group: UInt16?
        var cookie: [UInt8]?
        try parsing { () throws(TLSReadError) in
            guard raw.count >= tlsHandshakeHeaderLength else { throw .malformed("truncated HelloRetryRequest") }
            var hello = ByteCursor(raw[tlsHandshakeHeaderLength...])
            _ = try hello.take(2 + 32, "HelloRetryRequest version and random")
            _ = try hello.vector("HelloRetryRequest session_id", lengthBytes: 1, 0...32)
            _ = try hello.take(3, "HelloRetryRequest suite and compression")
            for (type, data) in try readExtensions(&hello, in: "HelloRetryRequest") {
                var data = data
                switch type {
                case tlsExtensionKeyShare:
                    group = try data.uint16("selected_group")
                    try data.expectEnd("selected_group")
                case tlsExtensionCookie:
                    cookie = Array(data.bytes)
                    _ = try data.vector("cookie", lengthBytes: 2, 1...0xFFFF)
                    try data.expectEnd("cookie")
                default: break
                }
            }
        }
        selectedGroup = group
        self.cookie = cookie
    }
}

/// The record split of a client's hello: the mirror is sent in records with the same headers (the
/// same record version, the same fragment lengths), and a ChangeCipherSpec the client sent before
/// its second hello is sent at the same place.
private struct RecordFraming {
    private enum Record {
        case handshake(header: [UInt8], length: Int)
        case verbatim([UInt8])
    }

    private var records: [Record] = []

    /// `bytes` must be whole records: handshake records whose fragments are exactly `hello`, and
    /// at most ChangeCipherSpec records besides.
    init(_ bytes: some Collection<UInt8>, carrying hello: [UInt8]) throws(MirrorError) {
        let bytes = Array(bytes)
        var fragments: [UInt8] = []
        var index = 0
        while index < bytes.count {
            guard bytes.count - index >= tlsRecordHeaderLength else { throw .framing("a partial record header") }
            let header = Array(bytes[index..<index + tlsRecordHeaderLength])
            let length = Int(header[3]) << 8 | Int(header[4])
            let end = index + tlsRecordHeaderLength + length
            guard end <= bytes.count else { throw .framing("a partial record") }
            switch header[0] {
            case tlsContentTypeHandshake:
                records.append(.handshake(header: header, length: length))
                fragments += bytes[index + tlsRecordHeaderLength..<end]
            case tlsContentTypeChangeCipherSpec:
                records.append(.verbatim(Array(bytes[index..<end])))
            default:
                throw .framing("a record of type \(header[0]) around the ClientHello")
            }
            index = end
        }
        guard fragments == hello else { throw .framing("the records do not carry exactly the ClientHello") }
    }

    /// `message` in the client's records. A second hello may differ in length (its cookie): the
    /// last handshake record takes the difference (split further at the 2^14 record limit).
    func frame(_ message: [UInt8]) -> [UInt8] {
        let lastHandshake = records.lastIndex { if case .handshake = $0 { return true } else { return false } }
        var out: [UInt8] = []
        var offset = 0
        for (position, record) in records.enumerated() {
            switch record {
            case .verbatim(let bytes):
                out += bytes
            case .handshake(let header, let length):
                var take = position == lastHandshake ? message.count - offset : min(length, message.count - offset)
                while take > 0 {
                    let piece = min(take, 1 << 14)
                    out += header[0..<3] + uint16Bytes(piece) + message[offset..<offset + piece]
                    offset += piece
                    take -= piece
                }
            }
        }
        return out
    }
}
