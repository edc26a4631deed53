import Foundation
import Testing
import TestSupport
@testable import TLSInspection

// The passive TLS reader against real flights (TLSReaderVectors.swift, captured on loopback by
// Fixtures/capture-flights.py) and hand-broken variants of them. Every vector goes through the
// drip driver (one byte at a time), the blast driver (one piece) and a two-piece split at every
// position, and all must agree.

let apiHost = "api.pinproxy.test"

func decode(_ base64: String) -> [UInt8] {
    Array(Data(base64Encoded: base64, options: .ignoreUnknownCharacters)!)
}

/// One captured connection, both directions.
struct Flight: CustomTestStringConvertible, Sendable {
    let name: String
    let client: [UInt8]
    let server: [UInt8]
    var testDescription: String { name }

    init(_ name: String, _ client: String, _ server: String) {
        self.name = name
        self.client = decode(client)
        self.server = decode(server)
    }

    typealias V = TLSReaderVectors
    static let opensslTLS12 = Flight("opensslTLS12", V.opensslTLS12Client, V.opensslTLS12Server)
    static let opensslTLS13 = Flight("opensslTLS13", V.opensslTLS13Client, V.opensslTLS13Server)
    static let opensslNoSNI = Flight("opensslNoSNI", V.opensslNoSNIClient, V.opensslNoSNIServer)
    static let curlTLS12 = Flight("curlTLS12", V.curlTLS12Client, V.curlTLS12Server)
    static let curlTLS13 = Flight("curlTLS13", V.curlTLS13Client, V.curlTLS13Server)
    static let pythonTLS13 = Flight("pythonTLS13", V.pythonTLS13Client, V.pythonTLS13Server)
    static let ticketFull = Flight("ticketFull", V.ticketFullClient, V.ticketFullServer)
    static let ticketResumed = Flight("ticketResumed", V.ticketResumedClient, V.ticketResumedServer)
    static let sessionIDFull = Flight("sessionIDFull", V.sessionIDFullClient, V.sessionIDFullServer)
    static let sessionIDResumed = Flight("sessionIDResumed", V.sessionIDResumedClient, V.sessionIDResumedServer)
    static let pskResumed = Flight("pskResumed", V.pskResumedClient, V.pskResumedServer)
    static let helloRetryRequest = Flight("helloRetryRequest", V.helloRetryRequestClient, V.helloRetryRequestServer)

    static let all = [opensslTLS12, opensslTLS13, opensslNoSNI, curlTLS12, curlTLS13, pythonTLS13,
                      ticketFull, ticketResumed, sessionIDFull, sessionIDResumed, pskResumed, helloRetryRequest]
}

// MARK: Drivers

/// What a client-direction driver ends with: the hello (nil: more needed) and the bytes taken, or the error.
enum ClientOutcome: Equatable {
    case read(ClientHello?, consumed: Int)
    case failed(TLSReadError)
}

/// What a server-direction driver ends with: every event in order and the bytes taken, or the error.
enum ServerOutcome: Equatable {
    case read([ServerFlightEvent], consumed: Int)
    case failed(TLSReadError)
}

/// Feeds `bytes` cut at `cuts` (ascending offsets). The caller stops feeding once the hello is back.
func readClient(_ bytes: [UInt8], cuts: [Int] = [], limit: Int = 64 * 1024) -> ClientOutcome {
    var reader = ClientFlightReader(limit: limit)
    do {
        for piece in pieces(bytes, cuts) {
            if let hello = try reader.feed(piece) { return .read(hello, consumed: reader.bytesConsumed) }
        }
        return .read(nil, consumed: reader.bytesConsumed)
    } catch {
        return .failed(error)
    }
}

/// Feeds `bytes` cut at `cuts`; keeps feeding after the reader is done, which must add nothing.
func readServer(_ bytes: [UInt8], cuts: [Int] = [], limit: Int = 128 * 1024) -> ServerOutcome {
    var reader = ServerFlightReader(limit: limit)
    var events: [ServerFlightEvent] = []
    do {
        for piece in pieces(bytes, cuts) { events += try reader.feed(piece) }
        return .read(events, consumed: reader.bytesConsumed)
    } catch {
        return .failed(error)
    }
}

func pieces(_ bytes: [UInt8], _ cuts: [Int]) -> [ArraySlice<UInt8>] {
    var out: [ArraySlice<UInt8>] = []
    var start = 0
    for cut in cuts + [bytes.count] {
        out.append(bytes[start..<cut])
        start = cut
    }
    return out
}

/// Every byte its own piece.
func drip(_ count: Int) -> [Int] { count > 1 ? Array(1..<count) : [] }

/// The drip driver and a cut at every position agree with the blast driver.
func expectDripAndSplitsAgree(_ bytes: [UInt8], limit: Int? = nil, sourceLocation: SourceLocation = #_sourceLocation) {
    let blastClient = readClient(bytes, limit: limit ?? 64 * 1024)
    let blastServer = readServer(bytes, limit: limit ?? 128 * 1024)
    #expect(readClient(bytes, cuts: drip(bytes.count), limit: limit ?? 64 * 1024) == blastClient, "client drip", sourceLocation: sourceLocation)
    #expect(readServer(bytes, cuts: drip(bytes.count), limit: limit ?? 128 * 1024) == blastServer, "server drip", sourceLocation: sourceLocation)
    for cut in 0...bytes.count {
        #expect(readClient(bytes, cuts: [cut], limit: limit ?? 64 * 1024) == blastClient, "client cut at \(cut)", sourceLocation: sourceLocation)
        #expect(readServer(bytes, cuts: [cut], limit: limit ?? 128 * 1024) == blastServer, "server cut at \(cut)", sourceLocation: sourceLocation)
    }
}

func clientHello(_ flight: Flight, sourceLocation: SourceLocation = #_sourceLocation) throws -> ClientHello {
    guard case .read(let hello?, _) = readClient(flight.client) else {
        Issue.record("\(flight.name): no ClientHello: \(readClient(flight.client))", sourceLocation: sourceLocation)
        throw TLSReadError.malformed("test")
    }
    return hello
}

func serverEvents(_ flight: Flight, sourceLocation: SourceLocation = #_sourceLocation) throws -> [ServerFlightEvent] {
    guard case .read(let events, _) = readServer(flight.server) else {
        Issue.record("\(flight.name): \(readServer(flight.server))", sourceLocation: sourceLocation)
        throw TLSReadError.malformed("test")
    }
    return events
}

/// The events in short: "serverHello 0x0303", "certificate 2", "handshake 12", "ticket", "ccs", "encrypted".
func outline(_ events: [ServerFlightEvent]) -> [String] {
    events.map {
        switch $0 {
        case .serverHello(let hello): return (hello.isHelloRetryRequest ? "helloRetryRequest " : "serverHello ") + hex(hello.version)
        case .certificate(let chain): return "certificate \(chain.count)"
        case .newSessionTicket: return "ticket"
        case .otherHandshake(let type, _): return "handshake \(type)"
        case .changeCipherSpec: return "ccs"
        case .encrypted: return "encrypted"
        }
    }
}

func chainDER(_ name: String) throws -> [[UInt8]] { try fixture(name).map(\.der) }

// MARK: Building hellos by hand

/// A record of `type` around `fragment`.
func record(_ type: UInt8, _ fragment: [UInt8], version: UInt16 = 0x0303) -> [UInt8] {
    [type, UInt8(version >> 8), UInt8(version & 0xFF), UInt8(fragment.count >> 8), UInt8(fragment.count & 0xFF)] + fragment
}

func handshake(_ type: UInt8, _ body: [UInt8]) -> [UInt8] {
    [type, UInt8(body.count >> 16), UInt8(body.count >> 8 & 0xFF), UInt8(body.count & 0xFF)] + body
}

func u16(_ value: Int) -> [UInt8] { [UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }

/// A ClientHello handshake message with these extensions (type, data), in order.
func clientHelloMessage(_ extensions: [(UInt16, [UInt8])]) -> [UInt8] {
    var body: [UInt8] = u16(0x0303) + [UInt8](repeating: 7, count: 32) + [0] + u16(2) + [0x13, 0x01] + [1, 0]
    let list = extensions.flatMap { u16(Int($0.0)) + u16($0.1.count) + $0.1 }
    body += u16(list.count) + list
    return handshake(1, body)
}

/// server_name extension data naming `name` (RFC 6066 §3).
func sniData(_ name: [UInt8], type: UInt8 = 0) -> [UInt8] {
    let entry = [type] + u16(name.count) + name
    return u16(entry.count) + entry
}

// MARK: Tests

@Suite struct TLSReaderTests {
    // The drivers agree on every real flight, both directions.

    @Test(arguments: Flight.all)
    func dripBlastAndEverySplitAgreeOnClientFlight(flight: Flight) {
        expectDripAndSplitsAgree(flight.client)
    }

    @Test(arguments: Flight.all)
    func dripBlastAndEverySplitAgreeOnServerFlight(flight: Flight) {
        expectDripAndSplitsAgree(flight.server)
    }

    // What each real client sent.

    @Test(arguments: [
        (Flight.opensslTLS12, apiHost, [0x0303], [], false),
        (Flight.opensslTLS13, apiHost, [0x0304], [], false),
        (Flight.opensslNoSNI, nil, [0x0303], [], false),
        (Flight.curlTLS12, apiHost, [0x0303], ["h2", "http/1.1"], false),
        (Flight.curlTLS13, apiHost, [0x0304], ["h2", "http/1.1"], false),
        (Flight.pythonTLS13, apiHost, [0x0304, 0x0303], [], false),
        (Flight.pskResumed, apiHost, [0x0304], [], true),
        (Flight.helloRetryRequest, apiHost, [0x0304], [], false),
    ] as [(Flight, String?, [UInt16], [String], Bool)])
    func clientHelloFields(flight: Flight, serverName: String?, versions: [UInt16], alpn: [String], psk: Bool) throws {
        let hello = try clientHello(flight)
        #expect(hello.serverName == serverName)
        #expect(hello.offeredVersions == versions)
        #expect(hello.alpn == alpn)
        #expect(hello.legacyVersion == 0x0303)
        #expect(hello.random.count == 32)
        #expect(hello.offersPreSharedKey == psk)
        // The whole message, which is the whole first record: the next record is left alone.
        #expect(Array(flight.client[5..<5 + hello.raw.count]) == hello.raw)
        #expect(readClient(flight.client) == .read(hello, consumed: 5 + hello.raw.count))
        #expect(flight.client.count > 5 + hello.raw.count)
    }

    // What each real server sent, and where its plaintext ended.

    @Test(arguments: [
        (Flight.opensslTLS12, ["serverHello 0x0303", "certificate 2", "handshake 12", "handshake 14", "ticket", "ccs"]),
        (Flight.opensslNoSNI, ["serverHello 0x0303", "certificate 2", "handshake 12", "handshake 14", "ticket", "ccs"]),
        // curl offers no session_ticket extension, so no ticket.
        (Flight.curlTLS12, ["serverHello 0x0303", "certificate 2", "handshake 12", "handshake 14", "ccs"]),
        (Flight.ticketFull, ["serverHello 0x0303", "certificate 2", "handshake 12", "handshake 14", "ticket", "ccs"]),
        (Flight.sessionIDFull, ["serverHello 0x0303", "certificate 2", "handshake 12", "handshake 14", "ccs"]),
        (Flight.ticketResumed, ["serverHello 0x0303", "ccs"]),
        (Flight.sessionIDResumed, ["serverHello 0x0303", "ccs"]),
        (Flight.opensslTLS13, ["serverHello 0x0304", "encrypted"]),
        (Flight.curlTLS13, ["serverHello 0x0304", "encrypted"]),
        (Flight.pythonTLS13, ["serverHello 0x0304", "encrypted"]),
        (Flight.pskResumed, ["serverHello 0x0304", "encrypted"]),
        (Flight.helloRetryRequest, ["helloRetryRequest 0x0304", "serverHello 0x0304", "encrypted"]),
    ] as [(Flight, [String])])
    func serverFlightEvents(flight: Flight, expected: [String]) throws {
        let events = try serverEvents(flight)
        #expect(outline(events) == expected)
        guard case .read(_, let consumed) = readServer(flight.server) else { return }
        // The capture ends with one record cut to header + 16 bytes. TLS 1.2 stops at the end of the
        // ChangeCipherSpec record (that record untouched); TLS 1.3 at the start of the first
        // encrypted record, its header not taken (TLS13ServerFlight reads from there).
        #expect(consumed == flight.server.count - 5 - 16)
    }

    @Test(arguments: [(Flight.opensslTLS12, "leaf-ec256.chain.pem"), (Flight.opensslNoSNI, "leaf-ec256.chain.pem"),
                      (Flight.ticketFull, "leaf-ec256.chain.pem"), (Flight.sessionIDFull, "leaf-ec256.chain.pem"),
                      (Flight.curlTLS12, "leaf-rsa2048.chain.pem")])
    func tls12ChainIsTheServedFixtureChainLeafFirst(flight: Flight, chain: String) throws {
        let certificates = try serverEvents(flight).compactMap { event -> [[UInt8]]? in
            if case .certificate(let list) = event { return list }
            return nil
        }
        #expect(certificates == [try chainDER(chain)])
    }

    @Test func ticketIssuedInAFullHandshakeIsPresentedOnResumption() throws {
        let full = try clientHello(.ticketFull)
        #expect(full.sessionTicket == [])  // an empty extension asks for a ticket
        let tickets = try serverEvents(.ticketFull).compactMap { event -> [UInt8]? in
            if case .newSessionTicket(let ticket) = event { return ticket }
            return nil
        }
        let ticket = try #require(tickets.first)
        #expect(tickets.count == 1 && ticket.count > 32)

        let resumed = try clientHello(.ticketResumed)
        #expect(resumed.sessionTicket == ticket)
        // RFC 5077 §3.4: the server accepts the ticket by echoing the client's session id.
        guard case .serverHello(let hello) = try serverEvents(.ticketResumed).first else { Issue.record("no ServerHello"); return }
        #expect(!resumed.sessionID.isEmpty && hello.sessionID == resumed.sessionID)
    }

    @Test func sessionIDOfAFullHandshakeIsEchoedOnResumption() throws {
        #expect(try clientHello(.sessionIDFull).sessionTicket == nil)
        #expect(try clientHello(.curlTLS12).sessionTicket == nil)
        guard case .serverHello(let full) = try serverEvents(.sessionIDFull).first,
              case .serverHello(let resumed) = try serverEvents(.sessionIDResumed).first else {
            Issue.record("no ServerHello")
            return
        }
        #expect(full.sessionID.count == 32)
        #expect(try clientHello(.sessionIDResumed).sessionID == full.sessionID)
        #expect(resumed.sessionID == full.sessionID)
        #expect(resumed.cipherSuite == full.cipherSuite)
    }

    @Test func helloRetryRequestIsReadAndTheSecondServerHelloFollows() throws {
        let events = try serverEvents(.helloRetryRequest)
        guard case .serverHello(let retry) = events[0], case .serverHello(let hello) = events[1] else {
            Issue.record("\(outline(events))")
            return
        }
        #expect(retry.isHelloRetryRequest && retry.random == helloRetryRequestRandom)
        #expect(!hello.isHelloRetryRequest && hello.version == 0x0304)
        #expect(retry.cipherSuite == hello.cipherSuite)
        #expect(Array(retry.raw.prefix(1)) == [2] && Array(hello.raw.prefix(1)) == [2])
    }

    // The ClientHello and the server flight read the same when records are cut differently.

    @Test(arguments: [1, 2, 7, 50, 100])
    func clientHelloSpanningRecordsReadsTheSame(recordSize: Int) throws {
        for flight in Flight.all {
            let hello = try clientHello(flight)
            var bytes: [UInt8] = []
            for start in stride(from: 0, to: hello.raw.count, by: recordSize) {
                bytes += record(22, Array(hello.raw[start..<min(start + recordSize, hello.raw.count)]), version: 0x0301)
            }
            #expect(readClient(bytes) == .read(hello, consumed: bytes.count))
            #expect(readClient(bytes, cuts: drip(bytes.count)) == .read(hello, consumed: bytes.count))
        }
    }

    @Test(arguments: [3, 100, 1000, 16384])
    func serverMessagesSpanningOrSharingRecordsReadTheSame(recordSize: Int) throws {
        // Every handshake message of a TLS 1.2 flight in one byte stream, cut into records anew.
        let events = try serverEvents(.opensslTLS12)
        let messages = events.flatMap { event -> [UInt8] in
            switch event {
            case .serverHello(let hello): return hello.raw
            case .otherHandshake(_, let raw): return raw
            case .certificate(let chain):
                let list = chain.flatMap { [UInt8($0.count >> 16), UInt8($0.count >> 8 & 0xFF), UInt8($0.count & 0xFF)] + $0 }
                return handshake(11, [UInt8(list.count >> 16), UInt8(list.count >> 8 & 0xFF), UInt8(list.count & 0xFF)] + list)
            case .newSessionTicket(let ticket): return handshake(4, [0, 0, 0x1C, 0x20] + u16(ticket.count) + ticket)
            default: return []
            }
        }
        var bytes: [UInt8] = []
        for start in stride(from: 0, to: messages.count, by: recordSize) {
            bytes += record(22, Array(messages[start..<min(start + recordSize, messages.count)]))
        }
        bytes += record(20, [1])
        #expect(readServer(bytes) == .read(events, consumed: bytes.count))
        if recordSize >= 100 { expectDripAndSplitsAgree(bytes) }
    }

    // Truncated, oversized and corrupted flights.

    @Test(arguments: Flight.all)
    func everyTruncationWaitsForMoreAndNeverFails(flight: Flight) throws {
        let hello = try clientHello(flight)
        for end in 0..<5 + hello.raw.count {
            #expect(readClient(Array(flight.client[..<end])) == .read(nil, consumed: end))
        }
        guard case .read(let events, let consumed) = readServer(flight.server) else { return }
        for end in 0..<consumed {
            guard case .read(let partial, end) = readServer(Array(flight.server[..<end])) else {
                Issue.record("cut at \(end): \(readServer(Array(flight.server[..<end])))")
                return
            }
            #expect(events.starts(with: partial) && partial.count < events.count)
        }
    }

    @Test func flightsOverTheLimitAreTooLarge() {
        #expect(readClient(Flight.curlTLS13.client, limit: 300) == .failed(.tooLarge(limit: 300)))
        #expect(readClient(Flight.curlTLS13.client, cuts: drip(523), limit: 300) == .failed(.tooLarge(limit: 300)))
        #expect(readServer(Flight.opensslTLS12.server, limit: 1000) == .failed(.tooLarge(limit: 1000)))
        // Exactly the bytes it needs is within the limit.
        let hello = readClient(Flight.curlTLS13.client)
        guard case .read(_, let consumed) = hello else { Issue.record("\(hello)"); return }
        #expect(readClient(Flight.curlTLS13.client, limit: consumed) == hello)
        expectDripAndSplitsAgree(Flight.opensslTLS12.server, limit: 1000)
    }

    @Test func aDeclaredHandshakeLengthBeyondTheLimitIsTooLargeAtOnce() {
        // A 16 MiB ClientHello announced in a 4-byte record: refused after 9 bytes, nothing buffered.
        let announce = record(22, [1, 0xFF, 0xFF, 0xFF])
        #expect(readClient(announce) == .failed(.tooLarge(limit: 64 * 1024)))
        #expect(readServer(record(22, [2, 0x02, 0x00, 0x00])) == .failed(.tooLarge(limit: 128 * 1024)))
        // Just under the limit: waits for more.
        #expect(readClient(record(22, [1, 0x00, 0xFF, 0xF7])) == .read(nil, consumed: 9))
        #expect(readClient(record(22, [1, 0x00, 0xFF, 0xF8])) == .failed(.tooLarge(limit: 64 * 1024)))
    }

    @Test func contradictoryLengthsAreMalformed() throws {
        let original = Flight.opensslTLS12.client
        func with(_ offset: Int, _ bytes: [UInt8]) -> [UInt8] {
            var copy = original
            copy.replaceSubrange(offset..<offset + bytes.count, with: bytes)
            return copy
        }
        // Record length beyond 2^14 + 2048.
        #expect(readClient(with(3, [0xFF, 0xFF])) == .failed(.malformed("record of 65535 bytes")))
        // session_id<0..32> claiming 255 bytes (offset: record 5 + handshake 4 + version 2 + random 32).
        #expect(readClient(with(43, [0xFF])) == .failed(.malformed("ClientHello session_id of 255 bytes")))
        // The handshake length one short of the record: the extensions run past the message.
        let hello = try clientHello(.opensslTLS12)
        let short = hello.raw.count - 4 - 1
        guard case .failed(.malformed) = readClient(with(6, [UInt8(short >> 16), UInt8(short >> 8 & 0xFF), UInt8(short & 0xFF)])) else {
            Issue.record("a message shorter than its extensions read")
            return
        }
        // Any single corrupted byte in any flight: drip and a cut there agree with blast; nothing traps.
        for flight in Flight.all {
            for bytes in [flight.client, flight.server] {
                for offset in bytes.indices {
                    var broken = bytes
                    broken[offset] ^= 0xFF
                    let blastClient = readClient(broken), blastServer = readServer(broken)
                    #expect(readClient(broken, cuts: [offset]) == blastClient)
                    #expect(readServer(broken, cuts: [offset]) == blastServer)
                }
            }
        }
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\n", TLSReadError.notTLS),
        ("\u{16}\u{02}", .notTLS),  // a handshake type byte, but no TLS record version
    ])
    func plaintextIsNotTLS(text: String, expected: TLSReadError) {
        let bytes = Array(text.utf8)
        #expect(readClient(bytes) == .failed(expected))
        #expect(readServer(bytes) == .failed(expected))
        #expect(readClient(Array(bytes.prefix(2)), cuts: [1]) == .failed(expected))
    }

    @Test func sslv2HelloAndAFirstAlertAreNotAClientStartingTLS() {
        // SSLv2-compatible ClientHello (RFC 5246 Appendix E.2): a length with the high bit set.
        #expect(readClient([0x80, 0x2E, 0x01, 0x00, 0x02]) == .failed(.notTLS))
        #expect(readClient(record(21, [2, 40])) == .failed(.notTLS))
    }

    @Test func serverRefusingWithAnAlertIsMalformedNamingTheAlert() {
        #expect(readServer(record(21, [2, 40])) == .failed(.malformed("alert fatal handshake_failure(40)")))
        #expect(readServer(record(21, [2, 112])) == .failed(.malformed("alert fatal unrecognized_name(112)")))
        // After the ServerHello, before the Certificate.
        let flight = Flight.opensslTLS12.server
        let helloRecord = 5 + (Int(flight[3]) << 8 | Int(flight[4]))
        #expect(readServer(Array(flight[..<helloRecord]) + record(21, [2, 80]))
                == .failed(.malformed("alert fatal internal_error(80)")))
        // A client's alert before its hello, in a later record.
        #expect(readClient(record(22, [1, 0, 0]) + record(21, [1, 0])) == .failed(.malformed("alert warning close_notify(0)")))
    }

    @Test(arguments: [
        ("empty extension", [], TLSReadError.malformed("truncated server_name_list length")),
        ("empty list", [0, 0], .malformed("server_name_list of 0 bytes")),
        ("empty host_name", sniData([]), .malformed("host_name of 0 bytes")),
        ("NUL", sniData(Array("api.pinproxy.test\0.evil".utf8)), .malformed("host_name not printable ASCII")),
        ("non-ASCII", sniData(Array("äpi.pinproxy.test".utf8)), .malformed("host_name not printable ASCII")),
        ("name type 1", sniData(Array("api.pinproxy.test".utf8), type: 1), .malformed("server_name type 1")),
        ("two host_names", u16(18) + [0] + u16(6) + Array("a.test".utf8) + [0] + u16(6) + Array("b.test".utf8),
         .malformed("9 bytes after host_name")),
        ("list longer than the extension", u16(30) + [0] + u16(6) + Array("a.test".utf8), .malformed("truncated server_name_list")),
    ] as [(String, [UInt8], TLSReadError)])
    func brokenServerNamesAreMalformed(label: String, data: [UInt8], expected: TLSReadError) {
        let bytes = record(22, clientHelloMessage([(0, data)]))
        #expect(readClient(bytes) == .failed(expected), "\(label)")
        expectDripAndSplitsAgree(bytes)
    }

    @Test func handBuiltHelloReadsItsExtensions() {
        let ticket: [UInt8] = [1, 2, 3]
        // RFC 8446 §4.2.11 OfferedPsks: two identities (with their ages), two 32-byte binders.
        let identities = u16(3) + [7, 8, 9] + [0, 0, 0, 1] + u16(1) + [6] + [0, 0, 0, 2]
        let binders = ([32] + [UInt8](repeating: 0xB1, count: 32)) + ([32] + [UInt8](repeating: 0xB2, count: 32))
        let offeredPsks = u16(identities.count) + identities + u16(binders.count) + binders
        let message = clientHelloMessage([
            (0, sniData(Array("api.pinproxy.test".utf8))),
            (43, [4, 0x7A, 0x7A, 0x03, 0x04]),
            (16, u16(3) + [2] + Array("h2".utf8)),
            (35, ticket),
            (41, offeredPsks),
        ])
        guard case .read(let hello?, _) = readClient(record(22, message)) else { Issue.record("no hello"); return }
        #expect(hello.serverName == apiHost)
        #expect(hello.offeredVersions == [0x7A7A, 0x0304])
        #expect(hello.alpn == ["h2"])
        #expect(hello.sessionTicket == ticket)
        #expect(hello.offersPreSharedKey)
        #expect(hello.pskIdentities == [[7, 8, 9], [6]])
        #expect(hello.raw == message)
        // One binder per identity.
        let oneBinder = u16(identities.count) + identities + u16(33) + Array(binders.prefix(33))
        #expect(readClient(record(22, clientHelloMessage([(41, oneBinder)]))) == .failed(.malformed("2 psk identities with 1 binders")))
        // RFC 8446 §4.2.11: pre_shared_key must be last; RFC 8446 §4.2: no repeated extension.
        #expect(readClient(record(22, clientHelloMessage([(41, []), (0, sniData([0x61]))])))
                == .failed(.malformed("pre_shared_key is not the last extension")))
        #expect(readClient(record(22, clientHelloMessage([(0, sniData([0x61])), (0, sniData([0x62]))])))
                == .failed(.malformed("ClientHello repeats extension 0")))
        // A TLS 1.0-era hello without any extensions.
        let bare = handshake(1, u16(0x0301) + [UInt8](repeating: 1, count: 32) + [0] + u16(2) + [0, 0x2F] + [1, 0])
        guard case .read(let old?, _) = readClient(record(22, bare, version: 0x0301)) else { Issue.record("no bare hello"); return }
        #expect(old.serverName == nil && old.offeredVersions == [0x0301] && old.sessionTicket == nil && old.alpn == [])
    }

    @Test func clientFlightOutOfOrderIsMalformed() {
        #expect(readClient(record(22, handshake(2, []))) == .failed(.malformed("handshake type 2 before ClientHello")))
        #expect(readClient(record(22, [1, 0, 0]) + record(20, [1])) == .failed(.malformed("change_cipher_spec before ClientHello")))
        #expect(readClient(record(22, [1, 0, 0]) + record(23, [])) == .failed(.malformed("application_data before ClientHello")))
        #expect(readClient(record(22, [1, 0, 0]) + record(24, [1])) == .failed(.malformed("record type 24")))
        #expect(readClient(record(22, [])) == .failed(.malformed("empty record of type 22")))
        #expect(readClient(record(22, [1, 0, 0]) + [22, 2, 0, 0, 1]) == .failed(.malformed("record version major 2")))
    }

    @Test func serverFlightOutOfOrderIsMalformed() throws {
        let tls12 = Flight.opensslTLS12.server
        let helloRecord = Array(tls12[..<(5 + (Int(tls12[3]) << 8 | Int(tls12[4])))])
        #expect(readServer(record(22, handshake(11, [0, 0, 0]))) == .failed(.malformed("handshake type 11 before ServerHello")))
        #expect(readServer(record(22, [2]) + record(20, [1])) == .failed(.malformed("change_cipher_spec inside a handshake message")))
        #expect(readServer(helloRecord + record(20, [1, 1])) == .failed(.malformed("change_cipher_spec of 2 bytes")))
        #expect(readServer(helloRecord + helloRecord) == .failed(.malformed("handshake type 2 in the server's plaintext flight")))
        #expect(readServer(helloRecord + record(22, handshake(20, []))) == .failed(.malformed("handshake type 20 in the server's plaintext flight")))
        // Application data where the server's plaintext should be: the reader stops (`.encrypted`).
        guard case .serverHello(let hello) = try serverEvents(.opensslTLS12)[0] else { return }
        #expect(readServer(helloRecord + record(23, [9])) == .read([.serverHello(hello), .encrypted], consumed: helloRecord.count + 5))

        let tls13 = Flight.opensslTLS13.server
        let hello13 = Array(tls13[..<(5 + (Int(tls13[3]) << 8 | Int(tls13[4])))])
        #expect(readServer(hello13 + record(22, handshake(8, []))) == .failed(.malformed("plaintext handshake record after a TLS 1.3 ServerHello")))
        let sharing = record(22, Array(hello13[5...]) + handshake(8, []))
        #expect(readServer(sharing) == .failed(.malformed("handshake data after a TLS 1.3 ServerHello")))

        let hrr = Flight.helloRetryRequest.server
        let retryRecord = Array(hrr[..<(5 + (Int(hrr[3]) << 8 | Int(hrr[4])))])
        #expect(readServer(retryRecord + retryRecord) == .failed(.malformed("second HelloRetryRequest")))
        #expect(readServer(retryRecord + helloRecord) == .failed(.malformed("ServerHello for version 0x0303 after HelloRetryRequest")))
        #expect(readServer(retryRecord + record(23, [])) == .failed(.malformed("application_data before ServerHello")))
    }
}
