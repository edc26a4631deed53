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

    // Truncated, oversized and corrupted flights: TLSReaderTests+BrokenFlights.swift.
}
