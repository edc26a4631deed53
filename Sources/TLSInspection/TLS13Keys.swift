import COpenSSL
import Foundation

// TLS 1.3 record protection from one traffic secret (RFC 8446 §7): the key schedule's last step
// (HKDF-Expand-Label → key, iv, finished key) and the AEAD that opens a record with them. Only the
// reading side: pinproxy never encrypts, and never sees a secret other than the one the client's
// key log hands over. Every derived byte lives in `SecretBytes`; temporaries are wiped.

/// Why a TLS 1.3 flight was not accepted. No case carries secret material: the texts name
/// structure (types, lengths, schemes), never bytes derived from a key.
public enum TLS13FlightError: Error, Equatable, Sendable, CustomStringConvertible {
    case unsupportedSuite(UInt16)      // only 0x1301, 0x1302, 0x1303
    case undecryptable                 // a record does not open under the given secret (wrong secret, or tampered)
    case malformed(String)             // flight does not parse
    case tooLarge                      // over the limit
    case certificateVerifyFailed(String)
    case finishedMismatch

    public var description: String {
        switch self {
        case .unsupportedSuite(let suite): return "unsupported TLS 1.3 cipher suite \(hex(suite))"
        case .undecryptable: return "a TLS 1.3 record does not open under the key log's secret"
        case .malformed(let reason): return "malformed TLS 1.3 flight: \(reason)"
        case .tooLarge: return "TLS 1.3 flight over the size limit"
        case .certificateVerifyFailed(let reason): return "CertificateVerify failed: \(reason)"
        case .finishedMismatch: return "the server's Finished does not match the transcript"
        }
    }
}

extension TLSReadError {
    /// The passive reader's structural complaint, as a flight error.
    var flightError: TLS13FlightError {
        switch self {
        case .tooLarge: return .tooLarge
        case .notTLS: return .malformed("not TLS")
        case .malformed(let reason): return .malformed(reason)
        }
    }
}

/// The three TLS 1.3 cipher suites OpenSSL 3.0 offers by default (RFC 8446 §B.4); the CCM ones
/// are not negotiated by any client pinproxy serves.
struct TLS13Suite: Sendable, Equatable {
    let id: UInt16
    let keyLength: Int
    let hashLength: Int

    static let tagLength = 16
    static let ivLength = 12

    init(_ id: UInt16) throws(TLS13FlightError) {
        switch id {
        case 0x1301: (keyLength, hashLength) = (16, 32)   // TLS_AES_128_GCM_SHA256
        case 0x1302: (keyLength, hashLength) = (32, 48)   // TLS_AES_256_GCM_SHA384
        case 0x1303: (keyLength, hashLength) = (32, 32)   // TLS_CHACHA20_POLY1305_SHA256
        default: throw .unsupportedSuite(id)
        }
        self.id = id
    }

    /// The suite's transcript hash (and HKDF hash).
    var digest: OpaquePointer { hashLength == 48 ? EVP_sha384() : EVP_sha256() }

    /// The same hash by OpenSSL's name, for the fetched HKDF and HMAC.
    var digestName: String { hashLength == 48 ? "SHA384" : "SHA256" }

    var cipher: OpaquePointer {
        switch id {
        case 0x1301: return EVP_aes_128_gcm()
        case 0x1302: return EVP_aes_256_gcm()
        default: return EVP_chacha20_poly1305()
        }
    }

    /// Transcript-Hash(M1 || M2 || … ) (RFC 8446 §4.4.1) over whole handshake messages.
    func hash(_ messages: [[UInt8]]) -> [UInt8] {
        let context = EVP_MD_CTX_new()!
        defer { EVP_MD_CTX_free(context) }
        var ok = EVP_DigestInit_ex(context, digest, nil) == 1
        for message in messages where ok {
            ok = message.withUnsafeBytes { EVP_DigestUpdate(context, $0.baseAddress, $0.count) } == 1
        }
        var out = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var length: UInt32 = 0
        ok = ok && EVP_DigestFinal_ex(context, &out, &length) == 1
        precondition(ok && Int(length) == hashLength, "EVP digest failed")
        return Array(out.prefix(hashLength))
    }
}

/// HKDF-Expand-Label (RFC 8446 §7.1) through OpenSSL's HKDF in expand-only mode:
///
///     HKDF-Expand-Label(Secret, Label, Context, Length) = HKDF-Expand(Secret, HkdfLabel, Length)
///
///     struct {
///         uint16 length = Length;
///         opaque label<7..255> = "tls13 " + Label;
///         opaque context<0..255> = Context;
///     } HkdfLabel;
func hkdfExpandLabel(_ secret: SecretBytes, _ label: String, context: [UInt8] = [], length: Int, suite: TLS13Suite) -> SecretBytes {
    let fullLabel = Array(("tls13 " + label).utf8)
    let info = [UInt8(length >> 8), UInt8(length & 0xFF), UInt8(fullLabel.count)] + fullLabel + [UInt8(context.count)] + context
    return secret.withUnsafeBytes { key in
        info.withUnsafeBytes { info in hkdf(EVP_KDF_HKDF_MODE_EXPAND_ONLY, suite: suite, key: key, info: info, length: length) }
    }
}

/// HKDF-Extract(salt, IKM) (RFC 5869 §2.2) through OpenSSL's HKDF in extract-only mode.
func hkdfExtract(salt: SecretBytes, ikm: SecretBytes, suite: TLS13Suite) -> SecretBytes {
    salt.withUnsafeBytes { salt in
        ikm.withUnsafeBytes { ikm in hkdf(EVP_KDF_HKDF_MODE_EXTRACT_ONLY, suite: suite, key: ikm, salt: salt, length: suite.hashLength) }
    }
}

/// One HKDF step with the suite's hash: either mode over well-formed inputs cannot fail short of
/// OpenSSL being broken.
private func hkdf(_ mode: Int32, suite: TLS13Suite, key: UnsafeRawBufferPointer, salt: UnsafeRawBufferPointer? = nil,
                  info: UnsafeRawBufferPointer? = nil, length: Int) -> SecretBytes {
    var derived = false
    let output = SecretBytes(count: length) { out in
        derived = pinproxy_hkdf(Fetched.algorithms.hkdf, mode, suite.digestName,
                                key.bytes, key.count, salt?.bytes, salt?.count ?? 0, info?.bytes, info?.count ?? 0,
                                out.baseAddress?.assumingMemoryBound(to: UInt8.self), out.count) == 1
    }
    precondition(derived, "HKDF failed")
    OpenSSLError.clear()
    return output
}

/// HMAC(key, data) with the suite's hash (RFC 2104), into `out` (at least the hash's length).
func hmac(key: SecretBytes, data: [UInt8], suite: TLS13Suite, into out: inout [UInt8]) {
    var length = 0
    let computed = key.withUnsafeBytes { key in
        pinproxy_hmac(Fetched.algorithms.hmac, suite.digestName, key.bytes, key.count, data, data.count, &out, out.count, &length) == 1
    }
    precondition(computed && length == suite.hashLength, "HMAC failed")
    OpenSSLError.clear()
}

/// The KDF and MAC the key schedule uses on every flight, fetched from OpenSSL once per process:
/// OpenSSL 3.0 searches its locked method store each time a context is made from a name or a
/// legacy id (an HKDF step cost about 5 µs that way, 1 µs with the fetched KDF, the digest still
/// named per step; a mirror flight takes seven). Fetched algorithms are immutable and may be used
/// by any number of threads.
final class Fetched: @unchecked Sendable {
    static let algorithms = Fetched()

    let hkdf: OpaquePointer
    let hmac: OpaquePointer

    private init() {
        guard let hkdf = EVP_KDF_fetch(nil, "HKDF", nil), let hmac = EVP_MAC_fetch(nil, "HMAC", nil) else {
            preconditionFailure("OpenSSL's default provider has no HKDF or HMAC")
        }
        self.hkdf = hkdf
        self.hmac = hmac
    }
}

private extension UnsafeRawBufferPointer {
    var bytes: UnsafePointer<UInt8>? { baseAddress?.assumingMemoryBound(to: UInt8.self) }
}

/// The read side of one direction's record protection (RFC 8446 §5.2, §5.3): the key and iv
/// derived from a traffic secret, and the sequence number of the next record. A value: copies
/// share the immutable key material, each counts its own records.
struct TLS13RecordOpener: Sendable {
    let suite: TLS13Suite
    private let key: SecretBytes
    private let iv: SecretBytes
    private(set) var sequence: UInt64 = 0

    /// RFC 8446 §7.3: [sender]_write_key = HKDF-Expand-Label(Secret, "key", "", key_length),
    /// [sender]_write_iv = HKDF-Expand-Label(Secret, "iv", "", iv_length). A secret of another
    /// length than the suite's hash is not this suite's secret: `.undecryptable`.
    init(suite: TLS13Suite, trafficSecret: SecretBytes) throws(TLS13FlightError) {
        guard trafficSecret.count == suite.hashLength else { throw .undecryptable }
        self.suite = suite
        key = hkdfExpandLabel(trafficSecret, "key", length: suite.keyLength, suite: suite)
        iv = hkdfExpandLabel(trafficSecret, "iv", length: TLS13Suite.ivLength, suite: suite)
    }

    /// For the RFC 8448 test: the derived key and iv equal the published ones.
    func keyMatches(_ expected: [UInt8]) -> Bool { expected.withUnsafeBytes { key.matches(SecretBytes(copying: $0)) } }
    func ivMatches(_ expected: [UInt8]) -> Bool { expected.withUnsafeBytes { iv.matches(SecretBytes(copying: $0)) } }

    /// What one record held.
    struct Inner {
        /// The real content type from the end of TLSInnerPlaintext.
        let contentType: UInt8
        /// The content without padding; always empty for application_data, whose plaintext is
        /// wiped unread.
        let content: [UInt8]
    }

    /// Opens the next record: `header` is its 5 bytes (the AEAD's additional data), `body` the
    /// encrypted_record. RFC 8446 §5.2:
    ///
    ///     struct {
    ///         opaque content[TLSPlaintext.length];
    ///         ContentType type;
    ///         uint8 zeros[length_of_padding];
    ///     } TLSInnerPlaintext;
    ///
    /// The nonce is the iv XOR the 64-bit sequence number, left-padded to the iv's length (§5.3).
    mutating func open(header: [UInt8], body: [UInt8]) throws(TLS13FlightError) -> Inner {
        // The tag and at least the content type byte.
        guard body.count > TLS13Suite.tagLength else { throw .undecryptable }
        let plaintextLength = body.count - TLS13Suite.tagLength
        // RFC 8446 §5.2: TLSInnerPlaintext is at most 2^14 + 1 bytes.
        guard plaintextLength <= (1 << 14) + 1 else { throw .malformed("inner plaintext of \(plaintextLength) bytes") }
        let plaintext = UnsafeMutableRawBufferPointer.allocate(byteCount: plaintextLength, alignment: 16)
        defer {
            explicit_bzero(plaintext.baseAddress!, plaintext.count)
            plaintext.deallocate()
        }
        guard decrypt(header: header, body: body, into: plaintext) else { throw .undecryptable }
        sequence += 1
        guard let typeIndex = plaintext.lastIndex(where: { $0 != 0 }) else {
            throw .malformed("record without a content type")
        }
        let contentType = plaintext[typeIndex]
        let content = contentType == tlsContentTypeApplicationData ? [] : Array(plaintext[..<typeIndex])
        return Inner(contentType: contentType, content: content)
    }

    private func decrypt(header: [UInt8], body: [UInt8], into plaintext: UnsafeMutableRawBufferPointer) -> Bool {
        guard let context = EVP_CIPHER_CTX_new() else { return false }
        defer {
            EVP_CIPHER_CTX_free(context)  // cleanses the expanded key
            OpenSSLError.clear()
        }
        let nonce = UnsafeMutableRawBufferPointer.allocate(byteCount: TLS13Suite.ivLength, alignment: 16)
        defer {
            explicit_bzero(nonce.baseAddress!, nonce.count)
            nonce.deallocate()
        }
        iv.withUnsafeBytes { nonce.copyMemory(from: $0) }
        for index in 0..<8 {
            nonce[TLS13Suite.ivLength - 1 - index] ^= UInt8(truncatingIfNeeded: sequence >> (8 * UInt64(index)))
        }
        let ciphertextLength = body.count - TLS13Suite.tagLength
        var written: Int32 = 0
        var finalWritten: Int32 = 0
        return key.withUnsafeBytes { key in
            body.withUnsafeBufferPointer { body in
                let nonceBytes = nonce.baseAddress!.assumingMemoryBound(to: UInt8.self)
                let keyBytes = key.baseAddress!.assumingMemoryBound(to: UInt8.self)
                let out = plaintext.baseAddress!.assumingMemoryBound(to: UInt8.self)
                let tag = UnsafeMutableRawPointer(mutating: body.baseAddress! + ciphertextLength)
                return EVP_DecryptInit_ex(context, suite.cipher, nil, keyBytes, nonceBytes) == 1
                    && EVP_DecryptUpdate(context, nil, &written, header, Int32(header.count)) == 1
                    && EVP_DecryptUpdate(context, out, &written, body.baseAddress, Int32(ciphertextLength)) == 1
                    && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_SET_TAG, Int32(TLS13Suite.tagLength), tag) == 1
                    && EVP_DecryptFinal_ex(context, out + Int(written), &finalWritten) == 1
                    && Int(written + finalWritten) == ciphertextLength
            }
        }
    }
}

/// Splits the server's bytes after the ServerHello into whole TLS 1.3 records, in whatever pieces
/// they arrive, counting every byte against `limit`. A compatibility ChangeCipherSpec (RFC 8446
/// §5, Appendix D.4) is dropped where the handshake allows one; every other record must be
/// application_data (the outer type of every protected record).
struct TLS13RecordSplitter: Sendable {
    struct Record: Sendable {
        let header: [UInt8]
        let body: [UInt8]
        /// Offset just past this record in the fed stream.
        let end: Int
    }

    let limit: Int
    let allowsChangeCipherSpec: Bool
    /// Bytes taken so far.
    private(set) var consumed = 0
    private var header: [UInt8] = []
    private var body: [UInt8] = []
    /// Whole records not yet handed out.
    private(set) var complete: [Record] = []

    /// RFC 8446 §5.2: TLSCiphertext.length is at most 2^14 + 256.
    static let maxCiphertextLength = (1 << 14) + 256

    init(limit: Int, allowsChangeCipherSpec: Bool) {
        self.limit = max(0, limit)
        self.allowsChangeCipherSpec = allowsChangeCipherSpec
    }

    mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(TLS13FlightError) {
        var index = 0
        while index < bytes.count {
            guard consumed < limit else { throw .tooLarge }
            if header.count < tlsRecordHeaderLength {
                header.append(bytes[index])
                index += 1
                consumed += 1
                try checkHeader()
                continue
            }
            let length = Int(header[3]) << 8 | Int(header[4])
            let wanted = min(length - body.count, bytes.count - index, limit - consumed)
            body.append(contentsOf: bytes[index..<index + wanted])
            index += wanted
            consumed += wanted
            try finishIfComplete()
        }
    }

    /// Hands out the whole records read so far.
    mutating func take() -> [Record] {
        defer { complete = [] }
        return complete
    }

    private mutating func checkHeader() throws(TLS13FlightError) {
        switch header.count {
        case 1:
            switch header[0] {
            case tlsContentTypeApplicationData: break
            case tlsContentTypeChangeCipherSpec where allowsChangeCipherSpec: break
            case tlsContentTypeChangeCipherSpec: throw .malformed("change_cipher_spec after the handshake")
            case tlsContentTypeAlert: throw .malformed("plaintext alert")
            case tlsContentTypeHandshake: throw .malformed("plaintext handshake record")
            default: throw .malformed("record type \(header[0])")
            }
        case 3:
            // RFC 8446 §5.1: legacy_record_version is 0x0303 on every TLS 1.3 record but the first ClientHello.
            guard header[1] == 3, header[2] == 3 else { throw .malformed("record version \(hex(UInt16(header[1]) << 8 | UInt16(header[2])))") }
        case tlsRecordHeaderLength:
            let length = Int(header[3]) << 8 | Int(header[4])
            guard length > 0 else { throw .malformed("empty record of type \(header[0])") }
            guard length <= Self.maxCiphertextLength else { throw .malformed("record of \(length) bytes") }
            try finishIfComplete()
        default:
            break
        }
    }

    private mutating func finishIfComplete() throws(TLS13FlightError) {
        let length = Int(header[3]) << 8 | Int(header[4])
        guard body.count == length else { return }
        if header[0] == tlsContentTypeChangeCipherSpec {
            guard body == [1] else { throw .malformed("change_cipher_spec of \(body.count) bytes") }
        } else {
            complete.append(Record(header: header, body: body, end: consumed))
        }
        header.removeAll(keepingCapacity: true)
        body = []
    }
}
