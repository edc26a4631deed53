import COpenSSL
import PinPolicy

// Checks an SCT's signature with its log's key (RFC 6962 §3.2), with EVP directly rather than
// OpenSSL's CT module: `CTLOG_STORE` takes logs only from a file (no call adds one from memory),
// `SCT_validate` answers in OpenSSL's own status codes, and `o2i_SCT_LIST` keeps SCTs of unknown
// version as opaque blobs. Here the list is read strictly (SignedCertificateTimestamp.list), each
// SCT's signed bytes are built below from the RFC, and the answer is one Bool per SCT.

/// A CT log's public key, from the DER SubjectPublicKeyInfo a log list carries (its `key`): owns
/// one `EVP_PKEY`.
public final class CTLogKey {
    let key: OpaquePointer
    /// RFC 6962 §3.2: the log's id is the SHA-256 of its DER SPKI.
    public let logID: [UInt8]

    /// nil unless `spki` is exactly one DER SubjectPublicKeyInfo of an RSA or EC key (the two kinds
    /// RFC 6962 §2.1.4 allows a log).
    public init?(spki: [UInt8]) {
        ERR_clear_error()
        defer { ERR_clear_error() }
        guard let parsed = decodeDER(spki, { d2i_PUBKEY(nil, $0, $1) }, free: EVP_PKEY_free) else { return nil }
        let type = EVP_PKEY_get_base_id(parsed)
        guard type == EVP_PKEY_EC || type == EVP_PKEY_RSA else { EVP_PKEY_free(parsed); return nil }
        key = parsed
        logID = sha256(spki)
    }

    deinit { EVP_PKEY_free(key) }

    /// RFC 5246 §7.4.1.4.1's SignatureAlgorithm this key signs with: rsa(1) or ecdsa(3).
    var signatureAlgorithm: UInt8 { EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA ? 1 : 3 }

    /// Whether `signature` is this key's SHA-256 signature of `message`.
    func verifies(_ signature: [UInt8], over message: [UInt8]) -> Bool {
        ERR_clear_error()
        defer { ERR_clear_error() }
        guard let context = EVP_MD_CTX_new() else { return false }
        defer { EVP_MD_CTX_free(context) }
        guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
        return EVP_DigestVerify(context, signature, signature.count, message, message.count) == 1
    }
}

/// What the CT policy takes about one SCT: whose it is, when, how it came, and whether its signature
/// holds over the right entry for this certificate.
public struct CheckedSCT: Equatable, Hashable, Sendable {
    public let logID: [UInt8]
    public let timestamp: UInt64             // milliseconds since the epoch
    public let delivery: SCTDelivery
    /// false also when no key was given for its log, or its algorithm is not SHA-256 with the log
    /// key's kind.
    public let verified: Bool
}

/// The entry a log signed for one leaf (RFC 6962 §3.2 `signed_entry`), built once per leaf.
public struct SCTEntries {
    /// `ASN.1Cert` entry (x509_entry(0)): for SCTs delivered by TLS extension or OCSP.
    let x509: [UInt8]?
    /// `PreCert` entry (precert_entry(1)): for embedded SCTs; nil without the issuer.
    let precertificate: [UInt8]?

    /// leaf: the certificate the SCTs are for; issuer: the certificate that signed it (its key's hash
    /// is in the precertificate entry; embedded SCTs cannot verify without it).
    public init(leaf: Certificate, issuer: Certificate?) {
        x509 = Self.vector24(leaf.der)
        precertificate = issuer.flatMap { issuer in
            leaf.tbsWithoutSCTList().flatMap { tbs in Self.vector24(tbs).map { sha256(issuer.spkiDER) + $0 } }
        }
    }

    /// `opaque <1..2^24-1>`.
    static func vector24(_ bytes: [UInt8]) -> [UInt8]? {
        guard !bytes.isEmpty, bytes.count <= 0xFF_FFFF else { return nil }
        return [UInt8(bytes.count >> 16 & 0xFF), UInt8(bytes.count >> 8 & 0xFF), UInt8(bytes.count & 0xFF)] + bytes
    }

    /// RFC 6962 §3.2, the bytes the log's digitally-signed covers:
    ///
    ///     digitally-signed struct {
    ///         Version sct_version;                      /* v1(0) */
    ///         SignatureType signature_type = certificate_timestamp;   /* 0 */
    ///         uint64 timestamp;
    ///         LogEntryType entry_type;                  /* x509_entry(0), precert_entry(1) */
    ///         select(entry_type) {
    ///             case x509_entry: ASN.1Cert;
    ///             case precert_entry: PreCert;          /* issuer_key_hash[32], TBSCertificate<1..2^24-1> */
    ///         } signed_entry;
    ///         CtExtensions extensions;
    ///     };
    func signedBytes(of sct: SignedCertificateTimestamp) -> [UInt8]? {
        let (type, entry): (UInt8, [UInt8]?) = sct.delivery == .embedded ? (1, precertificate) : (0, x509)
        guard let entry, sct.extensions.count <= 0xFFFF else { return nil }
        let timestamp = (0..<8).reversed().map { UInt8(truncatingIfNeeded: sct.timestamp >> (8 * UInt64($0))) }
        let extensionsLength = [UInt8(sct.extensions.count >> 8), UInt8(sct.extensions.count & 0xFF)]
        return [0, 0] + timestamp + [0, type] + entry + extensionsLength + sct.extensions
    }

    /// Each SCT with whether its log's key (found by its log id among `keys`) signed this leaf's entry.
    public func check(_ scts: [SignedCertificateTimestamp], keys: [CTLogKey]) -> [CheckedSCT] {
        scts.map { sct in
            let key = keys.first { $0.logID == sct.logID }
            let verified = key.map { key in
                sct.hashAlgorithm == 4 && sct.signatureAlgorithm == key.signatureAlgorithm
                    && signedBytes(of: sct).map { key.verifies(sct.signature, over: $0) } == true
            } ?? false
            return CheckedSCT(logID: sct.logID, timestamp: sct.timestamp, delivery: sct.delivery, verified: verified)
        }
    }
}

extension Certificate {
    /// RFC 6962 §3.2's precertificate TBSCertificate as the final certificate implies it: this
    /// certificate's TBSCertificate, re-encoded without the SCT list extension. nil if it has no
    /// such extension, or several.
    func tbsWithoutSCTList() -> [UInt8]? {
        ERR_clear_error()
        defer { ERR_clear_error() }
        guard let copy = X509_dup(ref) else { return nil }
        defer { X509_free(copy) }
        let index = X509_get_ext_by_NID(copy, NID_ct_precert_scts, -1)
        guard index >= 0, X509_get_ext_by_NID(copy, NID_ct_precert_scts, index) < 0,
              let removed = X509_delete_ext(copy, index) else { return nil }
        X509_EXTENSION_free(removed)
        // i2d_re_X509_tbs encodes afresh (i2d_X509_tbs would return the cached original bytes).
        return derBytes { i2d_re_X509_tbs(copy, $0) }
    }
}
