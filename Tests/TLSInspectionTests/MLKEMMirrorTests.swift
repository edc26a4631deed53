import Crypto
import Foundation
import Testing
import TestSupport
@testable import TLSInspection

// The mirror's ML-KEM and hybrid key shares (MirrorKEM.swift): known answers from swift-crypto's
// own vectors, the hybrid key schedule against a server simulated in the test, swift-crypto beside
// the system OpenSSL in one binary, and real handshakes with OpenSSL 4.0 (the peers' venv,
// scripts/pq_peer.py) choosing each group.

extension SecretBytes {
    /// A copy of the bytes, for comparing with a test's expectation.
    var bytes: [UInt8] { withUnsafeBytes { Array($0) } }
}

/// The five post-quantum groups as the drafts lay them out, written here independently of
/// MirrorGroup: draft-ietf-tls-ecdhe-mlkem §4.1–4.3, draft-ietf-tls-mlkem §4.
struct PQGroupLayout: CustomTestStringConvertible, Sendable {
    enum Curve: Sendable { case x25519, p256, p384 }
    let name: String                // OpenSSL's name of the group
    let group: MirrorGroup
    let codepoint: UInt16
    let curve: Curve?
    let mlkem1024: Bool
    let mlkemFirst: Bool
    let clientLength: Int
    let serverLength: Int
    var testDescription: String { name }

    static let all: [PQGroupLayout] = [
        .init(name: "X25519MLKEM768", group: .x25519MLKEM768, codepoint: 0x11EC, curve: .x25519, mlkem1024: false,
              mlkemFirst: true, clientLength: 1184 + 32, serverLength: 1088 + 32),
        .init(name: "SecP256r1MLKEM768", group: .secp256r1MLKEM768, codepoint: 0x11EB, curve: .p256, mlkem1024: false,
              mlkemFirst: false, clientLength: 65 + 1184, serverLength: 65 + 1088),
        .init(name: "SecP384r1MLKEM1024", group: .secp384r1MLKEM1024, codepoint: 0x11ED, curve: .p384, mlkem1024: true,
              mlkemFirst: false, clientLength: 97 + 1568, serverLength: 97 + 1568),
        .init(name: "MLKEM768", group: .mlkem768, codepoint: 0x0201, curve: nil, mlkem1024: false,
              mlkemFirst: true, clientLength: 1184, serverLength: 1088),
        .init(name: "MLKEM1024", group: .mlkem1024, codepoint: 0x0202, curve: nil, mlkem1024: true,
              mlkemFirst: true, clientLength: 1568, serverLength: 1568),
    ]

    var curveShareLength: Int {
        switch curve {
        case .x25519: return 32
        case .p256: return 65
        case .p384: return 97
        case nil: return 0
        }
    }

    /// What a server does with the client's share: encapsulates to its ML-KEM key and agrees on
    /// the curve with a key of its own (swift-crypto's, not pinproxy's OpenSSL code). Returns its
    /// share and the shared secret it derives.
    func serverAnswer(to clientShare: [UInt8]) throws -> (share: [UInt8], secret: [UInt8]) {
        let ekLength = clientLength - curveShareLength
        let ek = mlkemFirst ? Array(clientShare[..<ekLength]) : Array(clientShare[curveShareLength...])
        let point = mlkemFirst ? Array(clientShare[ekLength...]) : Array(clientShare[..<curveShareLength])
        let encapsulated = mlkem1024
            ? try MLKEM1024.PublicKey(rawRepresentation: ek).encapsulate()
            : try MLKEM768.PublicKey(rawRepresentation: ek).encapsulate()
        let ciphertext = Array(encapsulated.encapsulated)
        let mlkemSecret = encapsulated.sharedSecret.withUnsafeBytes { Array($0) }
        let (serverPoint, ecdhSecret): ([UInt8], [UInt8])
        switch curve {
        case .x25519:
            let key = Curve25519.KeyAgreement.PrivateKey()
            let secret = try key.sharedSecretFromKeyAgreement(with: .init(rawRepresentation: point))
            (serverPoint, ecdhSecret) = (Array(key.publicKey.rawRepresentation), secret.withUnsafeBytes { Array($0) })
        case .p256:
            let key = P256.KeyAgreement.PrivateKey()
            let secret = try key.sharedSecretFromKeyAgreement(with: .init(x963Representation: point))
            (serverPoint, ecdhSecret) = (Array(key.publicKey.x963Representation), secret.withUnsafeBytes { Array($0) })
        case .p384:
            let key = P384.KeyAgreement.PrivateKey()
            let secret = try key.sharedSecretFromKeyAgreement(with: .init(x963Representation: point))
            (serverPoint, ecdhSecret) = (Array(key.publicKey.x963Representation), secret.withUnsafeBytes { Array($0) })
        case nil:
            (serverPoint, ecdhSecret) = ([], [])
        }
        return mlkemFirst ? (ciphertext + serverPoint, mlkemSecret + ecdhSecret) : (serverPoint + ciphertext, ecdhSecret + mlkemSecret)
    }
}

@Suite struct MLKEMKeyTests {
    /// swift-crypto's vector 0 for each parameter set, through pinproxy's key types: the seed
    /// gives the encapsulation key, and the ciphertext the shared secret (decapsulated by
    /// MLKEMKey, and by MirrorKey as a pure ML-KEM share).
    @Test func knownAnswers() throws {
        for (parameters, group, vector) in [(MLKEMParameterSet.mlkem768, MirrorGroup.mlkem768, MLKEMVectors.mlkem768),
                                            (.mlkem1024, .mlkem1024, MLKEMVectors.mlkem1024)] {
            let key = try MLKEMKey(parameters, seed: hexBytes(vector.seed))
            #expect(key.encapsulationKey == hexBytes(vector.encapsulationKey), "\(parameters) ek")
            let ciphertext = hexBytes(vector.ciphertext)
            let secret = try #require(key.decapsulate(ciphertext[...]))
            #expect(secret.bytes == hexBytes(vector.sharedSecret), "\(parameters) ss")
            let share = MirrorKey.mlkem(key, group: group)
            #expect(share.publicShare == hexBytes(vector.encapsulationKey))
            #expect(try share.sharedSecret(with: ciphertext).bytes == hexBytes(vector.sharedSecret))
        }
        #expect(hexBytes(MLKEMVectors.mlkem768.encapsulationKey).count == 1184 && hexBytes(MLKEMVectors.mlkem768.ciphertext).count == 1088)
        #expect(hexBytes(MLKEMVectors.mlkem1024.encapsulationKey).count == 1568 && hexBytes(MLKEMVectors.mlkem1024.ciphertext).count == 1568)
    }

    /// A server simulated in the test answers the mirror's share; pinproxy's secret is the
    /// server's, byte for byte, in each group's order.
    @Test(arguments: PQGroupLayout.all)
    func theMirrorsSecretIsTheServers(_ layout: PQGroupLayout) throws {
        #expect(layout.group.rawValue == layout.codepoint)
        #expect(layout.group.clientShareLength == layout.clientLength && layout.group.serverShareLength == layout.serverLength)
        let key = try #require(MirrorKey(layout.group, stock: EphemeralKeyStock(capacity: 0)))
        #expect(key.group == layout.group)
        #expect(key.publicShare.count == layout.clientLength)
        let server = try layout.serverAnswer(to: key.publicShare)
        #expect(server.share.count == layout.serverLength)
        #expect(server.secret.count == (layout.curve == .p384 ? 48 : layout.curve == nil ? 0 : 32) + 32)
        #expect(try key.sharedSecret(with: server.share).bytes == server.secret)
        #expect("\(key)" == "MirrorKey(\(layout.group))", "a key prints its group only")
    }

    /// A share one byte short or long is refused; a ciphertext with one bit flipped decapsulates
    /// (FIPS 203 implicit rejection) to another secret, so the server's flight will not open.
    @Test(arguments: PQGroupLayout.all)
    func wrongLengthsFailAndACorruptCiphertextGivesAnotherSecret(_ layout: PQGroupLayout) throws {
        let key = try #require(MirrorKey(layout.group, stock: EphemeralKeyStock(capacity: 0)))
        let server = try layout.serverAnswer(to: key.publicShare)
        let name = "the server's \(hex(layout.codepoint)) share"
        #expect(throws: MirrorFailure.keyShare("\(name) has \(layout.serverLength - 1) bytes, not \(layout.serverLength)")) {
            try key.sharedSecret(with: Array(server.share.dropLast()))
        }
        #expect(throws: MirrorFailure.keyShare("\(name) has \(layout.serverLength + 1) bytes, not \(layout.serverLength)")) {
            try key.sharedSecret(with: server.share + [0])
        }
        var corrupt = server.share
        let ciphertextAt = layout.mlkemFirst ? 0 : layout.curveShareLength
        corrupt[ciphertextAt + 100] ^= 0x01
        let other = try key.sharedSecret(with: corrupt).bytes
        #expect(other.count == server.secret.count)
        let mlkemPart = layout.mlkemFirst ? 0..<32 : other.count - 32..<other.count
        let curvePart = layout.mlkemFirst ? 32..<other.count : 0..<other.count - 32
        #expect(other[mlkemPart] != server.secret[mlkemPart], "the ML-KEM half differs")
        #expect(other[curvePart] == server.secret[curvePart], "the curve half is unchanged")
        let curveAt = layout.mlkemFirst ? layout.serverLength - layout.curveShareLength : 0
        // The curve half no key of its curve (X25519: all zeros, a low-order point; P-256/P-384:
        // the point (0, 0), not on the curve).
        if layout.curve != nil {
            var badPoint = server.share
            for index in curveAt..<curveAt + layout.curveShareLength { badPoint[index] = 0 }
            if layout.curve != .x25519 { badPoint[curveAt] = 0x04 }
            let part = layout.curve == .x25519 ? "0x001d" : layout.curve == .p256 ? "0x0017" : "0x0018"
            #expect(throws: MirrorFailure.keyShare("\(name) is not a valid key (its \(part) part)")) {
                try key.sharedSecret(with: badPoint)
            }
        }
    }

    /// swift-crypto's BoringSSL is linked beside Debian's OpenSSL 3.0 in one binary: pinproxy's
    /// X25519 still runs on libcrypto.so.3 (the symbol resolves there, not to swift-crypto's
    /// prefixed copy), and in the same test an X25519 derive on OpenSSL and an ML-KEM
    /// decapsulation on swift-crypto both agree with their peers.
    @Test func swiftCryptoRunsBesideTheSystemOpenSSL() throws {
        let derive = try #require(dlsym(nil, "EVP_PKEY_derive"), "OpenSSL's EVP_PKEY_derive is linked")
        let library = try #require(try mappedFile(containing: UInt(bitPattern: derive)), "EVP_PKEY_derive in no mapped file")
        #expect(library.hasSuffix("/libcrypto.so.3"), "EVP_PKEY_derive from \(library)")
        let versionSymbol = try #require(dlsym(nil, "OpenSSL_version"))
        let version = unsafeBitCast(versionSymbol, to: (@convention(c) (Int32) -> UnsafePointer<CChar>?).self)
        let text = String(cString: try #require(version(0)))  // OPENSSL_VERSION
        #expect(text.hasPrefix("OpenSSL 3.0."), "\(text)")

        let ours = try #require(EphemeralKey(.x25519)), theirs = try #require(EphemeralKey(.x25519))
        let a = try #require(ours.sharedSecret(with: theirs.publicShare)), b = try #require(theirs.sharedSecret(with: ours.publicShare))
        #expect(a.matches(b) && a.count == 32)

        let mlkem = try #require(MLKEMKey(.mlkem768))
        let encapsulated = try MLKEM768.PublicKey(rawRepresentation: mlkem.encapsulationKey).encapsulate()
        let decapsulated = try #require(mlkem.decapsulate(Array(encapsulated.encapsulated)[...]))
        #expect(decapsulated.bytes == encapsulated.sharedSecret.withUnsafeBytes { Array($0) })
        #expect("\(mlkem)" == "MLKEMKey(mlkem768)", "a key prints its parameter set only")
    }
}

/// The file mapped at `address` in this process (/proc/self/maps: "start-end perms offset dev
/// inode path"); Swift's Glibc has no dladdr. Read with read(2): the file's size says 0, so
/// Foundation's whole-file readers get nothing.
func mappedFile(containing address: UInt) throws -> String? {
    let fd = open("/proc/self/maps", O_RDONLY)
    guard fd >= 0 else { throw HelperError(message: "cannot open /proc/self/maps") }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    for _ in 0..<1024 {  // at most 64 MiB
        let n = read(fd, &buffer, buffer.count)
        guard n > 0 else { break }
        bytes += buffer[0..<n]
    }
    for line in String(decoding: bytes, as: UTF8.self).split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        let bounds = fields.first?.split(separator: "-") ?? []
        guard fields.count >= 6, bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16) else { continue }
        if (start..<end).contains(address) { return String(fields[5]) }
    }
    return nil
}

@Suite struct MLKEMMirrorHelloTests {
    /// A hello with one share per kind: computable shares get keys of their own, GREASE stays
    /// random bytes, and a share in a group pinproxy cannot compute stops the mirror.
    @Test func sharesOfEveryKind() throws {
        let x25519MLKEM = try #require(MirrorKey(.x25519MLKEM768, stock: EphemeralKeyStock(capacity: 0))).publicShare
        let client = try helloWithShares([(0x3A3A, [0]), (0x11EC, x25519MLKEM), (0x001D, Array(repeating: 9, count: 32))])
        let mirror = try MirrorHello(of: client.hello, records: client.records)
        #expect(mirror.computableGroups == [0x11EC, 0x001D])
        #expect(mirror.uncomputableGroups == [0x3A3A])
        let shares = keyShares(mirror.raw)
        #expect(shares.map(\.group) == [0x3A3A, 0x11EC, 0x001D])
        #expect(shares.map(\.key.count) == [1, 1216, 32])
        #expect(shares[1].key != x25519MLKEM)
        // The mirror's ML-KEM half is a real encapsulation key: swift-crypto takes it.
        #expect(throws: Never.self) { try MLKEM768.PublicKey(rawRepresentation: Array(shares[1].key[..<1184])) }

        for group: UInt16 in [0x6399, 0x0200, 0x11EE, 0x0A1A, 0x01FC] {
            let other = try helloWithShares([(group, Array(repeating: 7, count: 64)), (0x001D, Array(repeating: 9, count: 32))])
            #expect(throws: MirrorError.uncomputableShare(group)) { try MirrorHello(of: other.hello, records: other.records) }
        }
        #expect(MirrorError.uncomputableShare(0x6399).description
            == "mirror hello: the ClientHello has a key share in group 0x6399, which pinproxy cannot compute; a look-alike would give the mirror away, so the mirror is not sent")
        let short = try helloWithShares([(0x11EC, Array(repeating: 7, count: 1215))])
        #expect(throws: MirrorError.malformedHello(.malformed("a key share of group 0x11ec with 1215 bytes, not 1216"))) {
            try MirrorHello(of: short.hello, records: short.records)
        }
    }
}

/// A TLS 1.3 ClientHello (in one record) whose key_share has `shares`, with supported_versions.
func helloWithShares(_ shares: [(UInt16, [UInt8])]) throws -> CapturedHello {
    func u16(_ value: Int) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xFF)] }
    let entries: [UInt8] = shares.flatMap { u16(Int($0.0)) + u16($0.1.count) + $0.1 }
    let keyShare: [UInt8] = u16(51) + u16(entries.count + 2) + u16(entries.count) + entries
    let versions: [UInt8] = u16(43) + u16(3) + [2, 3, 4]
    let groups: [UInt8] = shares.flatMap { u16(Int($0.0)) }
    let supportedGroups: [UInt8] = u16(10) + u16(groups.count + 2) + u16(groups.count) + groups
    let extensions: [UInt8] = versions + supportedGroups + keyShare
    let random = [UInt8](repeating: 1, count: 32), sessionID = [UInt8](repeating: 2, count: 32)
    var body: [UInt8] = [3, 3] + random + [32] + sessionID
    body += u16(2) + [0x13, 0x01] + [1, 0] + u16(extensions.count) + extensions
    let message: [UInt8] = [1, 0] + u16(body.count) + body
    let records: [UInt8] = [22, 3, 1] + u16(message.count) + message
    var reader = ClientFlightReader()
    let hello = try #require(try reader.feed(records))
    return CapturedHello(name: "built", hello: hello, records: records, rest: [])
}

/// The (group, key_exchange) entries of a ClientHello's key_share.
func keyShares(_ raw: [UInt8]) -> [(group: UInt16, key: [UInt8])] {
    func u16(_ at: Int) -> Int { Int(raw[at]) << 8 | Int(raw[at + 1]) }
    // freshRanges lists random, session id, then every key_exchange in order.
    let keyRanges = Array(freshRanges(raw).dropFirst(2))
    return keyRanges.map { (UInt16(u16($0.lowerBound - 4)), Array(raw[$0])) }
}

/// Where the key_exchange of the ServerHello's key_share (extension 51: group, length, bytes)
/// starts in a server's first bytes.
func serverShareOffset(_ bytes: [UInt8], group: UInt16, length: Int) -> Int? {
    let pattern: [UInt8] = [0, 51, UInt8((length + 4) >> 8), UInt8((length + 4) & 0xFF),
                            UInt8(group >> 8), UInt8(group & 0xFF), UInt8(length >> 8), UInt8(length & 0xFF)]
    guard bytes.count >= pattern.count else { return nil }
    for start in 0...(bytes.count - pattern.count) where bytes[start..<start + pattern.count].elementsEqual(pattern) {
        return start + pattern.count
    }
    return nil
}

/// Real handshakes: OpenSSL 4.0 (cryptography's, via pyOpenSSL) as the client whose hello is
/// mirrored and as the server that picks each post-quantum group. The server checks the mirror's
/// shares (the ML-KEM modulus check, the points), and the mirror verifies its flight.
@Suite(.serialized) struct MLKEMRealServerTests {
    static let script = Paths.scripts + "/pq_peer.py"

    /// The records of the ClientHello that OpenSSL 4.0 sends with `groups` (and with `retryTo`,
    /// its ChangeCipherSpec and second hello after a HelloRetryRequest that asks for that group).
    static func capturedHello(groups: String, retryTo: String? = nil) throws -> [UInt8] {
        let python = try Paths.requirePeers()
        var arguments = [script, "hello", "--groups", groups]
        if let retryTo {
            arguments += ["--retry-to", retryTo, "--cert", Paths.fixture("leaf-ec256.pem"), "--key", Paths.fixture("leaf-ec256.key.pem")]
        }
        let result = try run(python, arguments, timeout: 30)
        try #require(result.status == 0, "pq_peer.py hello: \(result.stderr)")
        return hexBytes(result.stdout.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    static func server(groups: String) throws -> Helper {
        try Helper(try Paths.requirePeers(), [
            script, "server", "--cert", Paths.fixture("leaf-ec256.pem"), "--key", Paths.fixture("leaf-ec256.key.pem"),
            "--chain", Paths.fixture("good-intermediate.pem"), "--groups", groups,
        ])
    }

    @Test(arguments: PQGroupLayout.all)
    func aRealServerAcceptsTheMirrorsShare(_ layout: PQGroupLayout) throws {
        let bytes = try Self.capturedHello(groups: layout.name)
        var reader = ClientFlightReader()
        let hello = try #require(try reader.feed(bytes))
        let mirror = try MirrorHello(of: hello, records: bytes[..<reader.bytesConsumed])
        #expect(mirror.computableGroups == [layout.codepoint] && mirror.uncomputableGroups.isEmpty)
        let server = try Self.server(groups: layout.name)
        defer { server.stop() }
        let run = try runMirror(port: server.port, mirror)
        guard case .verified(let flight) = run.verdict else {
            Issue.record("\(layout.name): not verified: \(run.verdict)")
            return
        }
        let sameChain = flight.chain == (try chainDER("leaf-ec256.chain.pem"))
        #expect(sameChain, "\(layout.name): chain of \(flight.chain.count) certificates")
        #expect(flight.signatureScheme == 0x0403)

        // The same answer with one bit of the ciphertext flipped: it decapsulates (implicit
        // rejection) to another secret, and the flight does not open.
        let shareAt = try #require(serverShareOffset(run.serverBytes, group: layout.codepoint, length: layout.serverLength))
        let ciphertextAt = shareAt + (layout.mlkemFirst ? 0 : layout.curveShareLength)
        var flipped = run.serverBytes
        flipped[ciphertextAt + 10] ^= 0x01
        var handshake = MirrorHandshake(hello: mirror)
        #expect(handshake.feed(flipped) == .failed(.flight(.undecryptable)), "\(layout.name)")
        // The curve half zeroed: no key of its curve.
        if layout.curve != nil {
            let curveAt = shareAt + (layout.mlkemFirst ? layout.serverLength - layout.curveShareLength : 0)
            var zeroed = run.serverBytes
            for index in curveAt..<curveAt + layout.curveShareLength { zeroed[index] = 0 }
            let part = layout.curve == .x25519 ? "0x001d" : layout.curve == .p256 ? "0x0017" : "0x0018"
            var zeroHandshake = MirrorHandshake(hello: mirror)
            #expect(zeroHandshake.feed(zeroed)
                == .failed(.keyShare("the server's \(hex(layout.codepoint)) share is not a valid key (its \(part) part)")))
        }
    }

    /// The client offers X25519 first; the server wants SecP256r1MLKEM768 (or X25519MLKEM768)
    /// only and asks both connections for it: the mirror of the client's second hello carries a
    /// hybrid share of pinproxy's own, and verifies.
    @Test(arguments: ["SecP256r1MLKEM768", "X25519MLKEM768"])
    func aHelloRetryToAHybridIsAnswered(_ hybrid: String) throws {
        let bytes = try Self.capturedHello(groups: "X25519:\(hybrid)", retryTo: hybrid)
        var reader = ClientFlightReader()
        let first = try #require(try reader.feed(bytes))
        let firstEnd = reader.bytesConsumed
        let second = try #require(try reader.readSecondHello(bytes[firstEnd...]))
        let secondRecords = Array(bytes[firstEnd..<reader.bytesConsumed])
        let mirror = try MirrorHello(of: first, records: bytes[..<firstEnd])
        #expect(mirror.computableGroups == [0x001D])
        let server = try Self.server(groups: hybrid)
        defer { server.stop() }
        let run = try runMirror(port: server.port, mirror, second: CapturedHello(name: "\(hybrid) CH2", hello: second, records: secondRecords, rest: []),
                                secondRecords: secondRecords)
        guard case .verified(let flight) = run.verdict else {
            Issue.record("\(hybrid): not verified: \(run.verdict)")
            return
        }
        let sameChain = flight.chain == (try chainDER("leaf-ec256.chain.pem"))
        #expect(sameChain)
        let sent = try #require(run.secondHello)
        var mirrorReader = ClientFlightReader()
        _ = try #require(try mirrorReader.feed(mirror.bytes))
        let secondMirror = try #require(try mirrorReader.readSecondHello(sent))
        let expectedGroup: UInt16 = hybrid == "X25519MLKEM768" ? 0x11EC : 0x11EB
        let shares = keyShares(secondMirror.raw)
        #expect(shares.map(\.group) == [expectedGroup])
        #expect(shares.first?.key.count == (expectedGroup == 0x11EC ? 1216 : 1249))
        #expect(shares.first?.key != keyShares(second.raw).first?.key)
    }

    /// The client's own connection got no HelloRetryRequest (a balancer's other backend), the
    /// mirror's did: the mirror sends the second hello the client would have sent (RFC 8446
    /// §4.1.2: one fresh share of the asked group, early_data gone, the cookie echoed; a
    /// ChangeCipherSpec first in middlebox compatibility mode), and a real server verifies it.
    @Test(arguments: ["secp384r1", "SecP256r1MLKEM768", "X25519MLKEM768"])
    func aHelloRetryTheClientDidNotGetIsAnsweredByTheMirror(_ asked: String) throws {
        // OpenSSL 4.0 offering X25519 first and the asked group second, with a share for X25519 only.
        let bytes = try Self.capturedHello(groups: "X25519:\(asked)")
        var reader = ClientFlightReader()
        let first = try #require(try reader.feed(bytes))
        let mirror = try MirrorHello(of: first, records: bytes[..<reader.bytesConsumed])
        #expect(mirror.computableGroups == [0x001D])
        let server = try Self.server(groups: asked)
        defer { server.stop() }
        let run = try runMirror(port: server.port, mirror)
        guard case .verified(let flight) = run.verdict else {
            Issue.record("\(asked): not verified: \(run.verdict)")
            return
        }
        let sameChain = flight.chain == (try chainDER("leaf-ec256.chain.pem"))
        #expect(sameChain)
        let sent = try #require(run.secondHello)
        // After the CCS (the first hello had a session id), one handshake record.
        #expect(Array(sent.prefix(6)) == [20, 3, 3, 0, 1, 1] && sent[6] == 22)
        var mirrorReader = ClientFlightReader()
        _ = try #require(try mirrorReader.feed(mirror.bytes))
        let second = try #require(try mirrorReader.readSecondHello(sent))
        let expectedGroup: UInt16 = switch asked { case "secp384r1": 0x0018; case "X25519MLKEM768": 0x11EC; default: 0x11EB }
        #expect(keyShares(second.raw).map(\.group) == [expectedGroup])
        #expect(second.random == mirror.random && second.random != first.random)
    }
}
