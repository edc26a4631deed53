import Foundation
import PinPolicy
import TestSupport
import Testing
@testable import ProxyCore

/// A redirected connection's first bytes, read in place of a CONNECT line: real ClientHellos
/// (captured from curl, Python and OpenSSL), dripped a byte at a time and blasted whole; a plain-HTTP
/// head; bytes that are neither.
@Suite struct TransparentFirstFlightTests {
    static let origin = TransparentOrigin(original: SocketAddress.parse("10.77.0.2:8443")!, listener: SocketAddress.parse("127.0.0.1:15001")!)

    func bytes(_ base64: String) -> [UInt8] { Array(Data(base64Encoded: base64, options: .ignoreUnknownCharacters)!) }

    func read(_ bytes: [UInt8]) -> TransparentFirstFlight {
        bytes.withUnsafeBytes { TransparentFirstFlight.read($0, origin: Self.origin) }
    }

    @Test(arguments: [TLSReaderVectors.curlTLS13Client, TLSReaderVectors.pythonTLS13Client, TLSReaderVectors.opensslTLS12Client])
    func aHelloWithSNIStandsForACONNECTToItsNameAtTheOriginalPort(_ vector: String) {
        let flight = bytes(vector)
        let name = Authority(target: .name("api.pinproxy.test"), port: 8443)
        #expect(read(flight) == .tls(name))
        // Dripped: nothing until the hello is whole.
        let whole = (1...flight.count).first { read(Array(flight.prefix($0))) != .needMore }
        #expect(whole.map { read(Array(flight.prefix($0))) } == .tls(name))
    }

    @Test func aHelloWithoutSNIStandsForACONNECTToTheOriginalAddress() {
        #expect(read(bytes(TLSReaderVectors.opensslNoSNIClient)) == .tls(Authority(target: .ip(IPAddress("10.77.0.2")!), port: 8443)))
    }

    @Test func anHTTPHeadIsPlainHTTP() {
        let head = Array("GET / HTTP/1.1\r\nHost: example.test\r\n\r\n".utf8)
        #expect(read(Array(head.dropLast(2))) == .needMore)
        #expect(read(head + Array("body".utf8)) == .http(headLength: head.count))
    }

    @Test func aHandshakeRecordThatIsNoHelloIsRefused() {
        guard case .refused(let refusal) = read([0x16, 0x03, 0x01, 0x00, 0x04, 0x02, 0x00, 0x00, 0x00]) else {
            Issue.record("not refused")
            return
        }
        #expect(refusal.code == .network(.badRequest) && refusal.detail.contains("did not start with a ClientHello"))
    }

    @Test func anSNIThatNamesAnAddressIsRefused() {
        guard case .refused(let refusal) = TransparentFirstFlight.authority(serverName: "10.0.0.1", origin: Self.origin) else {
            Issue.record("not refused")
            return
        }
        #expect(refusal.detail.contains("RFC 6066 allows host names only"))
        #expect(TransparentFirstFlight.authority(serverName: "API.Pinproxy.Test.", origin: Self.origin) == .tls(Authority(target: .name("api.pinproxy.test"), port: 8443)))
    }
}
