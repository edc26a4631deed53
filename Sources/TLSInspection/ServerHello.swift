/// The server's answer to a ClientHello: which version it chose (TLS ≤ 1.2 keeps its Certificate
/// in plaintext, TLS 1.3 does not) and, for TLS 1.2 resumption, the session id it echoes.
public struct ServerHello: Equatable, Sendable {
    public let version: UInt16              // negotiated: supported_versions ext if present, else legacy_version
    public let random: [UInt8]
    public let sessionID: [UInt8]
    public let cipherSuite: UInt16
    public let isHelloRetryRequest: Bool    // RFC 8446 §4.1.3 special random
    /// TLS 1.3 resumption: which of the ClientHello's pre_shared_key identities the server accepted.
    public let selectedIdentity: UInt16?
    /// TLS ≤ 1.2: the signed_certificate_timestamp extension (RFC 6962 §3.3.1), a
    /// SignedCertificateTimestampList, unread (`SignedCertificateTimestamp.list`).
    public let sctList: [UInt8]?
    public let raw: [UInt8]
}

/// RFC 8446 §4.1.3: a HelloRetryRequest is a ServerHello whose random is SHA-256("HelloRetryRequest").
let helloRetryRequestRandom: [UInt8] = [
    0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91,
    0xC2, 0xA2, 0x11, 0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
]

extension ServerHello {
    /// RFC 8446 §4.1.3 (RFC 5246 §7.4.1.3 is the same shape, and lets the extensions be absent):
    ///
    ///     struct {
    ///         ProtocolVersion legacy_version = 0x0303;    /* TLS v1.2 */
    ///         Random random;
    ///         opaque legacy_session_id_echo<0..32>;
    ///         CipherSuite cipher_suite;
    ///         uint8 legacy_compression_method = 0;
    ///         Extension extensions<6..2^16-1>;
    ///     } ServerHello;
    init(_ message: HandshakeMessage) throws(TLSReadError) {
        var hello = ByteCursor(message.body)
        let legacyVersion = try hello.uint16("ServerHello version")
        random = Array(try hello.take(32, "ServerHello random"))
        sessionID = Array(try hello.vector("ServerHello session_id", lengthBytes: 1, 0...32).bytes)
        cipherSuite = try hello.uint16("cipher_suite")
        _ = try hello.uint8("compression_method")
        var version = legacyVersion
        var selectedIdentity: UInt16?
        var sctList: [UInt8]?
        for (type, data) in try readExtensions(&hello, in: "ServerHello") {
            switch type {
            case tlsExtensionSupportedVersions: version = try readSelectedVersion(data)
            case tlsExtensionPreSharedKey:
                // RFC 8446 §4.2.11: in a ServerHello, `uint16 selected_identity`.
                var selected = data
                selectedIdentity = try selected.uint16("selected_identity")
                try selected.expectEnd("selected_identity")
            case tlsExtensionSignedCertificateTimestamp: sctList = Array(data.bytes)
            default: break
            }
        }
        self.version = version
        self.selectedIdentity = selectedIdentity
        self.sctList = sctList
        isHelloRetryRequest = random == helloRetryRequestRandom
        raw = message.raw
    }
}

/// RFC 8446 §4.2.1 (in a ServerHello or HelloRetryRequest):
///
///     struct {
///         select (Handshake.msg_type) {
///             ...
///             case server_hello: /* and HelloRetryRequest */
///                  ProtocolVersion selected_version;
///         };
///     } SupportedVersions;
func readSelectedVersion(_ extensionData: ByteCursor) throws(TLSReadError) -> UInt16 {
    var data = extensionData
    let version = try data.uint16("selected_version")
    try data.expectEnd("selected_version")
    return version
}
