import Foundation
import COpenSSL
import PinPolicy

/// The TLS 1.3 signature schemes a server may sign its CertificateVerify with, as OpenSSL 3.0
/// verifies them (RFC 8446 §4.2.3). rsa_pkcs1_* and SHA-1 schemes are refused: "RSA signatures
/// MUST use an RSASSA-PSS algorithm" and the legacy ones "are not defined for use in signed TLS
/// handshake messages" (§4.2.3, §4.4.3).
enum TLS13SignatureScheme {
    /// What key a scheme needs and how it hashes.
    enum Key {
        case ecdsa(group: String)       // OpenSSL group name of the curve the scheme fixes
        case rsaPSS(pssKey: Bool)       // rsa_pss_rsae_* (rsaEncryption key) or rsa_pss_pss_* (RSASSA-PSS key)
        case eddsa(type: Int32)         // EVP_PKEY_ED25519 / EVP_PKEY_ED448
    }

    /// The key type and digest (nil: EdDSA hashes itself) of `scheme`.
    static func parameters(_ scheme: UInt16) throws(TLS13FlightError) -> (key: Key, digest: OpaquePointer?) {
        switch scheme {
        case 0x0403: return (.ecdsa(group: "prime256v1"), EVP_sha256())
        case 0x0503: return (.ecdsa(group: "secp384r1"), EVP_sha384())
        case 0x0603: return (.ecdsa(group: "secp521r1"), EVP_sha512())
        case 0x0804: return (.rsaPSS(pssKey: false), EVP_sha256())
        case 0x0805: return (.rsaPSS(pssKey: false), EVP_sha384())
        case 0x0806: return (.rsaPSS(pssKey: false), EVP_sha512())
        case 0x0809: return (.rsaPSS(pssKey: true), EVP_sha256())
        case 0x080A: return (.rsaPSS(pssKey: true), EVP_sha384())
        case 0x080B: return (.rsaPSS(pssKey: true), EVP_sha512())
        case 0x0807: return (.eddsa(type: EVP_PKEY_ED25519), nil)
        case 0x0808: return (.eddsa(type: EVP_PKEY_ED448), nil)
        case 0x0401, 0x0501, 0x0601:
            throw .certificateVerifyFailed("rsa_pkcs1 scheme \(hex(scheme)) is not allowed in TLS 1.3")
        case 0x0201, 0x0203:
            throw .certificateVerifyFailed("SHA-1 scheme \(hex(scheme)) is not allowed in TLS 1.3")
        default:
            throw .certificateVerifyFailed("unknown signature scheme \(hex(scheme))")
        }
    }
}

/// RFC 8446 §4.4.3: the server signs
///
///     64 octets of 0x20 || "TLS 1.3, server CertificateVerify" || 0x00 || Transcript-Hash(ClientHello … Certificate)
///
/// with the leaf's key under `scheme`; the key must be of the scheme's type (and an ECDSA key on
/// the scheme's curve).
func verifyServerSignature(scheme: UInt16, signature: [UInt8], leaf der: [UInt8], transcriptHash: [UInt8]) throws(TLS13FlightError) {
    let (keyKind, digest) = try TLS13SignatureScheme.parameters(scheme)
    guard let leaf = ParsedLeaves.shared.certificate(der) else { throw .certificateVerifyFailed("the leaf certificate does not parse") }
    guard let key = X509_get0_pubkey(leaf.ref) else { throw .certificateVerifyFailed("the leaf has no usable public key") }
    defer { OpenSSLError.clear() }
    let keyType = EVP_PKEY_get_base_id(key)
    let keyFits: Bool
    switch keyKind {
    case .ecdsa(let group):
        var name = [CChar](repeating: 0, count: 64)
        var length = 0
        keyFits = keyType == EVP_PKEY_EC && EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1
            && String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self) == group
    case .rsaPSS(let pssKey):
        keyFits = keyType == (pssKey ? EVP_PKEY_RSA_PSS : EVP_PKEY_RSA)
    case .eddsa(let type):
        keyFits = keyType == type
    }
    guard keyFits else {
        throw .certificateVerifyFailed("scheme \(hex(scheme)) does not fit the leaf's \(Certificate.describeKey(key)) key")
    }

    let content = [UInt8](repeating: 0x20, count: 64) + Array("TLS 1.3, server CertificateVerify".utf8) + [0] + transcriptHash
    guard let context = EVP_MD_CTX_new() else { throw .certificateVerifyFailed("out of memory") }
    defer { EVP_MD_CTX_free(context) }
    var keyContext: OpaquePointer?
    var ready = EVP_DigestVerifyInit(context, &keyContext, digest, nil, key) == 1
    if ready, case .rsaPSS = keyKind {
        // RFC 8446 §4.2.3: MGF1 with the same hash, and a salt as long as the digest.
        ready = EVP_PKEY_CTX_set_rsa_padding(keyContext, RSA_PKCS1_PSS_PADDING) == 1
            && EVP_PKEY_CTX_set_rsa_pss_saltlen(keyContext, RSA_PSS_SALTLEN_DIGEST) == 1
    }
    guard ready else { throw .certificateVerifyFailed("the leaf's key cannot verify scheme \(hex(scheme))") }
    let verified = EVP_DigestVerify(context, signature, signature.count, content, content.count) == 1
    guard verified else { throw .certificateVerifyFailed("the signature does not verify with the leaf's key") }
}

/// Leaves already parsed, by their DER bytes: every TLS 1.3 tunnel to a host has its mirror's (or
/// key-log) flight verified with the same leaf, and OpenSSL 3.0 spends about 1.5 M instructions
/// decoding one (its decoder lookup), over a quarter of a pinned TLS 1.3 tunnel's work. The same
/// bytes parse to the same certificate, so reusing it changes no verdict. A `BoundedMemo` shared by
/// the worker threads (OpenSSL lets threads verify with one key).
final class ParsedLeaves: @unchecked Sendable {
    static let shared = ParsedLeaves(capacity: 64)

    private struct Key: Hashable {
        let der: [UInt8]
        func hash(into hasher: inout Hasher) { hasher.combine(bytesOf: der) }
    }

    private let leaves: BoundedMemo<Key, Certificate>

    init(capacity: Int) { leaves = BoundedMemo(capacity: capacity) }

    /// The certificate these bytes are (`Certificate.fromDER`), parsed once; nil if they do not parse.
    func certificate(_ der: [UInt8]) -> Certificate? {
        leaves.value(for: Key(der: der), orMakeIfAny: { Certificate.fromDER(der) })
    }

    var count: Int { leaves.count }
}
