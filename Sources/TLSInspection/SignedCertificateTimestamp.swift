import COpenSSL
import PinPolicy

// Certificate Transparency's signed certificate timestamps (RFC 6962), read from wherever a server
// delivers them: embedded in the leaf, in the TLS signed_certificate_timestamp extension, or in a
// stapled OCSP response. Judging them (which logs count, how many) is PinPolicy's; this file only
// reads them, and SCTVerification.swift checks their signatures.

/// One SCT as the server delivered it. RFC 6962 §3.2:
///
///     struct {
///         Version sct_version;              /* v1(0) */
///         LogID id;                         /* opaque key_id[32]: SHA-256 of the log's SPKI */
///         uint64 timestamp;                 /* milliseconds since the epoch */
///         CtExtensions extensions;          /* opaque CtExtensions<0..2^16-1> */
///         digitally-signed struct { ... };
///     } SignedCertificateTimestamp;
///
/// and RFC 5246 §4.7's digitally-signed: `SignatureAndHashAlgorithm algorithm; opaque signature<0..2^16-1>`.
public struct SignedCertificateTimestamp: Equatable, Hashable, Sendable {
    public let logID: [UInt8]
    public let timestamp: UInt64
    public let extensions: [UInt8]
    public let hashAlgorithm: UInt8          // RFC 5246 §7.4.1.4.1: sha256(4) is the only one CT logs use
    public let signatureAlgorithm: UInt8     // rsa(1) or ecdsa(3)
    public let signature: [UInt8]
    public let delivery: SCTDelivery

    /// A SignedCertificateTimestampList (RFC 6962 §3.3), strictly:
    ///
    ///     opaque SerializedSCT<1..2^16-1>;
    ///     struct {
    ///         SerializedSCT sct_list <1..2^16-1>;
    ///     } SignedCertificateTimestampList;
    ///
    /// Every SCT must be version 1 (0) and fill its SerializedSCT exactly; any fault refuses the whole
    /// list. (A v2 SCT, RFC 9162, travels in a different extension, so an unknown version here is a
    /// broken list, not a newer one.)
    public static func list(_ bytes: [UInt8], delivery: SCTDelivery) throws(TLSReadError) -> [SignedCertificateTimestamp] {
        var whole = ByteCursor(bytes[...])
        var list = try whole.vector("sct_list", lengthBytes: 2, 1...0xFFFF)
        try whole.expectEnd("SignedCertificateTimestampList")
        var scts: [SignedCertificateTimestamp] = []
        while !list.isEmpty {
            let serialized = try list.vector("SerializedSCT", lengthBytes: 2, 1...0xFFFF)
            scts.append(try read(serialized, delivery: delivery))
        }
        return scts
    }

    static func read(_ serialized: ByteCursor, delivery: SCTDelivery) throws(TLSReadError) -> SignedCertificateTimestamp {
        var sct = serialized
        let version = try sct.uint8("sct_version")
        guard version == 0 else { throw .malformed("SCT version \(version), only v1 (0) is known") }
        let read = SignedCertificateTimestamp(
            logID: Array(try sct.take(32, "SCT log id")),
            timestamp: try sct.take(8, "SCT timestamp").reduce(0) { $0 << 8 | UInt64($1) },
            extensions: Array(try sct.vector("SCT extensions", lengthBytes: 2, 0...0xFFFF).bytes),
            hashAlgorithm: try sct.uint8("SCT hash algorithm"),
            signatureAlgorithm: try sct.uint8("SCT signature algorithm"),
            signature: Array(try sct.vector("SCT signature", lengthBytes: 2, 1...0xFFFF).bytes),
            delivery: delivery)
        try sct.expectEnd("SerializedSCT")
        return read
    }
}

extension Certificate {
    /// The SCTs embedded in this certificate (RFC 6962 §3.3: the X.509v3 extension
    /// 1.3.6.1.4.1.11129.2.4.2, whose value is an OCTET STRING holding the TLS-encoded list);
    /// [] when it has none. Throws when the extension is there but not a well-formed list, or is there
    /// twice.
    public func embeddedSCTs() throws(TLSReadError) -> [SignedCertificateTimestamp] {
        guard let list = try embeddedSCTList() else { return [] }
        return try SignedCertificateTimestamp.list(list, delivery: .embedded)
    }

    /// The extension's TLS-encoded list, unread; nil without the extension.
    func embeddedSCTList() throws(TLSReadError) -> [UInt8]? {
        try Self.sctListExtension(find: { X509_get_ext_by_NID(ref, NID_ct_precert_scts, $0) }, get: { X509_get_ext(ref, $0) })
    }

    /// The TLS-encoded list inside the one extension `find` locates (nil if none), unwrapped from its
    /// inner OCTET STRING.
    static func sctListExtension(find: (Int32) -> Int32, get: (Int32) -> OpaquePointer?) throws(TLSReadError) -> [UInt8]? {
        let index = find(-1)
        guard index >= 0 else { return nil }
        guard find(index) < 0 else { throw .malformed("the SCT list extension appears twice") }
        guard let ext = get(index), let value = X509_EXTENSION_get_data(ext),
              let start = ASN1_STRING_get0_data(value) else { throw .malformed("unreadable SCT list extension") }
        let outer = Array(UnsafeBufferPointer(start: start, count: Int(ASN1_STRING_length(value))))
        guard let inner = derOctetString(outer) else { throw .malformed("SCT list extension is not one OCTET STRING") }
        return inner
    }
}

/// The contents of exactly one DER OCTET STRING filling `bytes`.
func derOctetString(_ bytes: [UInt8]) -> [UInt8]? {
    ERR_clear_error()
    defer { ERR_clear_error() }
    guard let string = decodeDER(bytes, { d2i_ASN1_OCTET_STRING(nil, $0, $1) }, free: ASN1_OCTET_STRING_free) else { return nil }
    defer { ASN1_OCTET_STRING_free(string) }
    guard let data = ASN1_STRING_get0_data(string) else { return [] }
    return Array(UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(string))))
}

// MARK: Stapled OCSP

/// RFC 6066 §8: status_request(5), in a TLS 1.3 leaf's CertificateEntry.
let tlsExtensionStatusRequest: UInt16 = 5

/// The DER OCSPResponse in a CertificateStatus: the body of a TLS 1.2 CertificateStatus handshake
/// message (type 22, `ServerFlightEvent.otherHandshake`, its 4-byte header dropped), or a TLS 1.3
/// leaf's status_request extension (`TLS13VerifiedFlight.leafOCSPStatus`). RFC 6066 §8:
///
///     struct {
///         CertificateStatusType status_type;      /* ocsp(1) */
///         select (status_type) {
///             case ocsp: OCSPResponse;            /* opaque OCSPResponse<1..2^24-1> */
///         } response;
///     } CertificateStatus;
public func stapledOCSPResponse(certificateStatus: [UInt8]) throws(TLSReadError) -> [UInt8] {
    var status = ByteCursor(certificateStatus[...])
    let type = try status.uint8("status_type")
    guard type == 1 else { throw .malformed("CertificateStatus of type \(type), not ocsp(1)") }
    let response = try status.vector("OCSPResponse", lengthBytes: 3, 1...0xFF_FFFF)
    try status.expectEnd("CertificateStatus")
    return Array(response.bytes)
}

extension SignedCertificateTimestamp {
    /// The SCTs a stapled OCSP response carries for `leaf` (RFC 6962 §3.3: the singleExtensions
    /// extension 1.3.6.1.4.1.11129.2.4.5 of the leaf's SingleResponse, an OCTET STRING holding the
    /// TLS-encoded list). [] when the response is not `successful` or has no SingleResponse for the
    /// leaf or no such extension. The response's own signature is not checked: each SCT's signature
    /// covers the leaf itself, so it needs no one to vouch for the envelope.
    public static func stapled(ocspResponse der: [UInt8], leaf: Certificate, issuer: Certificate) throws(TLSReadError) -> [SignedCertificateTimestamp] {
        guard let list = try stapledList(ocspResponse: der, leaf: leaf, issuer: issuer) else { return [] }
        return try SignedCertificateTimestamp.list(list, delivery: .ocsp)
    }

    static func stapledList(ocspResponse der: [UInt8], leaf: Certificate, issuer: Certificate) throws(TLSReadError) -> [UInt8]? {
        ERR_clear_error()
        defer { ERR_clear_error() }
        guard let response = decodeDER(der, { d2i_OCSP_RESPONSE(nil, $0, $1) }, free: OCSP_RESPONSE_free) else {
            throw .malformed("stapled OCSP response is not one DER OCSPResponse")
        }
        defer { OCSP_RESPONSE_free(response) }
        guard OCSP_response_status(response) == OCSP_RESPONSE_STATUS_SUCCESSFUL,
              let basic = OCSP_response_get1_basic(response) else { return nil }
        defer { OCSP_BASICRESP_free(basic) }
        // The CertID as the responder wrote it (SHA-1 is what RFC 6960 responders use); another hash
        // finds nothing, and then there are no SCTs for this leaf.
        guard let id = OCSP_cert_to_id(nil, leaf.ref, issuer.ref) else { return nil }
        defer { OCSP_CERTID_free(id) }
        let index = OCSP_resp_find(basic, id, -1)
        guard index >= 0, let single = OCSP_resp_get0(basic, index) else { return nil }
        return try Certificate.sctListExtension(find: { OCSP_SINGLERESP_get_ext_by_NID(single, NID_ct_cert_scts, $0) },
                                                get: { OCSP_SINGLERESP_get_ext(single, $0) })
    }
}
