import Foundation
import Testing
import TestSupport
@testable import TLSInspection

// Certificate Transparency's SCTs (issue 19): read from the leaf, the TLS extension (a real
// `openssl s_server -serverinfo` on TLS 1.2 and 1.3), a stapled OCSP response (`-status_file`) and checked against the test logs of
// Fixtures/ct (make-ct-fixtures.py). OpenSSL's own CT validation (`s_client -ct -ctlogfile`) agreed
// with Fixtures/ct/expected.txt when the fixtures were made.

func ctFixture(_ name: String) throws -> Certificate { try #require(try fixture("ct/\(name).pem").first) }

func ctBytes(_ name: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: "\(fixtures)/ct/\(name)")))
}

/// Every test log's key, the unlisted one included.
var ctLogKeys: [CTLogKey] {
    ["a1", "a2", "b1", "b2", "b3", "unlisted"].compactMap { name in (try? ctBytes("log-\(name).pub.der")).flatMap { CTLogKey(spki: $0) } }
}

/// One line of Fixtures/ct/expected.txt: the SCT the generator made, and whether it signed this leaf.
struct ExpectedSCT: Equatable, CustomStringConvertible {
    let logID: String
    let timestamp: UInt64
    let good: Bool
    var description: String { "\(logID.prefix(8)) \(timestamp) \(good)" }
}

func expectedSCTs(_ leaf: String, _ delivery: String) throws -> [ExpectedSCT] {
    let text = try String(contentsOfFile: "\(fixtures)/ct/expected.txt", encoding: .utf8)
    return text.split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
        .filter { $0[0] == leaf && $0[1] == delivery && $0[2] != "none" }
        .map { ExpectedSCT(logID: $0[2], timestamp: UInt64($0[3])!, good: $0[4] == "good") }
}

func hexString(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

func seen(_ checked: [CheckedSCT]) -> [ExpectedSCT] {
    checked.map { ExpectedSCT(logID: hexString($0.logID), timestamp: $0.timestamp, good: $0.verified) }
}

let ctLeaves = ["two-operators", "three-long", "two-long", "one-operator", "no-sct", "wrong-cert", "future",
                "retired-log", "unlisted-log", "interception-logged"]

@Suite struct SCTTests {
    @Test(arguments: ctLeaves)
    func embeddedSCTsReadAndVerifyAsTheGeneratorMadeThem(leaf: String) throws {
        let chain = try fixture("ct/\(leaf).chain.pem")
        let scts = try chain[0].embeddedSCTs()
        #expect(scts.allSatisfy { $0.delivery == .embedded && $0.hashAlgorithm == 4 && [1, 3].contains($0.signatureAlgorithm) })
        let checked = SCTEntries(leaf: chain[0], issuer: chain[1]).check(scts, keys: ctLogKeys)
        #expect(seen(checked) == (try expectedSCTs(leaf, "embedded")))
        #expect(checked.allSatisfy { $0.delivery == .embedded })
    }

    @Test func anSCTSignedForAnotherCertificateDoesNotVerify() throws {
        // wrong-cert carries two-operators' b1 SCT: same log, same time, another precertificate.
        let wrong = try fixture("ct/wrong-cert.chain.pem")
        let borrowed = try #require(try wrong[0].embeddedSCTs().last)
        let original = try #require(try ctFixture("two-operators").embeddedSCTs().last)
        #expect(borrowed == original)
        #expect(SCTEntries(leaf: wrong[0], issuer: wrong[1]).check([borrowed], keys: ctLogKeys).map(\.verified) == [false])
        let good = try fixture("ct/two-operators.chain.pem")
        #expect(SCTEntries(leaf: good[0], issuer: good[1]).check([original], keys: ctLogKeys).map(\.verified) == [true])
    }

    @Test func embeddedSCTsNeedTheRealIssuersKey() throws {
        let leaf = try ctFixture("two-operators")
        let scts = try leaf.embeddedSCTs()
        #expect(SCTEntries(leaf: leaf, issuer: nil).check(scts, keys: ctLogKeys).map(\.verified) == [false, false])
        let otherCA = try ctFixture("interception-root")
        #expect(SCTEntries(leaf: leaf, issuer: otherCA).check(scts, keys: ctLogKeys).map(\.verified) == [false, false])
        #expect(SCTEntries(leaf: leaf, issuer: try ctFixture("ct-root")).check(scts, keys: ctLogKeys).map(\.verified) == [true, true])
    }

    @Test func anSCTWhoseLogKeyIsNotGivenIsNotVerified() throws {
        let chain = try fixture("ct/two-operators.chain.pem")
        let scts = try chain[0].embeddedSCTs()
        let onlyA1 = [try #require(CTLogKey(spki: try ctBytes("log-a1.pub.der")))]
        #expect(SCTEntries(leaf: chain[0], issuer: chain[1]).check(scts, keys: onlyA1).map(\.verified) == [true, false])
        #expect(SCTEntries(leaf: chain[0], issuer: chain[1]).check(scts, keys: []).map(\.verified) == [false, false])
    }

    @Test func anyChangedFieldBreaksTheSignature() throws {
        let chain = try fixture("ct/two-operators.chain.pem")
        let sct = try #require(try chain[0].embeddedSCTs().first)
        let entries = SCTEntries(leaf: chain[0], issuer: chain[1])
        func with(timestamp: UInt64? = nil, extensions: [UInt8]? = nil, hash: UInt8? = nil, algorithm: UInt8? = nil) -> SignedCertificateTimestamp {
            SignedCertificateTimestamp(logID: sct.logID, timestamp: timestamp ?? sct.timestamp, extensions: extensions ?? sct.extensions,
                                       hashAlgorithm: hash ?? sct.hashAlgorithm, signatureAlgorithm: algorithm ?? sct.signatureAlgorithm,
                                       signature: sct.signature, delivery: sct.delivery)
        }
        #expect(entries.check([with()], keys: ctLogKeys).map(\.verified) == [true])
        #expect(entries.check([with(timestamp: sct.timestamp + 1)], keys: ctLogKeys).map(\.verified) == [false])
        #expect(entries.check([with(extensions: [0])], keys: ctLogKeys).map(\.verified) == [false])
        #expect(entries.check([with(hash: 5)], keys: ctLogKeys).map(\.verified) == [false])      // SHA-384: not a CT log's
        #expect(entries.check([with(algorithm: 1)], keys: ctLogKeys).map(\.verified) == [false]) // RSA, but a1 is EC
    }

    @Test func tlsExtensionSCTsVerifyOverTheCertificateAndEmbeddedOnesOverThePrecertificate() throws {
        let chain = try fixture("ct/no-sct.chain.pem")
        let bytes = try ctBytes("no-sct.tls-scts.bin")
        let tls = try SignedCertificateTimestamp.list(bytes, delivery: .tlsExtension)
        let entries = SCTEntries(leaf: chain[0], issuer: chain[1])
        #expect(seen(entries.check(tls, keys: ctLogKeys)) == (try expectedSCTs("no-sct", "tls")))
        #expect(entries.check(tls, keys: ctLogKeys).map(\.delivery) == [.tlsExtension, .tlsExtension])
        // The same SCTs by OCSP cover the same X.509 entry.
        #expect(entries.check(try SignedCertificateTimestamp.list(bytes, delivery: .ocsp), keys: ctLogKeys).map(\.verified) == [true, true])
        // Claimed as embedded, they would have to cover a precertificate: no-sct has no SCT extension.
        #expect(entries.check(try SignedCertificateTimestamp.list(bytes, delivery: .embedded), keys: ctLogKeys).map(\.verified) == [false, false])
        // An embedded SCT does not pass for one over the final certificate.
        let logged = try fixture("ct/two-operators.chain.pem")
        let relabelled = try SignedCertificateTimestamp.list(try #require(try logged[0].embeddedSCTList()), delivery: .tlsExtension)
        #expect(SCTEntries(leaf: logged[0], issuer: logged[1]).check(relabelled, keys: ctLogKeys).map(\.verified) == [false, false])
    }

    @Test func noSCTExtensionIsNoSCT() throws {
        #expect(try ctFixture("no-sct").embeddedSCTs() == [])
        #expect(try ctFixture("ct-root").embeddedSCTs() == [])
    }

    @Test func logIDsAreTheSHA256OfTheKeysAsTheLogListSays() throws {
        let list = try JSONSerialization.jsonObject(with: Data(try ctBytes("log_list.json"))) as! [String: Any]
        let logs = (list["operators"] as! [[String: Any]]).flatMap { $0["logs"] as! [[String: Any]] }
        #expect(logs.count == 5)
        for log in logs {
            let spki = [UInt8](Data(base64Encoded: log["key"] as! String)!)
            let key = try #require(CTLogKey(spki: spki))
            #expect(key.logID == [UInt8](Data(base64Encoded: log["log_id"] as! String)!))
            #expect(key.logID == sha256(spki))
        }
    }

    @Test func logKeysMustBeOneRSAOrECSubjectPublicKeyInfo() throws {
        let spki = try ctBytes("log-a1.pub.der")
        #expect(CTLogKey(spki: spki) != nil)
        #expect(CTLogKey(spki: try ctBytes("log-a2.pub.der")) != nil)          // RSA 2048
        #expect(CTLogKey(spki: spki + [0]) == nil)                              // trailing byte
        #expect(CTLogKey(spki: Array(spki.dropLast())) == nil)                  // truncated
        #expect(CTLogKey(spki: []) == nil)
        #expect(CTLogKey(spki: try ctFixture("two-operators").der) == nil)      // a certificate, not a key
        #expect(CTLogKey(spki: try #require(try fixture("leaf-ed25519.pem").first).spkiDER) == nil)
    }

    @Test func stapledOCSPSCTsAreTheLeafsSingleResponsesAndVerifyOverTheCertificate() throws {
        let chain = try fixture("ct/no-sct.chain.pem")
        let der = try ctBytes("no-sct.ocsp.der")
        let scts = try SignedCertificateTimestamp.stapled(ocspResponse: der, leaf: chain[0], issuer: chain[1])
        #expect(scts.map(\.delivery) == [.ocsp, .ocsp])
        #expect(scts == (try SignedCertificateTimestamp.list(try ctBytes("no-sct.ocsp-scts.bin"), delivery: .ocsp)))
        #expect(seen(SCTEntries(leaf: chain[0], issuer: chain[1]).check(scts, keys: ctLogKeys)) == (try expectedSCTs("no-sct", "ocsp")))
        // Another leaf of the same CA has no SingleResponse in it: no SCTs for that leaf.
        #expect(try SignedCertificateTimestamp.stapled(ocspResponse: der, leaf: try ctFixture("two-operators"), issuer: chain[1]) == [])
        #expect(throws: TLSReadError.malformed("stapled OCSP response is not one DER OCSPResponse")) {
            try SignedCertificateTimestamp.stapled(ocspResponse: der + [0], leaf: chain[0], issuer: chain[1])
        }
        #expect(throws: TLSReadError.malformed("stapled OCSP response is not one DER OCSPResponse")) {
            try SignedCertificateTimestamp.stapled(ocspResponse: Array(der.dropLast()), leaf: chain[0], issuer: chain[1])
        }
        // tryLater(3): an OCSPResponse with no responseBytes.
        #expect(try SignedCertificateTimestamp.stapled(ocspResponse: [0x30, 3, 0x0A, 1, 3], leaf: chain[0], issuer: chain[1]) == [])
    }

    @Test func certificateStatusHoldsOneOCSPResponse() throws {
        let der = try ctBytes("no-sct.ocsp.der")
        let status = [1, UInt8(der.count >> 16), UInt8(der.count >> 8 & 0xFF), UInt8(der.count & 0xFF)] + der
        #expect(try stapledOCSPResponse(certificateStatus: status) == der)
        #expect(throws: TLSReadError.malformed("CertificateStatus of type 2, not ocsp(1)")) { try stapledOCSPResponse(certificateStatus: [2] + status.dropFirst()) }
        #expect(throws: TLSReadError.malformed("1 bytes after CertificateStatus")) { try stapledOCSPResponse(certificateStatus: status + [0]) }
        #expect(throws: TLSReadError.malformed("truncated OCSPResponse")) { try stapledOCSPResponse(certificateStatus: Array(status.dropLast())) }
        #expect(throws: TLSReadError.malformed("OCSPResponse of 0 bytes")) { try stapledOCSPResponse(certificateStatus: [1, 0, 0, 0]) }
    }

    /// Tests that need currently valid certificates run the generator into a temporary directory:
    /// it works offline, dates everything from --now, and what it makes verifies.
    @Test func theGeneratorMakesAFreshVerifiablePKIOffline() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let now = 1_900_000_000
        let result = try run("/usr/bin/env", ["python3", "\(fixtures)/ct/make-ct-fixtures.py", "--out", directory, "--now", String(now)])
        #expect(result.status == 0, "\(result.stderr)")
        let keys = ["a1", "a2", "b1", "unlisted"].compactMap { name in
            (try? Data(contentsOf: URL(fileURLWithPath: "\(directory)/log-\(name).pub.der"))).flatMap { CTLogKey(spki: [UInt8]($0)) }
        }
        #expect(keys.count == 4)
        for (leaf, verified) in [("two-operators", [true, true]), ("three-long", [true, true, true]), ("wrong-cert", [true, false]),
                                 ("unlisted-log", [true, true])] {
            let chain = try Certificate.load(file: "\(directory)/\(leaf).chain.pem")
            #expect(SCTEntries(leaf: chain[0], issuer: chain[1]).check(try chain[0].embeddedSCTs(), keys: keys).map(\.verified) == verified, "\(leaf)")
            #expect(chain[0].facts.notBefore == Date(timeIntervalSince1970: TimeInterval(now - 2 * 86400)))
        }
        let sctTime = UInt64(now - 86400) * 1000
        #expect(try Certificate.load(file: "\(directory)/two-operators.pem")[0].embeddedSCTs().map(\.timestamp) == [sctTime, sctTime])
    }

    // MARK: Malformed lists

    /// One SCT of a1 over two-operators, serialized (version, id, timestamp, extensions, signature).
    static func serializedSCT(version: UInt8 = 0, idLength: Int = 32, extensions: [UInt8] = [], signature: [UInt8] = [1, 2, 3]) -> [UInt8] {
        [version] + [UInt8](repeating: 0xAB, count: idLength) + [0, 0, 1, 0x9A, 0, 0, 0, 0]
            + u16(extensions.count) + extensions + [4, 3] + u16(signature.count) + signature
    }

    static func list(_ scts: [[UInt8]]) -> [UInt8] {
        let body = scts.flatMap { u16($0.count) + $0 }
        return u16(body.count) + body
    }

    @Test func aWellFormedListReadsFieldByField() throws {
        let scts = try SignedCertificateTimestamp.list(Self.list([Self.serializedSCT(extensions: [9, 9]), Self.serializedSCT()]), delivery: .ocsp)
        #expect(scts.count == 2)
        #expect(scts[0] == SignedCertificateTimestamp(logID: [UInt8](repeating: 0xAB, count: 32), timestamp: 0x19A_0000_0000,
                                                      extensions: [9, 9], hashAlgorithm: 4, signatureAlgorithm: 3,
                                                      signature: [1, 2, 3], delivery: .ocsp))
    }

    static let malformed: [(String, [UInt8], TLSReadError)] = {
        let good = serializedSCT()
        return [
            ("empty", [], .malformed("truncated sct_list length")),
            ("no SCT", [0, 0], .malformed("sct_list of 0 bytes")),
            ("list longer than its bytes", u16(good.count + 3) + u16(good.count) + good, .malformed("truncated sct_list")),
            ("bytes after the list", list([good]) + [0], .malformed("1 bytes after SignedCertificateTimestampList")),
            ("empty SerializedSCT", list([[]]), .malformed("SerializedSCT of 0 bytes")),
            ("version 1", list([serializedSCT(version: 1)]), .malformed("SCT version 1, only v1 (0) is known")),
            ("log id of 31 bytes", list([serializedSCT(idLength: 31)]), .malformed("truncated SCT signature length")),
            ("SCT cut short", list([Array(good.dropLast())]), .malformed("truncated SCT signature")),
            ("bytes after an SCT", list([good + [0]]), .malformed("1 bytes after SerializedSCT")),
            ("empty signature", list([serializedSCT(signature: [])]), .malformed("SCT signature of 0 bytes")),
            ("extensions longer than the SCT", list([Array(good.prefix(41)) + [0xFF, 0xFF]]), .malformed("truncated SCT extensions")),
            ("only a log id", list([[0] + [UInt8](repeating: 1, count: 32)]), .malformed("truncated SCT timestamp")),
        ]
    }()

    @Test(arguments: malformed.indices)
    func malformedListsAreRefusedWhole(index: Int) {
        let (name, bytes, expected) = Self.malformed[index]
        #expect(throws: expected, "\(name)") { try SignedCertificateTimestamp.list(bytes, delivery: .tlsExtension) }
        // A good SCT before the broken one does not save the list.
        if bytes.count > 2, name != "bytes after the list", name != "list longer than its bytes" {
            let body = Array(bytes.dropFirst(2))
            let withGoodFirst = u16(body.count + Self.serializedSCT().count + 2) + u16(Self.serializedSCT().count) + Self.serializedSCT() + body
            #expect(throws: expected, "\(name) after a good SCT") { try SignedCertificateTimestamp.list(withGoodFirst, delivery: .embedded) }
        }
    }

    @Test func derOctetStringTakesExactlyOne() {
        #expect(derOctetString([0x04, 2, 7, 8]) == [7, 8])
        #expect(derOctetString([0x04, 2, 7, 8, 0]) == nil)
        #expect(derOctetString([0x04, 3, 7, 8]) == nil)
        #expect(derOctetString([0x03, 2, 7, 8]) == nil)    // a BIT STRING
        #expect(derOctetString([]) == nil)
    }
}

// MARK: TLS extension, from a real server

@Suite(.serialized) struct SCTExtensionTests {
    /// Go's crypto/tls asks for SCTs (it sends an empty signed_certificate_timestamp extension);
    /// its captured ClientHello, mirrored, is sent to s_server.
    static let go = try? CapturedHello("go")

    func handshake(_ version: String, serverinfo: String?) throws -> MirrorRun {
        let server = try OpenSSLServer("ct/no-sct", [version] + (serverinfo.map { ["-serverinfo", Paths.fixture("ct/\($0)")] } ?? []),
                                       intermediate: false)
        defer { server.stop() }
        return try runMirror(port: server.port, try #require(Self.go).mirror())
    }

    func checked(_ list: [UInt8]?) throws -> [CheckedSCT] {
        let chain = try fixture("ct/no-sct.chain.pem")
        let scts = try SignedCertificateTimestamp.list(try #require(list), delivery: .tlsExtension)
        return SCTEntries(leaf: chain[0], issuer: chain[1]).check(scts, keys: ctLogKeys)
    }

    func serverHello(_ run: MirrorRun) throws -> ServerHello {
        var reader = ServerFlightReader()
        let events = try reader.feed(run.serverBytes)
        guard case .serverHello(let hello) = try #require(events.first) else { throw HelperError(message: "no ServerHello: \(events)") }
        return hello
    }

    @Test(arguments: ["no-sct.serverinfo.pem", "no-sct.serverinfo-v2.pem"])
    func tls12ServerHelloCarriesTheSCTs(serverinfo: String) throws {
        let run = try handshake("-tls1_2", serverinfo: serverinfo)
        guard case .tls12(let chain) = run.verdict else { throw HelperError(message: "not TLS 1.2: \(run.verdict)") }
        #expect(chain == (try chainDER("ct/no-sct.pem")))
        let hello = try serverHello(run)
        #expect(hello.sctList == (try ctBytes("no-sct.tls-scts.bin")))
        #expect(seen(try checked(hello.sctList)) == (try expectedSCTs("no-sct", "tls")))
    }

    @Test func tls13LeafCertificateEntryCarriesTheSCTs() throws {
        let run = try handshake("-tls1_3", serverinfo: "no-sct.serverinfo-v2.pem")
        guard case .verified(let flight) = run.verdict else { throw HelperError(message: "not verified: \(run.verdict)") }
        #expect(flight.chain == (try chainDER("ct/no-sct.pem")))
        #expect(flight.leafSCTList == (try ctBytes("no-sct.tls-scts.bin")))
        #expect(seen(try checked(flight.leafSCTList)) == (try expectedSCTs("no-sct", "tls")))
        #expect(try serverHello(run).sctList == nil)   // TLS 1.3 sends none in the ServerHello
    }

    /// The SCTs in the OCSP response s_server staples from `-status_file` (Go's hello asks for it).
    func stapledSCTs(_ status: [UInt8]?) throws -> [CheckedSCT] {
        let chain = try fixture("ct/no-sct.chain.pem")
        let response = try stapledOCSPResponse(certificateStatus: try #require(status))
        #expect(response == (try ctBytes("no-sct.ocsp.der")))
        let scts = try SignedCertificateTimestamp.stapled(ocspResponse: response, leaf: chain[0], issuer: chain[1])
        return SCTEntries(leaf: chain[0], issuer: chain[1]).check(scts, keys: ctLogKeys)
    }

    @Test func tls12CertificateStatusCarriesTheStapledSCTs() throws {
        let server = try OpenSSLServer("ct/no-sct", ["-tls1_2", "-status_file", Paths.fixture("ct/no-sct.ocsp.der")], intermediate: false)
        defer { server.stop() }
        let run = try runMirror(port: server.port, try #require(Self.go).mirror())
        var reader = ServerFlightReader()
        let status: [UInt8]? = try reader.feed(run.serverBytes).compactMap { event -> [UInt8]? in
            guard case .otherHandshake(type: 22, let raw) = event else { return nil }
            return Array(raw.dropFirst(4))
        }.first
        #expect(seen(try stapledSCTs(status)) == (try expectedSCTs("no-sct", "ocsp")))
    }

    @Test func tls13LeafCertificateEntryCarriesTheStapledSCTs() throws {
        let server = try OpenSSLServer("ct/no-sct", ["-tls1_3", "-status_file", Paths.fixture("ct/no-sct.ocsp.der")], intermediate: false)
        defer { server.stop() }
        let run = try runMirror(port: server.port, try #require(Self.go).mirror())
        guard case .verified(let flight) = run.verdict else { throw HelperError(message: "not verified: \(run.verdict)") }
        #expect(flight.leafSCTList == nil)
        #expect(seen(try stapledSCTs(flight.leafOCSPStatus)) == (try expectedSCTs("no-sct", "ocsp")))
    }

    @Test(arguments: ["-tls1_2", "-tls1_3"])
    func withoutServerinfoThereIsNone(version: String) throws {
        let run = try handshake(version, serverinfo: nil)
        #expect(try serverHello(run).sctList == nil)
        switch run.verdict {
        case .verified(let flight): #expect(version == "-tls1_3" && flight.leafSCTList == nil && flight.leafOCSPStatus == nil)
        case .tls12: #expect(version == "-tls1_2")
        default: Issue.record("unexpected verdict \(run.verdict)")
        }
    }
}
