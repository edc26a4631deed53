import Foundation
import Testing
import TestSupport
@testable import TLSInspection

// The TLS 1.3 flight opener against RFC 8448 §3 (the published key schedule, the server's
// encrypted flight and its NewSessionTicket).

func secret(_ bytes: [UInt8]) -> SecretBytes { bytes.withUnsafeBytes { SecretBytes(copying: $0) } }

extension TLS13ServerFlight {
    mutating func feed(_ bytes: [UInt8]) throws(TLS13FlightError) {
        do { try bytes.withUnsafeBytes { raw in try feed(raw) } } catch { throw error as! TLS13FlightError }
    }
}

extension TLS13TicketReader {
    mutating func feed(_ bytes: [UInt8]) throws(TLS13FlightError) {
        do { try bytes.withUnsafeBytes { raw in try feed(raw) } } catch { throw error as! TLS13FlightError }
    }
}

/// What a driver ends with.
enum FlightOutcome: Equatable, CustomStringConvertible {
    case opened(TLS13Opening)
    case failed(TLS13FlightError)

    var description: String {
        switch self {
        case .opened(.needMore): return "needMore"
        case .opened(.verified(let flight)): return "verified(\(flight.chain.count) certificates, scheme \(flight.signatureScheme), end \(flight.flightEnd))"
        case .failed(let error): return "failed(\(error))"
        }
    }
}

/// Feeds `bytes` cut at `cuts`, opening after every piece when `openEachPiece`, else once at the end.
func openFlight(suite: UInt16, transcript: [[UInt8]], bytes: [UInt8], cuts: [Int] = [], secret: SecretBytes,
                openEachPiece: Bool = false, limit: Int = 128 * 1024) -> FlightOutcome {
    do throws(TLS13FlightError) {
        var flight = try TLS13ServerFlight(suite: suite, transcript: transcript, limit: limit)
        var start = 0
        var last = TLS13Opening.needMore
        for cut in cuts + [bytes.count] {
            try flight.feed(Array(bytes[start..<cut]))
            start = cut
            if openEachPiece { last = try flight.open(with: secret) }
        }
        if !openEachPiece { last = try flight.open(with: secret) }
        return .opened(last)
    }
    catch {
        return .failed(error)
    }
}

@Suite struct RFC8448Tests {
    typealias V = RFC8448Vectors

    @Test func keyAndIVFromTheServerHandshakeTrafficSecret() throws {
        let opener = try TLS13RecordOpener(suite: TLS13Suite(0x1301), trafficSecret: secret(V.serverHandshakeTrafficSecret))
        #expect(opener.keyMatches(V.serverHandshakeKey))
        #expect(opener.ivMatches(V.serverHandshakeIV))
        #expect(!opener.keyMatches(V.serverHandshakeIV + [0, 0, 0, 0]))
    }

    @Test func flightOpensAndVerifies() {
        let outcome = openFlight(suite: 0x1301, transcript: [V.clientHello, V.serverHello],
                                 bytes: V.serverFlightRecord, secret: secret(V.serverHandshakeTrafficSecret))
        let expected = TLS13VerifiedFlight(chain: [V.serverCertificate], certificateRequested: false,
                                           signatureScheme: 0x0804, flightEnd: V.serverFlightRecord.count)
        #expect(outcome == .opened(.verified(expected)))
    }

    @Test func ticketReaderFindsTheTicketAndStopsAtApplicationData() throws {
        var reader = try TLS13TicketReader(suite: 0x1301)
        let key = secret(V.serverApplicationTrafficSecret)
        try reader.feed(V.newSessionTicketRecord)
        #expect(try reader.read(with: key) == .needMore(tickets: [V.ticket]))
        try reader.feed(V.serverApplicationDataRecord)
        #expect(try reader.read(with: key) == .done(tickets: [V.ticket]))
        // Done: more bytes are not kept, the answer stays.
        try reader.feed(V.newSessionTicketRecord)
        #expect(try reader.read(with: key) == .done(tickets: [V.ticket]))
    }
}

// MARK: Real captures (TLS13Vectors.swift, Fixtures/capture-tls13.py)

/// One capture read the way the stream check reads a tunnel: the passive readers give the
/// transcript and the server's bytes from the first encrypted record on.
struct Tunnel13: CustomTestStringConvertible, Sendable {
    let capture: TLS13Capture
    let transcript: [[UInt8]]
    /// Server bytes after its plaintext (ServerHello, CCS): what TLS13ServerFlight is fed.
    let encrypted: [UInt8]
    var testDescription: String { capture.name }

    var handshakeSecret: SecretBytes { secret(hexBytes(capture.handshakeSecret)) }
    var trafficSecret: SecretBytes { secret(hexBytes(capture.trafficSecret)) }
    var flight: [UInt8] { Array(encrypted[..<capture.flightEnd]) }
    func variant(_ base64: String) -> [UInt8] { decode(base64) }

    init(_ capture: TLS13Capture) throws {
        self.capture = capture
        let client = decode(capture.client)
        let server = decode(capture.server)
        var clientReader = ClientFlightReader()
        let first = try #require(try clientReader.feed(client))
        var serverReader = ServerFlightReader()
        let hellos = try serverReader.feed(server).compactMap { event -> ServerHello? in
            if case .serverHello(let hello) = event { return hello }
            return nil
        }
        #expect(serverReader.bytesConsumed == capture.plaintextEnd)
        if capture.helloRetry {
            let rest = client[clientReader.bytesConsumed...]
            let second = try #require(try clientReader.readSecondHello(rest))
            // Through the second hello's record; the 21 bytes of the client's next record untouched.
            #expect(clientReader.bytesConsumed == client.count - 21)
            #expect(second.random == first.random && second.raw != first.raw)
            #expect(hellos.count == 2 && hellos[0].isHelloRetryRequest)
            transcript = [first.raw, hellos[0].raw, second.raw, hellos[1].raw]
        } else {
            #expect(hellos.count == 1)
            transcript = [first.raw, hellos[0].raw]
        }
        #expect(hellos.last?.cipherSuite == capture.suite)
        encrypted = Array(server[serverReader.bytesConsumed...])
    }

    func open(_ bytes: [UInt8], cuts: [Int] = [], secret: SecretBytes? = nil, transcript: [[UInt8]]? = nil,
              openEachPiece: Bool = false, limit: Int = 128 * 1024) -> FlightOutcome {
        openFlight(suite: capture.suite, transcript: transcript ?? self.transcript, bytes: bytes, cuts: cuts,
                   secret: secret ?? handshakeSecret, openEachPiece: openEachPiece, limit: limit)
    }

    /// The chain the capture script decrypted; for a fixture leaf, that fixture's chain file.
    func expectedChain() throws -> [[UInt8]] {
        let decrypted = capture.chain.map(decode)
        if !capture.leaf.hasPrefix("generated-") { #expect(decrypted == (try chainDER("\(capture.leaf).chain.pem"))) }
        return decrypted
    }

    func expectedFlight() throws -> FlightOutcome {
        .opened(.verified(TLS13VerifiedFlight(
            chain: try expectedChain(), certificateRequested: capture.certificateRequested,
            signatureScheme: capture.scheme, flightEnd: capture.flightEnd)))
    }

    static let all: [Tunnel13] = TLS13Vectors.all.map { try! Tunnel13($0) }
}

@Suite struct TLS13CaptureTests {
    @Test(arguments: Tunnel13.all)
    func flightOpensToTheServedChain(tunnel: Tunnel13) throws {
        let expected = try tunnel.expectedFlight()
        #expect(tunnel.open(tunnel.flight) == expected)
        // Fed with what follows the flight (tickets, application data) too: the same flight, the same end.
        #expect(tunnel.open(tunnel.encrypted) == expected)
        // The script's own re-encryption of the same messages opens alike (one record, so another end).
        guard case .opened(.verified(let resealed)) = tunnel.open(tunnel.variant(tunnel.capture.resealed)) else {
            Issue.record("resealed flight did not verify")
            return
        }
        #expect(resealed.chain == (try tunnel.expectedChain()))
    }

    @Test(arguments: Tunnel13.all)
    func everySplitAndADripGiveTheSameResult(tunnel: Tunnel13) throws {
        let expected = try tunnel.expectedFlight()
        let flight = tunnel.flight
        for cut in 1..<flight.count {
            #expect(tunnel.open(flight, cuts: [cut]) == expected, "cut at \(cut)")
            #expect(tunnel.open(flight, cuts: [cut], openEachPiece: true) == expected, "cut at \(cut), opened twice")
        }
        #expect(tunnel.open(flight, cuts: drip(flight.count), openEachPiece: true) == expected)
        #expect(tunnel.open(flight, cuts: drip(flight.count)) == expected)
    }

    @Test(arguments: Tunnel13.all)
    func everyTruncationNeedsMore(tunnel: Tunnel13) {
        let flight = tunnel.flight
        for end in 0..<flight.count {
            #expect(tunnel.open(Array(flight[..<end])) == .opened(.needMore), "truncated at \(end)")
        }
    }

    @Test(arguments: Tunnel13.all)
    func aCorruptedCiphertextByteIsUndecryptable(tunnel: Tunnel13) {
        let flight = tunnel.flight
        var position = 0
        var corrupted = 0
        while position + tlsRecordHeaderLength <= flight.count {
            let length = Int(flight[position + 3]) << 8 | Int(flight[position + 4])
            let body = position + tlsRecordHeaderLength..<position + tlsRecordHeaderLength + length
            if flight[position] == tlsContentTypeApplicationData {
                for index in body {
                    var bytes = flight
                    bytes[index] ^= 0x40
                    #expect(tunnel.open(bytes) == .failed(.undecryptable), "byte \(index)")
                    corrupted += 1
                }
            }
            position = body.upperBound
        }
        #expect(corrupted > 1000)
    }

    @Test(arguments: Tunnel13.all)
    func aWrongSecretIsUndecryptable(tunnel: Tunnel13) {
        // The client's other secret for the same connection, and the right one with one bit flipped.
        #expect(tunnel.open(tunnel.flight, secret: tunnel.trafficSecret) == .failed(.undecryptable))
        var flipped = hexBytes(tunnel.capture.handshakeSecret)
        flipped[7] ^= 1
        #expect(tunnel.open(tunnel.flight, secret: secret(flipped)) == .failed(.undecryptable))
        #expect(tunnel.open(tunnel.flight, secret: secret(Array(flipped.dropLast()))) == .failed(.undecryptable))
        // A second open with another secret after the first opened records.
        var flight = try! TLS13ServerFlight(suite: tunnel.capture.suite, transcript: tunnel.transcript)
        try! flight.feed(Array(tunnel.flight.prefix(100)))
        #expect(try! flight.open(with: tunnel.handshakeSecret) == .needMore)
        #expect(throws: TLS13FlightError.undecryptable) { try flight.open(with: secret(flipped)) }
    }

    @Test(arguments: Tunnel13.all)
    func aSignatureByAnotherKeyOrForAnotherHandshakeFailsCertificateVerify(tunnel: Tunnel13) {
        // The genuine chain, signed by a key that is not the leaf's.
        guard case .failed(.certificateVerifyFailed(let reason)) = tunnel.open(tunnel.variant(tunnel.capture.rogueSigned)) else {
            Issue.record("re-signed flight was not refused")
            return
        }
        #expect(reason == "the signature does not verify with the leaf's key")
        // The rogue chain with the genuine signature.
        #expect(tunnel.open(tunnel.variant(tunnel.capture.rogueChain)) != (try? tunnel.expectedFlight()))
        guard case .failed(.certificateVerifyFailed) = tunnel.open(tunnel.variant(tunnel.capture.rogueChain)) else {
            Issue.record("rogue chain with the genuine signature was not refused")
            return
        }
        // The flight of another handshake: the ClientHello pinproxy relayed differs by one byte.
        var transcript = tunnel.transcript
        transcript[0][20] ^= 1
        guard case .failed(.certificateVerifyFailed) = tunnel.open(tunnel.flight, transcript: transcript) else {
            Issue.record("tampered ClientHello was not refused")
            return
        }
        if tunnel.capture.helloRetry {  // the second ClientHello too
            var transcript = tunnel.transcript
            transcript[2][20] ^= 1
            guard case .failed(.certificateVerifyFailed) = tunnel.open(tunnel.flight, transcript: transcript) else {
                Issue.record("tampered second ClientHello was not refused")
                return
            }
        }
    }

    @Test(arguments: Tunnel13.all)
    func anAlteredFinishedMismatches(tunnel: Tunnel13) {
        #expect(tunnel.open(tunnel.variant(tunnel.capture.finishedAltered)) == .failed(.finishedMismatch))
    }

    @Test(arguments: Tunnel13.all)
    func overTheLimitIsTooLarge(tunnel: Tunnel13) {
        #expect(tunnel.open(tunnel.flight, limit: tunnel.capture.flightEnd - 1) == .failed(.tooLarge))
        #expect(tunnel.open(tunnel.flight, limit: tunnel.capture.flightEnd) == (try? tunnel.expectedFlight()))
    }

    @Test(arguments: Tunnel13.all)
    func ticketReaderFindsTheTicketsAndStopsAtApplicationData(tunnel: Tunnel13) throws {
        let after = Array(tunnel.encrypted[tunnel.capture.flightEnd...])
        let tickets = tunnel.capture.tickets.map(hexBytes)
        #expect(tickets.count == 2)
        for cuts in [[], drip(after.count)] {
            var reader = try TLS13TicketReader(suite: tunnel.capture.suite)
            var start = 0
            var last = TLS13TicketReading.needMore(tickets: [])
            for cut in cuts + [after.count] {
                try reader.feed(Array(after[start..<cut]))
                start = cut
                last = try reader.read(with: tunnel.trafficSecret)
            }
            #expect(last == .done(tickets: tickets))
        }
        // Only the tickets' records: more is needed.
        var reader = try TLS13TicketReader(suite: tunnel.capture.suite)
        try reader.feed(Array(after.dropLast(1)))
        #expect(try reader.read(with: tunnel.trafficSecret) == .needMore(tickets: tickets))
        // The handshake secret does not open them.
        var wrong = try TLS13TicketReader(suite: tunnel.capture.suite)
        try wrong.feed(after)
        #expect(throws: TLS13FlightError.undecryptable) { try wrong.read(with: tunnel.handshakeSecret) }
    }
}

@Suite struct TLS13FlightEdgeTests {
    let tunnel = Tunnel13.all[0]

    @Test func unsupportedSuitesAndMismatchedTranscripts() {
        #expect(throws: TLS13FlightError.unsupportedSuite(0x1304)) { try TLS13ServerFlight(suite: 0x1304, transcript: tunnel.transcript) }
        #expect(throws: TLS13FlightError.unsupportedSuite(0xC02F)) { try TLS13TicketReader(suite: 0xC02F) }
        let other: UInt16 = tunnel.capture.suite == 0x1301 ? 0x1302 : 0x1301
        #expect(throws: TLS13FlightError.malformed("ServerHello selected \(hex(tunnel.capture.suite)), not \(hex(other))")) {
            try TLS13ServerFlight(suite: other, transcript: tunnel.transcript)
        }
        #expect(throws: TLS13FlightError.malformed("transcript is not ClientHello, [HelloRetryRequest, ClientHello,] ServerHello")) {
            try TLS13ServerFlight(suite: tunnel.capture.suite, transcript: [tunnel.transcript[1], tunnel.transcript[0]])
        }
    }

    @Test func recordFramingIsChecked() {
        let flight = tunnel.flight
        // A compatibility ChangeCipherSpec before (or between) the records is skipped.
        let ccs: [UInt8] = [20, 3, 3, 0, 1, 1]
        guard case .opened(.verified(let withCCS)) = tunnel.open(ccs + flight) else { Issue.record("CCS not skipped"); return }
        #expect(withCCS.flightEnd == tunnel.capture.flightEnd + ccs.count)
        #expect(tunnel.open([20, 3, 3, 0, 2, 1, 1] + flight) == .failed(.malformed("change_cipher_spec of 2 bytes")))
        #expect(tunnel.open([22, 3, 3, 0, 1, 1]) == .failed(.malformed("plaintext handshake record")))
        #expect(tunnel.open([21, 3, 3, 0, 2, 2, 40]) == .failed(.malformed("plaintext alert")))
        #expect(tunnel.open([23, 3, 1, 0, 1]) == .failed(.malformed("record version 0x0301")))
        #expect(tunnel.open([23, 3, 3, 0x41, 1]) == .failed(.malformed("record of 16641 bytes")))
        #expect(tunnel.open([23, 3, 3, 0, 0]) == .failed(.malformed("empty record of type 23")))
        // Too short to hold a tag: does not open.
        #expect(tunnel.open([23, 3, 3, 0, 16] + [UInt8](repeating: 0, count: 16)) == .failed(.undecryptable))
    }

    @Test func legacySchemesAndSchemesThatDoNotFitTheKeyAreRefused() throws {
        let leaf = try #require(tunnel.capture.chain.first.map(decode))  // RSA 2048
        let hash = [UInt8](repeating: 0, count: 32)
        for (scheme, reason) in [(UInt16(0x0401), "rsa_pkcs1 scheme 0x0401 is not allowed in TLS 1.3"),
                                 (0x0601, "rsa_pkcs1 scheme 0x0601 is not allowed in TLS 1.3"),
                                 (0x0203, "SHA-1 scheme 0x0203 is not allowed in TLS 1.3"),
                                 (0x0403, "scheme 0x0403 does not fit the leaf's RSA 2048 key"),
                                 (0x0809, "scheme 0x0809 does not fit the leaf's RSA 2048 key"),
                                 (0x0807, "scheme 0x0807 does not fit the leaf's RSA 2048 key"),
                                 (0xFE00, "unknown signature scheme 0xfe00"),
                                 (0x0804, "the signature does not verify with the leaf's key")] {
            #expect(throws: TLS13FlightError.certificateVerifyFailed(reason)) {
                try verifyServerSignature(scheme: scheme, signature: [1, 2, 3], leaf: leaf, transcriptHash: hash)
            }
        }
        #expect(throws: TLS13FlightError.certificateVerifyFailed("the leaf certificate does not parse")) {
            try verifyServerSignature(scheme: 0x0804, signature: [], leaf: [0x30, 0], transcriptHash: hash)
        }
    }

    @Test func errorsNameNoSecret() {
        let texts = [TLS13FlightError.undecryptable, .finishedMismatch, .tooLarge, .unsupportedSuite(0x1304),
                     .malformed("x"), .certificateVerifyFailed("y")].map(\.description)
        #expect(texts.allSatisfy { !$0.contains(tunnel.capture.handshakeSecret.prefix(8)) })
        #expect(tunnel.handshakeSecret.description == "SecretBytes(\(tunnel.capture.handshakeSecret.count / 2) bytes)")
    }

    @Test func secondHelloReading() throws {
        // Hand-built: a first hello, a compatibility CCS, the second hello (same random), and a mismatch.
        let first = record(22, clientHelloMessage([(0, sniData(Array("a.test".utf8)))]))
        var reader = ClientFlightReader()
        #expect(throws: TLSReadError.malformed("second ClientHello read before the first")) { try reader.readSecondHello([]) }
        _ = try #require(try reader.feed(first))
        let second = record(22, clientHelloMessage([(0, sniData(Array("a.test".utf8))), (43, [2, 3, 4])]))
        let hello = try #require(try reader.readSecondHello([20, 3, 3, 0, 1, 1] + second + [23, 3, 3]))
        #expect(hello.offeredVersions == [0x0304])
        #expect(reader.bytesConsumed == first.count + 6 + second.count)
        // Early data, a second CCS, another random.
        for (bytes, error) in [([23, 3, 3, 0, 1, 0], "application_data before the second ClientHello"),
                               ([20, 3, 3, 0, 1, 1, 20, 3, 3, 0, 1, 1], "second change_cipher_spec before the second ClientHello"),
                               (record(22, handshake(2, [0])), "handshake type 2 before the second ClientHello")] as [([UInt8], String)] {
            var reader = ClientFlightReader()
            _ = try reader.feed(first)
            #expect(throws: TLSReadError.malformed(error)) { try reader.readSecondHello(bytes) }
        }
        var otherRandom = clientHelloMessage([])
        otherRandom[10] ^= 1
        var mismatch = ClientFlightReader()
        _ = try mismatch.feed(first)
        #expect(throws: TLSReadError.malformed("second ClientHello with another random")) { try mismatch.readSecondHello(record(22, otherRandom)) }
    }
}
