import Foundation
import Testing
import TestSupport
@testable import TLSInspection

// The passive TLS reader on truncated, oversized and corrupted flights, and on hellos built by hand
// (the flights, the drivers and the hello builders are in TLSReaderTests.swift).
extension TLSReaderTests {
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
