import Crypto
import Foundation

// The mirror's post-quantum key shares. Clients of 2026 (OpenSSL ≥ 3.5, Go ≥ 1.24, browsers) send
// an X25519MLKEM768 share; a server checks its ML-KEM encapsulation key (FIPS 203 §7.2, the modulus
// check) and refuses random bytes with illegal_parameter, and random bytes would tell an
// interceptor which connection is the mirror. So the mirror sends keys of its own here too:
// ML-KEM from swift-crypto (OpenSSL 3.0 has none; no hand-written ML-KEM), the classical half of a
// hybrid an `EphemeralKey` on OpenSSL.
//
// draft-ietf-tls-ecdhe-mlkem (hybrids) and draft-ietf-tls-mlkem (ML-KEM alone), checked against
// OpenSSL 3.5's EVP_PKEY-MLX-KEM(7) and, in MLKEMMirrorTests, against OpenSSL 4.0 as a server:
//
//   group               client share          server share          shared secret
//   X25519MLKEM768      ek(1184) ‖ X25519(32) ct(1088) ‖ X25519(32) ML-KEM(32) ‖ X25519(32)
//   SecP256r1MLKEM768   P-256(65) ‖ ek(1184)  P-256(65) ‖ ct(1088)  ECDH(32) ‖ ML-KEM(32)
//   SecP384r1MLKEM1024  P-384(97) ‖ ek(1568)  P-384(97) ‖ ct(1568)  ECDH(48) ‖ ML-KEM(32)
//   MLKEM768            ek(1184)              ct(1088)              ML-KEM(32)
//   MLKEM1024           ek(1568)              ct(1568)              ML-KEM(32)
//
// X25519MLKEM768 alone puts ML-KEM first (for FIPS, the approved part first); the NIST-curve
// hybrids put the curve first.

/// An ML-KEM parameter set of FIPS 203, with its lengths (§8, table 3).
enum MLKEMParameterSet: Sendable {
    case mlkem768
    case mlkem1024

    var encapsulationKeyLength: Int { self == .mlkem768 ? 1184 : 1568 }
    var ciphertextLength: Int { self == .mlkem768 ? 1088 : 1568 }
}

/// Every NamedGroup whose key share the mirror computes, and what its share is made of.
enum MirrorGroup: UInt16, CaseIterable, Sendable {
    case secp256r1 = 0x0017
    case secp384r1 = 0x0018
    case secp521r1 = 0x0019
    case x25519 = 0x001D
    case x448 = 0x001E
    case mlkem768 = 0x0201
    case mlkem1024 = 0x0202
    case secp256r1MLKEM768 = 0x11EB
    case x25519MLKEM768 = 0x11EC
    case secp384r1MLKEM1024 = 0x11ED

    enum Kind {
        case ecdhe(ECDHEGroup)
        case mlkem(MLKEMParameterSet)
        /// Both halves; `mlkemFirst`: the order of the halves in the shares and in the secret.
        case hybrid(ECDHEGroup, MLKEMParameterSet, mlkemFirst: Bool)
    }

    var kind: Kind {
        switch self {
        case .secp256r1: return .ecdhe(.secp256r1)
        case .secp384r1: return .ecdhe(.secp384r1)
        case .secp521r1: return .ecdhe(.secp521r1)
        case .x25519: return .ecdhe(.x25519)
        case .x448: return .ecdhe(.x448)
        case .mlkem768: return .mlkem(.mlkem768)
        case .mlkem1024: return .mlkem(.mlkem1024)
        case .secp256r1MLKEM768: return .hybrid(.secp256r1, .mlkem768, mlkemFirst: false)
        case .x25519MLKEM768: return .hybrid(.x25519, .mlkem768, mlkemFirst: true)
        case .secp384r1MLKEM1024: return .hybrid(.secp384r1, .mlkem1024, mlkemFirst: false)
        }
    }

    init(_ ecdhe: ECDHEGroup) {
        switch ecdhe {
        case .secp256r1: self = .secp256r1
        case .secp384r1: self = .secp384r1
        case .secp521r1: self = .secp521r1
        case .x25519: self = .x25519
        case .x448: self = .x448
        }
    }

    /// The length of the client's key_exchange.
    var clientShareLength: Int {
        switch kind {
        case .ecdhe(let group): return group.shareLength
        case .mlkem(let parameters): return parameters.encapsulationKeyLength
        case .hybrid(let group, let parameters, _): return group.shareLength + parameters.encapsulationKeyLength
        }
    }

    /// The length of the server's key_exchange.
    var serverShareLength: Int {
        switch kind {
        case .ecdhe(let group): return group.shareLength
        case .mlkem(let parameters): return parameters.ciphertextLength
        case .hybrid(let group, let parameters, _): return group.shareLength + parameters.ciphertextLength
        }
    }
}

/// One ML-KEM decapsulation key of the mirror (768 or 1024): the only holder of swift-crypto's
/// private key, which cleanses itself when freed. Never printed.
final class MLKEMKey: @unchecked Sendable, CustomStringConvertible {
    private enum PrivateKey {
        case mlkem768(MLKEM768.PrivateKey)
        case mlkem1024(MLKEM1024.PrivateKey)
    }

    let parameters: MLKEMParameterSet
    /// The encapsulation key (FIPS 203 ek), as the share carries it.
    let encapsulationKey: [UInt8]
    private let key: PrivateKey

    /// A fresh key; nil if swift-crypto cannot make one.
    convenience init?(_ parameters: MLKEMParameterSet) {
        do {
            switch parameters {
            case .mlkem768: self.init(holding: .mlkem768(try MLKEM768.PrivateKey()))
            case .mlkem1024: self.init(holding: .mlkem1024(try MLKEM1024.PrivateKey()))
            }
        } catch {
            return nil
        }
    }

    /// The key of a 64-byte seed d ‖ z (FIPS 203 ML-KEM.KeyGen_internal): for known-answer tests.
    convenience init(_ parameters: MLKEMParameterSet, seed: [UInt8]) throws {
        switch parameters {
        case .mlkem768: self.init(holding: .mlkem768(try MLKEM768.PrivateKey(seedRepresentation: seed, publicKey: nil)))
        case .mlkem1024: self.init(holding: .mlkem1024(try MLKEM1024.PrivateKey(seedRepresentation: seed, publicKey: nil)))
        }
    }

    private init(holding key: PrivateKey) {
        self.key = key
        switch key {
        case .mlkem768(let key):
            parameters = .mlkem768
            encapsulationKey = Array(key.publicKey.rawRepresentation)
        case .mlkem1024(let key):
            parameters = .mlkem1024
            encapsulationKey = Array(key.publicKey.rawRepresentation)
        }
    }

    /// The shared secret (32 bytes) of the server's ciphertext; nil when it is not of this
    /// parameter set's length or swift-crypto refuses it. A ciphertext of the right length that
    /// was not made for this key gives a pseudo-random secret (FIPS 203 implicit rejection): the
    /// server's Finished then fails to open, not this.
    func decapsulate(_ ciphertext: ArraySlice<UInt8>) -> SecretBytes? {
        guard ciphertext.count == parameters.ciphertextLength else { return nil }
        let shared: SymmetricKey
        do {
            switch key {
            case .mlkem768(let key): shared = try key.decapsulate(Data(ciphertext))
            case .mlkem1024(let key): shared = try key.decapsulate(Data(ciphertext))
            }
        } catch {
            return nil
        }
        return shared.withUnsafeBytes { SecretBytes(copying: $0) }
    }

    var description: String { "MLKEMKey(\(parameters))" }
}

/// The private side of one key share of the mirror: an (EC)DHE key on OpenSSL, an ML-KEM key, or a
/// hybrid of both. Never printed.
enum MirrorKey: Sendable, CustomStringConvertible {
    case ecdhe(EphemeralKey)
    case mlkem(MLKEMKey, group: MirrorGroup)
    case hybrid(EphemeralKey, MLKEMKey, group: MirrorGroup)

    /// A fresh key for a share of `group`; an (EC)DHE key (whole, or a hybrid's half) comes from
    /// `stock`. nil if OpenSSL or swift-crypto cannot make one.
    init?(_ group: MirrorGroup, stock: EphemeralKeyStock) {
        switch group.kind {
        case .ecdhe(let ecdhe):
            guard let key = stock.take(ecdhe) else { return nil }
            self = .ecdhe(key)
        case .mlkem(let parameters):
            guard let key = MLKEMKey(parameters) else { return nil }
            self = .mlkem(key, group: group)
        case .hybrid(let ecdhe, let parameters, _):
            guard let classical = stock.take(ecdhe), let mlkem = MLKEMKey(parameters) else { return nil }
            self = .hybrid(classical, mlkem, group: group)
        }
    }

    var group: MirrorGroup {
        switch self {
        case .ecdhe(let key): return MirrorGroup(key.group)
        case .mlkem(_, let group), .hybrid(_, _, let group): return group
        }
    }

    /// The client's key_exchange bytes: exactly `group.clientShareLength`.
    var publicShare: [UInt8] {
        switch self {
        case .ecdhe(let key): return key.publicShare
        case .mlkem(let key, _): return key.encapsulationKey
        case .hybrid(let classical, let mlkem, let group):
            return isMLKEMFirst(group) ? mlkem.encapsulationKey + classical.publicShare : classical.publicShare + mlkem.encapsulationKey
        }
    }

    /// The shared secret of the server's key_exchange (the ServerHello's share for this group),
    /// for the TLS 1.3 key schedule. Throws `.keyShare` when the share has the wrong length, its
    /// (EC)DHE part is no valid key of the curve, or its ciphertext does not decapsulate.
    func sharedSecret(with serverShare: [UInt8]) throws(MirrorFailure) -> SecretBytes {
        let group = self.group
        let name = "the server's \(hex(group.rawValue)) share"
        guard serverShare.count == group.serverShareLength else {
            throw .keyShare("\(name) has \(serverShare.count) bytes, not \(group.serverShareLength)")
        }
        switch self {
        case .ecdhe(let key):
            guard let secret = key.sharedSecret(with: serverShare) else { throw .keyShare("\(name) is not a valid key") }
            return secret
        case .mlkem(let key, _):
            guard let secret = key.decapsulate(serverShare[...]) else { throw .keyShare("\(name) does not decapsulate") }
            return secret
        case .hybrid(let classical, let mlkem, _):
            let mlkemFirst = isMLKEMFirst(group)
            let split = mlkemFirst ? mlkem.parameters.ciphertextLength : classical.group.shareLength
            let (first, second) = (serverShare[..<split], serverShare[split...])
            let (ciphertext, point) = mlkemFirst ? (first, second) : (second, first)
            guard let ecdheSecret = classical.sharedSecret(with: Array(point)) else {
                throw .keyShare("\(name) is not a valid key (its \(hex(classical.group.rawValue)) part)")
            }
            guard let mlkemSecret = mlkem.decapsulate(ciphertext) else { throw .keyShare("\(name) does not decapsulate") }
            return mlkemFirst ? concatenated(mlkemSecret, ecdheSecret) : concatenated(ecdheSecret, mlkemSecret)
        }
    }

    var description: String { "MirrorKey(\(group))" }

    private func isMLKEMFirst(_ group: MirrorGroup) -> Bool {
        if case .hybrid(_, _, let mlkemFirst) = group.kind { return mlkemFirst }
        return false
    }
}

/// `first` ‖ `second`, in memory of its own (wiped when freed, as both parts are).
private func concatenated(_ first: SecretBytes, _ second: SecretBytes) -> SecretBytes {
    SecretBytes(count: first.count + second.count) { out in
        first.withUnsafeBytes { out.copyMemory(from: $0) }
        second.withUnsafeBytes { UnsafeMutableRawBufferPointer(rebasing: out[first.count...]).copyMemory(from: $0) }
    }
}
