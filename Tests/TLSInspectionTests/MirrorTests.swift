import Foundation
import Testing
import TestSupport
@testable import TLSInspection

// The mirror ClientHello (issue 18) over ClientHellos captured from real clients
// (Fixtures/hellos/capture-hellos.py: curl, Go crypto/tls, Python ssl, Node tls, openssl s_client),
// its key schedule, its second hello and its stock of ephemeral keys. Its real handshakes with
// `openssl s_server` on 127.0.0.1 are in MirrorHandshakeTests.swift.

/// A captured client first flight: its ClientHello, the records that carried it, and what followed.
struct CapturedHello: CustomTestStringConvertible, Sendable {
    let name: String
    let hello: ClientHello
    let records: [UInt8]
    let rest: [UInt8]
    var testDescription: String { name }

    init(name: String, hello: ClientHello, records: [UInt8], rest: [UInt8]) {
        (self.name, self.hello, self.records, self.rest) = (name, hello, records, rest)
    }

    init(_ name: String) throws {
        self.name = name
        let text = try String(contentsOfFile: Paths.fixture("hellos/\(name).hex"), encoding: .utf8)
        let bytes = hexBytes(text.trimmingCharacters(in: .whitespacesAndNewlines))
        var reader = ClientFlightReader()
        hello = try #require(try reader.feed(bytes))
        records = Array(bytes[..<reader.bytesConsumed])
        rest = Array(bytes[reader.bytesConsumed...])
    }

    func mirror() throws -> MirrorHello { try MirrorHello(of: hello, records: records) }
}

let capturedClients = ["curl", "go", "python", "node", "openssl-p-256", "openssl-p-384", "openssl-p-521",
                       "openssl-x448", "openssl-ffdhe2048", "openssl-psk", "openssl-early-data"]

/// The byte ranges of a ClientHello message that the mirror makes fresh, found by a walk of its
/// own (independent of MirrorHello's parser): random, session id, every key_exchange, and every
/// PSK identity, obfuscated age and binder.
func freshRanges(_ raw: [UInt8]) -> [Range<Int>] {
    func u16(_ at: Int) -> Int { Int(raw[at]) << 8 | Int(raw[at + 1]) }
    var ranges = [6..<38]
    let sessionLength = Int(raw[38])
    ranges.append(39..<39 + sessionLength)
    var at = 39 + sessionLength
    at += 2 + u16(at)              // cipher_suites
    at += 1 + Int(raw[at])         // compression_methods
    let end = at + 2 + u16(at)
    at += 2
    while at < end {
        let (type, length) = (u16(at), u16(at + 2))
        let data = at + 4
        if type == 51 {
            var entry = data + 2
            while entry < data + length {
                let shareLength = u16(entry + 2)
                ranges.append(entry + 4..<entry + 4 + shareLength)
                entry += 4 + shareLength
            }
        } else if type == 41 {
            let identitiesEnd = data + 2 + u16(data)
            var entry = data + 2
            while entry < identitiesEnd {
                let identityLength = u16(entry)
                ranges.append(entry + 2..<entry + 2 + identityLength)
                ranges.append(entry + 2 + identityLength..<entry + 6 + identityLength)
                entry += 6 + identityLength
            }
            var binder = identitiesEnd + 2
            while binder < data + length {
                ranges.append(binder + 1..<binder + 1 + Int(raw[binder]))
                binder += 1 + Int(raw[binder])
            }
        }
        at = data + length
    }
    return ranges
}

/// Record headers (type, version, length) of whole records.
func recordHeaders(_ bytes: [UInt8]) -> [[UInt8]] {
    var headers: [[UInt8]] = []
    var at = 0
    while at + 5 <= bytes.count {
        headers.append(Array(bytes[at..<at + 5]))
        at += 5 + (Int(bytes[at + 3]) << 8 | Int(bytes[at + 4]))
    }
    return headers
}

@Suite struct MirrorHelloTests {
    @Test(arguments: capturedClients)
    func mirrorIsTheClientsHelloExceptTheFreshFields(_ name: String) throws {
        let client = try CapturedHello(name)
        let mirror = try client.mirror()
        // Same record split, same headers; the mirror's handshake message is as long as the client's.
        #expect(recordHeaders(mirror.bytes) == recordHeaders(client.records))
        #expect(mirror.bytes.count == client.records.count)
        #expect(mirror.raw.count == client.hello.raw.count)
        let parsed = try #require(try ClientFlightReader().feedAll(mirror.bytes))
        #expect(parsed.raw == mirror.raw)

        // Field by field: what is kept is equal, what is fresh is not.
        #expect(parsed.legacyVersion == client.hello.legacyVersion)
        #expect(parsed.serverName == client.hello.serverName)
        #expect(parsed.offeredVersions == client.hello.offeredVersions)
        #expect(parsed.alpn == client.hello.alpn)
        #expect(parsed.sessionTicket == client.hello.sessionTicket)
        #expect(parsed.offersPreSharedKey == client.hello.offersPreSharedKey)
        #expect(parsed.random.count == 32 && parsed.random != client.hello.random && parsed.random == mirror.random)
        #expect(parsed.sessionID.count == client.hello.sessionID.count)
        if !client.hello.sessionID.isEmpty { #expect(parsed.sessionID != client.hello.sessionID) }
        #expect(parsed.pskIdentities.map(\.count) == client.hello.pskIdentities.map(\.count))
        for (mirrored, original) in zip(parsed.pskIdentities, client.hello.pskIdentities) { #expect(mirrored != original) }

        // Byte for byte: outside the fresh ranges the bytes are the client's; inside, every range
        // is new (the same ranges in both, found by a walk of the test's own).
        let ranges = freshRanges(client.hello.raw)
        #expect(freshRanges(mirror.raw) == ranges)
        var restored = mirror.raw
        for range in ranges {
            #expect(mirror.raw[range] != client.hello.raw[range], "range \(range) not fresh")
            restored.replaceSubrange(range, with: client.hello.raw[range])
        }
        #expect(restored == client.hello.raw)
    }

    @Test func computableAndRandomShares() throws {
        let expected: [(String, [UInt16], [UInt16])] = [
            ("curl", [0x001D], []), ("python", [0x001D], []), ("node", [0x001D], []), ("go", [0x001D], []),
            ("openssl-p-256", [0x0017], []), ("openssl-p-384", [0x0018], []), ("openssl-p-521", [0x0019], []),
            ("openssl-x448", [0x001E], []), ("openssl-ffdhe2048", [], [0x0100]),
        ]
        for (name, computable, random) in expected {
            let mirror = try CapturedHello(name).mirror()
            #expect(mirror.computableGroups == computable, "\(name)")
            #expect(mirror.uncomputableGroups == random, "\(name)")
        }
    }

    @Test func twoMirrorsOfOneHelloDiffer() throws {
        let client = try CapturedHello("curl")
        let (first, second) = (try client.mirror(), try client.mirror())
        #expect(first.random != second.random && first.raw != second.raw)
        #expect(freshRanges(first.raw) == freshRanges(second.raw))
    }

    @Test func refusals() throws {
        let client = try CapturedHello("curl")
        // Records that carry more or less than the hello.
        #expect(throws: MirrorError.framing("a partial record")) {
            try MirrorHello(of: client.hello, records: client.records.dropLast()).bytes.count
        }
        #expect(throws: MirrorError.framing("the records do not carry exactly the ClientHello")) {
            try MirrorHello(of: client.hello, records: client.records + [22, 3, 3, 0, 1, 0]).bytes.count
        }
        #expect(throws: MirrorError.framing("a record of type 23 around the ClientHello")) {
            try MirrorHello(of: client.hello, records: client.records + [23, 3, 3, 0, 1, 0]).bytes.count
        }
        // A TLS 1.2-only hello (openssl s_client -tls1_2): no key_share.
        let tls12 = decode(TLSReaderVectors.opensslTLS12Client)
        let noShare = try #require(try ClientFlightReader().feedAll(tls12))
        #expect(throws: MirrorError.noKeyShare) {
            try MirrorHello(of: noShare, records: tls12[..<recordsEnd(tls12)]).bytes.count
        }
    }

    @Test func earlyDataRecordsAreRandomBytesOfTheSameLengths() throws {
        let client = try CapturedHello("openssl-early-data")
        #expect(!client.rest.isEmpty)
        // In one piece and dripped byte by byte: the same headers, fresh bodies.
        var whole = MirrorEarlyData()
        let mirrored = whole.mirror(client.rest)
        var dripping = MirrorEarlyData()
        let dripped = client.rest.flatMap { dripping.mirror([$0]) }
        // openssl s_client's: a compatibility ChangeCipherSpec, then one application_data record.
        #expect(recordHeaders(client.rest) == [[20, 3, 3, 0, 1], [23, 3, 3, 1, 0x4F]])
        for out in [mirrored, dripped] {
            #expect(out.count == client.rest.count)
            #expect(recordHeaders(out) == recordHeaders(client.rest))
            // The ChangeCipherSpec as it was; the early data's body fresh.
            #expect(out[..<11] == client.rest[..<11])
            #expect(out[11...] != client.rest[11...])
        }
    }
}

extension ClientFlightReader {
    /// A new reader's answer to all of `bytes` at once.
    func feedAll(_ bytes: [UInt8]) throws -> ClientHello? {
        var reader = self
        return try reader.feed(bytes)
    }
}

/// The end of the records that carry a flight's first ClientHello.
func recordsEnd(_ bytes: [UInt8]) -> Int {
    var reader = ClientFlightReader()
    _ = try? reader.feed(bytes)
    return reader.bytesConsumed
}

@Suite struct MirrorKeyScheduleTests {
    /// RFC 8448 §3: from the (EC)DHE secret ("{server} extract secret "handshake"", IKM) and the
    /// transcript ClientHello, ServerHello to the published server_handshake_traffic_secret.
    @Test func serverHandshakeTrafficSecretOfRFC8448() throws {
        let shared = secret(hexBytes("8bd4054fb55b9d63fdfbacf9f04b9f0d35e6d63f537563efd46272900f89492d"))
        let suite = try TLS13Suite(0x1301)
        let derived = serverHandshakeTrafficSecret(
            shared: shared, suite: suite, signedTranscript: [RFC8448Vectors.clientHello, RFC8448Vectors.serverHello])
        #expect(derived.matches(secret(RFC8448Vectors.serverHandshakeTrafficSecret)))
        #expect(!derived.matches(secret(RFC8448Vectors.serverApplicationTrafficSecret)))
    }
}

@Suite struct MirrorSecondHelloTests {
    /// A HelloRetryRequest for TLS 1.3 (RFC 8446 §4.1.3) with the given key_share group and cookie.
    func helloRetry(group: UInt16, cookie: [UInt8]? = nil) -> [UInt8] {
        var extensions: [UInt8] = [0x00, 0x2B, 0x00, 0x02, 0x03, 0x04]                  // supported_versions
        extensions += [0x00, 0x33, 0x00, 0x02] + uint16Bytes(Int(group))                 // key_share
        if let cookie { extensions += [0x00, 0x2C] + uint16Bytes(cookie.count + 2) + uint16Bytes(cookie.count) + cookie }
        let body = [0x03, 0x03] + helloRetryRequestRandom + [0] + [0x13, 0x03, 0] + uint16Bytes(extensions.count) + extensions
        return [2, 0] + uint16Bytes(body.count) + body
    }

    /// curl's two hellos of TLS13Vectors.curlHRRChaCha (its second has a P-384 share, no cookie).
    func curlHellos() throws -> (first: ClientHello, firstRecords: ArraySlice<UInt8>, second: ClientHello, secondRecords: ArraySlice<UInt8>) {
        let bytes = decode(TLS13Vectors.curlHRRChaCha.client)
        var reader = ClientFlightReader()
        let first = try #require(try reader.feed(bytes))
        let firstEnd = reader.bytesConsumed
        let second = try #require(try reader.readSecondHello(bytes[firstEnd...]))
        return (first, bytes[..<firstEnd], second, bytes[firstEnd..<reader.bytesConsumed])
    }

    @Test func theMirrorsRetryMustAskForTheGroupTheClientWasAskedFor() throws {
        let curl = try curlHellos()
        let first = try MirrorHello(of: curl.first, records: curl.firstRecords)
        #expect(throws: MirrorError.retryGroupDiffers(client: 0x0018, mirror: 0x0017)) {
            try MirrorHello(secondOf: curl.second, records: curl.secondRecords, first: first, retry: helloRetry(group: 0x0017)).raw.count
        }
        let second = try MirrorHello(secondOf: curl.second, records: curl.secondRecords, first: first, retry: helloRetry(group: 0x0018))
        #expect(second.computableGroups == [0x0018] && second.random == first.random && second.sessionID == first.sessionID)
    }

    @Test func aCookieInOneRetryOnlyIsRefused() throws {
        let curl = try curlHellos()
        let first = try MirrorHello(of: curl.first, records: curl.firstRecords)
        #expect(throws: MirrorError.cookieMismatch) {
            try MirrorHello(secondOf: curl.second, records: curl.secondRecords, first: first,
                            retry: helloRetry(group: 0x0018, cookie: [1, 2, 3])).raw.count
        }
    }
}

@Suite struct EphemeralKeyStockTests {
    @Test func stockedKeysAreTakenOnceEachThenFreshOnesAreMade() throws {
        let stock = EphemeralKeyStock(capacity: 4)
        stock.fill(adding: 3)
        #expect(stock.count == 3)
        let taken = (0..<3).compactMap { _ in stock.take(.x25519) }
        #expect(taken.count == 3 && stock.count == 0)
        #expect(Set(taken.map(\.publicShare)).count == 3, "every stocked key is its own")
        let fresh = try #require(stock.take(.x25519), "an empty stock makes a key")
        #expect(!taken.map(\.publicShare).contains(fresh.publicShare) && stock.count == 0)
    }

    /// Two mirrored tunnels open before either client's hello arrives: each adds its key, and
    /// both hellos take a stocked one (topping up to one key would leave the second to make its
    /// own, on the path to its first byte).
    @Test func tunnelsOpenedTogetherEachStockTheirKey() {
        let stock = EphemeralKeyStock(capacity: 16)
        stock.fill(adding: 1)
        stock.fill(adding: 1)
        #expect(stock.count == 2)
        _ = stock.take(.x25519)
        #expect(stock.count == 1, "the second hello finds a key made before it")
    }

    @Test func theStockIsBoundedAndKeepsItsGroupOnly() throws {
        let stock = EphemeralKeyStock(capacity: 2)
        stock.fill(adding: 10)
        #expect(stock.count == 2)
        stock.fill(adding: 1)
        #expect(stock.count == 2, "filling never drops keys")
        let p256 = try #require(stock.take(.secp256r1))
        #expect(p256.group == .secp256r1 && p256.publicShare.count == 65 && stock.count == 2)
    }

    @Test func aStockedKeyAgreesWithItsPeer() throws {
        let stock = EphemeralKeyStock(capacity: 1)
        stock.fill(adding: 1)
        let ours = try #require(stock.take(.x25519)), theirs = try #require(EphemeralKey(.x25519))
        let a = try #require(ours.sharedSecret(with: theirs.publicShare)), b = try #require(theirs.sharedSecret(with: ours.publicShare))
        #expect(a.matches(b))
    }
}
