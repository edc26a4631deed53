/// The facts of a client's first ClientHello that the stream check judges: the SNI against the
/// CONNECT host, the offered versions, and what the client offers to resume with.
public struct ClientHello: Equatable, Sendable {
    public let legacyVersion: UInt16
    public let random: [UInt8]              // 32 bytes
    public let sessionID: [UInt8]           // 0...32 bytes
    public let serverName: String?          // SNI host_name, as sent (ASCII; nil if no SNI ext)
    public let offeredVersions: [UInt16]    // supported_versions ext, or [legacyVersion] if absent
    public let alpn: [String]
    public let sessionTicket: [UInt8]?      // session_ticket ext (35) data; nil if ext absent; [] if empty
    public let offersPreSharedKey: Bool     // pre_shared_key ext (41) present (TLS 1.3 resumption)
    public let pskIdentities: [[UInt8]]     // pre_shared_key identities (tickets), in order; [] if ext absent
    public let raw: [UInt8]                 // the whole handshake message (type + 3-byte length + body)
}

extension ClientHello {
    /// RFC 8446 §4.1.2 (RFC 5246 §7.4.1.2 is the same shape, and lets the extensions be absent):
    ///
    ///     uint16 ProtocolVersion;
    ///     opaque Random[32];
    ///     uint8 CipherSuite[2];    /* Cryptographic suite selector */
    ///
    ///     struct {
    ///         ProtocolVersion legacy_version = 0x0303;    /* TLS v1.2 */
    ///         Random random;
    ///         opaque legacy_session_id<0..32>;
    ///         CipherSuite cipher_suites<2..2^16-2>;
    ///         opaque legacy_compression_methods<1..2^8-1>;
    ///         Extension extensions<8..2^16-1>;
    ///     } ClientHello;
    init(_ message: HandshakeMessage) throws(TLSReadError) {
        var hello = ByteCursor(message.body)
        legacyVersion = try hello.uint16("ClientHello version")
        random = Array(try hello.take(32, "ClientHello random"))
        sessionID = Array(try hello.vector("ClientHello session_id", lengthBytes: 1, 0...32).bytes)
        let suites = try hello.vector("cipher_suites", lengthBytes: 2, 2...0xFFFE)
        guard suites.bytes.count.isMultiple(of: 2) else { throw .malformed("cipher_suites of \(suites.bytes.count) bytes") }
        _ = try hello.vector("compression_methods", lengthBytes: 1, 1...0xFF)
        let extensions = try readExtensions(&hello, in: "ClientHello")

        var serverName: String?
        var offeredVersions = [legacyVersion]
        var alpn: [String] = []
        var sessionTicket: [UInt8]?
        var offersPreSharedKey = false
        var pskIdentities: [[UInt8]] = []
        for (position, (type, data)) in extensions.enumerated() {
            switch type {
            case tlsExtensionServerName: serverName = try readServerNameList(data)
            case tlsExtensionSupportedVersions: offeredVersions = try readOfferedVersions(data)
            case tlsExtensionALPN: alpn = try readProtocolNameList(data)
            // RFC 5077 §3.2: the extension data is the ticket itself (empty asks for a new one).
            case tlsExtensionSessionTicket: sessionTicket = Array(data.bytes)
            case tlsExtensionPreSharedKey:
                // RFC 8446 §4.2.11: it MUST be the last extension (the binders cover what precedes it).
                guard position == extensions.count - 1 else { throw .malformed("pre_shared_key is not the last extension") }
                offersPreSharedKey = true
                pskIdentities = try readOfferedPsks(data)
            default: break
            }
        }
        self.serverName = serverName
        self.offeredVersions = offeredVersions
        self.alpn = alpn
        self.sessionTicket = sessionTicket
        self.offersPreSharedKey = offersPreSharedKey
        self.pskIdentities = pskIdentities
        raw = message.raw
    }
}

/// The one host_name a client may name. Other name types are refused: none is defined, and an
/// unknown one has no length to skip by (OpenSSL refuses them too).
///
/// RFC 6066 §3:
///
///     struct {
///         NameType name_type;
///         select (name_type) {
///             case host_name: HostName;
///         } name;
///     } ServerName;
///
///     enum {
///         host_name(0), (255)
///     } NameType;
///
///     opaque HostName<1..2^16-1>;
///
///     struct {
///         ServerName server_name_list<1..2^16-1>
///     } ServerNameList;
func readServerNameList(_ extensionData: ByteCursor) throws(TLSReadError) -> String {
    var data = extensionData
    var list = try data.vector("server_name_list", lengthBytes: 2, 1...0xFFFF)
    try data.expectEnd("server_name_list")
    let nameType = try list.uint8("server_name type")
    guard nameType == tlsServerNameTypeHostName else { throw .malformed("server_name type \(nameType)") }
    let hostName = try list.vector("host_name", lengthBytes: 2, 1...0xFFFF)
    // Only one name per type, and host_name is the only type (RFC 6066 §3).
    try list.expectEnd("host_name")
    // Kept exactly as sent: the comparison with the CONNECT host is the caller's. A NUL or a byte
    // above 0x7F would let a name compare differently here and in the server.
    guard hostName.bytes.allSatisfy({ $0 != 0 && $0 < 0x80 }) else { throw .malformed("host_name not printable ASCII") }
    return String(decoding: hostName.bytes, as: UTF8.self)
}

/// RFC 8446 §4.2.1 (in a ClientHello):
///
///     struct {
///         select (Handshake.msg_type) {
///             case client_hello:
///                  ProtocolVersion versions<2..254>;
///             ...
///         };
///     } SupportedVersions;
func readOfferedVersions(_ extensionData: ByteCursor) throws(TLSReadError) -> [UInt16] {
    var data = extensionData
    var list = try data.vector("supported_versions", lengthBytes: 1, 2...254)
    try data.expectEnd("supported_versions")
    guard list.bytes.count.isMultiple(of: 2) else { throw .malformed("supported_versions of \(list.bytes.count) bytes") }
    var versions: [UInt16] = []
    while !list.isEmpty { versions.append(try list.uint16("supported version")) }
    return versions
}

/// RFC 7301 §3.1:
///
///     opaque ProtocolName<1..2^8-1>;
///
///     struct {
///         ProtocolName protocol_name_list<2..2^16-1>
///     } ProtocolNameList;
func readProtocolNameList(_ extensionData: ByteCursor) throws(TLSReadError) -> [String] {
    var data = extensionData
    var list = try data.vector("protocol_name_list", lengthBytes: 2, 2...0xFFFF)
    try data.expectEnd("protocol_name_list")
    var names: [String] = []
    while !list.isEmpty {
        let name = try list.vector("protocol_name", lengthBytes: 1, 1...0xFF)
        names.append(String(decoding: name.bytes, as: UTF8.self))
    }
    return names
}

/// The identities a client offers to resume with (a TLS 1.3 ticket is the identity). The binders
/// are only checked for shape: pinproxy cannot verify them (they need the resumption secret).
///
/// RFC 8446 §4.2.11:
///
///     struct {
///         opaque identity<1..2^16-1>;
///         uint32 obfuscated_ticket_age;
///     } PskIdentity;
///
///     opaque PskBinderEntry<32..255>;
///
///     struct {
///         PskIdentity identities<7..2^16-1>;
///         PskBinderEntry binders<33..2^16-1>;
///     } OfferedPsks;
func readOfferedPsks(_ extensionData: ByteCursor) throws(TLSReadError) -> [[UInt8]] {
    var data = extensionData
    var list = try data.vector("psk identities", lengthBytes: 2, 7...0xFFFF)
    var binders = try data.vector("psk binders", lengthBytes: 2, 33...0xFFFF)
    try data.expectEnd("pre_shared_key")
    var identities: [[UInt8]] = []
    while !list.isEmpty {
        identities.append(Array(try list.vector("psk identity", lengthBytes: 2, 1...0xFFFF).bytes))
        _ = try list.uint(4, "obfuscated_ticket_age")
    }
    var binderCount = 0
    while !binders.isEmpty {
        _ = try binders.vector("psk binder", lengthBytes: 1, 32...255)
        binderCount += 1
    }
    // RFC 8446 §4.2.11: one binder per identity, in the same order.
    guard binderCount == identities.count else {
        throw .malformed("\(identities.count) psk identities with \(binderCount) binders")
    }
    return identities
}
