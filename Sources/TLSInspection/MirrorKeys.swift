import COpenSSL
import Foundation

// The key material of a mirror handshake (issue 18): pinproxy's own ephemeral (EC)DHE keys for the
// mirror's key shares (on OpenSSL; the ML-KEM and hybrid shares are in MirrorKEM.swift, whole or in
// part made of these), and the TLS 1.3 key schedule from the shared secret to the server's handshake
// traffic secret (RFC 8446 §7.1), so that TLS13ServerFlight can open the server's flight with a
// secret pinproxy derived itself instead of one from a client's key log.

/// RFC 8446 §4.2.7 NamedGroup values of the (EC)DHE groups pinproxy computes on OpenSSL, with the
/// share's length (§4.2.8.1, §4.2.8.2: X25519/X448 raw, the NIST curves as an uncompressed point;
/// the same length both ways).
enum ECDHEGroup: UInt16, CaseIterable {
    case secp256r1 = 0x0017
    case secp384r1 = 0x0018
    case secp521r1 = 0x0019
    case x25519 = 0x001D
    case x448 = 0x001E

    var shareLength: Int {
        switch self {
        case .secp256r1: return 65
        case .secp384r1: return 97
        case .secp521r1: return 133
        case .x25519: return 32
        case .x448: return 56
        }
    }

    /// OpenSSL's name of the curve (EC) or the key type (X25519, X448).
    fileprivate var openSSLName: String {
        switch self {
        case .secp256r1: return "P-256"
        case .secp384r1: return "P-384"
        case .secp521r1: return "P-521"
        case .x25519: return "X25519"
        case .x448: return "X448"
        }
    }

    fileprivate var isEC: Bool { self == .secp256r1 || self == .secp384r1 || self == .secp521r1 }
}

/// One ephemeral private key of a mirror's key share. Owns the EVP_PKEY and frees it (OpenSSL
/// cleanses the private scalar) when the last reference goes. Never printed.
final class EphemeralKey: @unchecked Sendable, CustomStringConvertible {
    let group: ECDHEGroup
    /// The key_exchange bytes of the share: exactly `group.shareLength` bytes.
    let publicShare: [UInt8]
    private let key: OpaquePointer

    /// A fresh key of `group`; nil if OpenSSL cannot make one (then the mirror is not sent:
    /// `MirrorError.uncomputableShare`).
    init?(_ group: ECDHEGroup) {
        defer { OpenSSLError.clear() }
        let context = group.isEC ? EVP_PKEY_CTX_new_from_name(nil, "EC", nil) : EVP_PKEY_CTX_new_from_name(nil, group.openSSLName, nil)
        guard let context else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var made: OpaquePointer?
        guard EVP_PKEY_keygen_init(context) == 1,
              !group.isEC || EVP_PKEY_CTX_set_group_name(context, group.openSSLName) == 1,
              EVP_PKEY_keygen(context, &made) == 1, let made else { return nil }
        var encoded: UnsafeMutablePointer<UInt8>?
        let length = EVP_PKEY_get1_encoded_public_key(made, &encoded)
        guard let encoded, length == group.shareLength else {
            if let encoded { CRYPTO_free(encoded, #fileID, #line) }
            EVP_PKEY_free(made)
            return nil
        }
        publicShare = Array(UnsafeBufferPointer(start: encoded, count: length))
        CRYPTO_free(encoded, #fileID, #line)
        self.group = group
        key = made
    }

    /// The (EC)DHE shared secret with the server's key_exchange bytes (RFC 8446 §7.4: for the NIST
    /// curves the x-coordinate, as long as the field; X25519/X448 the raw output, never all
    /// zeros). nil when the server's share is not a valid point or key of this group.
    func sharedSecret(with peerShare: [UInt8]) -> SecretBytes? {
        defer { OpenSSLError.clear() }
        guard peerShare.count == group.shareLength, let peer = peerKey(peerShare) else { return nil }
        defer { EVP_PKEY_free(peer) }
        guard let context = EVP_PKEY_CTX_new(key, nil) else { return nil }
        defer { EVP_PKEY_CTX_free(context) }
        var length = 0
        guard EVP_PKEY_derive_init(context) == 1, EVP_PKEY_derive_set_peer(context, peer) == 1,
              EVP_PKEY_derive(context, nil, &length) == 1, length > 0 else { return nil }
        var derived = false
        let secret = SecretBytes(count: length) { out in
            var written = out.count
            derived = EVP_PKEY_derive(context, out.baseAddress?.assumingMemoryBound(to: UInt8.self), &written) == 1
                && written == length
        }
        // RFC 7748 §6.1: an all-zero X25519/X448 output is refused (OpenSSL refuses it too).
        let allZero = secret.withUnsafeBytes { $0.allSatisfy { $0 == 0 } }
        return derived && !allZero ? secret : nil
    }

    private func peerKey(_ share: [UInt8]) -> OpaquePointer? {
        if !group.isEC {
            let type = group == .x25519 ? EVP_PKEY_X25519 : EVP_PKEY_X448
            return EVP_PKEY_new_raw_public_key(type, nil, share, share.count)
        }
        // An EC key with our curve's parameters, then the server's point (checked on the curve).
        guard let peer = EVP_PKEY_new() else { return nil }
        guard EVP_PKEY_copy_parameters(peer, key) == 1, EVP_PKEY_set1_encoded_public_key(peer, share, share.count) == 1 else {
            EVP_PKEY_free(peer)
            return nil
        }
        return peer
    }

    var description: String { "EphemeralKey(\(group))" }

    deinit { EVP_PKEY_free(key) }
}

/// X25519 keys made before a mirror needs them. A mirror's hello is built in the loop turn that
/// forwards the client's own, and the client's hello waits for it; making its key there put an
/// X25519 key generation (about 40 µs, a sixth of a pinned TLS 1.3 tunnel's instructions) on the
/// path to the client's first byte. The session stocks keys instead right after a mirrored
/// tunnel's `200`, while its client is still building the hello; the mirror takes one (or makes
/// one, when the stock is empty or the client offered another group). Every key is used for one
/// mirror at most: taking removes it. Shared by the worker threads; bounded.
public final class EphemeralKeyStock: @unchecked Sendable {
    public static let shared = EphemeralKeyStock(capacity: 16)

    /// The group kept in stock: the one nearly every client offers a share for.
    static let group = ECDHEGroup.x25519

    private let lock = NSLock()
    private var keys: [EphemeralKey] = []
    let capacity: Int

    init(capacity: Int) { self.capacity = capacity }

    /// Makes `count` more keys, as far as the capacity allows: every mirrored tunnel adds its own,
    /// so tunnels that open together (all their `200`s sent before any of their hellos arrives)
    /// each find theirs, rather than the first taking the one key they all topped up to.
    public func fill(adding count: Int) {
        let missing = min(count, capacity - lock.withLock { keys.count })
        guard missing > 0 else { return }
        let made = (0..<missing).compactMap { _ in EphemeralKey(Self.group) }
        lock.withLock { keys += made.prefix(max(0, capacity - keys.count)) }
    }

    /// A key of `group`: one from the stock when it holds that group, else a fresh one. The
    /// X25519 half of an X25519MLKEM768 share is taken here too.
    func take(_ group: ECDHEGroup) -> EphemeralKey? {
        if group == Self.group, let stocked = lock.withLock({ keys.popLast() }) { return stocked }
        return EphemeralKey(group)
    }

    public var count: Int { lock.withLock { keys.count } }
}

/// A fresh public key of an RFC 7919 FFDHE group (0x0100 ffdhe2048 … 0x0104 ffdhe8192) as a TLS
/// 1.3 share (big-endian, as long as the prime: RFC 8446 §4.2.8.1), or nil. The private key is
/// freed here: pinproxy does not compute FFDHE secrets, the share only has to be acceptable.
func ffdhePublicShare(group: UInt16, length: Int) -> [UInt8]? {
    let names: [UInt16: (String, Int)] = [
        0x0100: ("ffdhe2048", 256), 0x0101: ("ffdhe3072", 384), 0x0102: ("ffdhe4096", 512),
        0x0103: ("ffdhe6144", 768), 0x0104: ("ffdhe8192", 1024),
    ]
    guard let (name, primeLength) = names[group], primeLength == length else { return nil }
    defer { OpenSSLError.clear() }
    guard let context = EVP_PKEY_CTX_new_from_name(nil, "DH", nil) else { return nil }
    defer { EVP_PKEY_CTX_free(context) }
    var key: OpaquePointer?
    guard EVP_PKEY_keygen_init(context) == 1, EVP_PKEY_CTX_set_group_name(context, name) == 1,
          EVP_PKEY_keygen(context, &key) == 1, let key else { return nil }
    defer { EVP_PKEY_free(key) }
    var encoded: UnsafeMutablePointer<UInt8>?
    let encodedLength = EVP_PKEY_get1_encoded_public_key(key, &encoded)
    guard let encoded else { return nil }
    defer { CRYPTO_free(encoded, #fileID, #line) }
    guard encodedLength == length else { return nil }
    return Array(UnsafeBufferPointer(start: encoded, count: encodedLength))
}

/// `count` bytes from the system's CSPRNG (getrandom(2) behind Swift's SystemRandomNumberGenerator).
func randomBytes(_ count: Int) -> [UInt8] {
    var generator = SystemRandomNumberGenerator()
    var bytes: [UInt8] = []
    bytes.reserveCapacity(count + 7)
    while bytes.count < count {
        withUnsafeBytes(of: generator.next() as UInt64) { bytes += $0 }
    }
    return Array(bytes.prefix(count))
}

/// RFC 8446 §7.1, without a PSK:
///
///     early_secret     = HKDF-Extract(0, 0)
///     derived          = Derive-Secret(early_secret, "derived", "")
///     handshake_secret = HKDF-Extract(derived, (EC)DHE)
///     server_handshake_traffic_secret = Derive-Secret(handshake_secret, "s hs traffic", ClientHello...ServerHello)
///
/// with Derive-Secret(S, Label, M) = HKDF-Expand-Label(S, Label, Transcript-Hash(M), Hash.length).
/// `transcript` is in its signed form (after a HelloRetryRequest the message_hash in place of the
/// first ClientHello, as TLS13ServerFlight builds it).
func serverHandshakeTrafficSecret(shared: SecretBytes, suite: TLS13Suite, signedTranscript: [[UInt8]]) -> SecretBytes {
    let zeros = SecretBytes(count: suite.hashLength) { $0.initializeMemory(as: UInt8.self, repeating: 0) }
    let earlySecret = hkdfExtract(salt: zeros, ikm: zeros, suite: suite)
    let derived = hkdfExpandLabel(earlySecret, "derived", context: suite.hash([]), length: suite.hashLength, suite: suite)
    let handshakeSecret = hkdfExtract(salt: derived, ikm: shared, suite: suite)
    return hkdfExpandLabel(handshakeSecret, "s hs traffic", context: suite.hash(signedTranscript), length: suite.hashLength, suite: suite)
}
