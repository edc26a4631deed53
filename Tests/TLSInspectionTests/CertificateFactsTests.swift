import Foundation
import Testing
import PinPolicy
@testable import TLSInspection
import TestSupport

/// The fixture directory (made by Fixtures/make-fixtures.sh).
let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures").path

func fixture(_ name: String) throws -> [Certificate] { try Certificate.load(file: "\(fixtures)/\(name)") }

/// name → (spki, cert) as the openssl CLI computed them when the fixtures were made.
let opensslPins: [String: (spki: String, cert: String)] = {
    let text = try! String(contentsOfFile: "\(fixtures)/expected-pins.txt", encoding: .utf8)
    var out: [String: (String, String)] = [:]
    for line in text.split(separator: "\n") {
        let f = line.split(separator: " ").map(String.init)
        out[f[0]] = (f[1], f[2])
    }
    return out
}()

@Suite struct CertificateFactsTests {
    @Test(arguments: ["good-root", "good-intermediate", "leaf-rsa2048", "leaf-ec256", "leaf-ec256-renewed", "leaf-rotated",
                      "leaf-ed25519", "leaf-other-name", "leaf-ip", "leaf-expired", "rogue-root", "rogue-leaf", "self-signed"])
    func pinsEqualTheOpenSSLPipeline(name: String) throws {
        let facts = try #require(try fixture("\(name).pem").first).facts
        let expected = try #require(opensslPins[name])
        #expect(facts.spki.description == expected.spki)
        #expect(facts.certificate.description == expected.cert)
    }

    @Test(arguments: [("good-root", "RSA 4096", true), ("good-intermediate", "EC P-384", true), ("leaf-rsa2048", "RSA 2048", false),
                      ("leaf-ec256", "EC P-256", false), ("leaf-ed25519", "Ed25519", false), ("self-signed", "EC P-256", false)])
    func keyKinds(name: String, key: String, isCA: Bool) throws {
        let facts = try #require(try fixture("\(name).pem").first).facts
        #expect(facts.key == key)
        #expect(facts.isCA == isCA)
    }

    @Test func namesDatesAndSANs() throws {
        let leaf = try #require(try fixture("leaf-ec256.pem").first).facts
        #expect(leaf.subject == "CN=api.pinproxy.test,O=pinproxy tests")
        #expect(leaf.issuer == "CN=pinproxy good intermediate,O=pinproxy tests")
        #expect(leaf.subjectAltNames == ["DNS:api.pinproxy.test", "DNS:*.api.pinproxy.test"])
        let expired = try #require(try fixture("leaf-expired.pem").first).facts
        #expect(RFC3339.format(expired.notBefore) == "2020-01-01T00:00:00Z")
        #expect(RFC3339.format(expired.notAfter) == "2021-01-01T00:00:00Z")
        #expect(try fixture("leaf-ip.pem")[0].facts.subjectAltNames == ["IP:127.0.0.1"])
    }

    @Test func renewalKeepsTheSPKIPinAndChangesTheCertPin() throws {
        let a = try fixture("leaf-ec256.pem")[0].facts, b = try fixture("leaf-ec256-renewed.pem")[0].facts
        #expect(a.spki == b.spki)
        #expect(a.certificate != b.certificate)
    }

    @Test func pemBundlesAndDERLoad() throws {
        #expect(try fixture("leaf-ec256.chain.pem").count == 2)
        #expect(try fixture("leaf-ec256.der")[0].facts == (try fixture("leaf-ec256.pem")[0].facts))
        #expect(throws: Certificate.LoadError.self) { try Certificate.load(Array("hello".utf8)) }
        #expect(throws: Certificate.LoadError.self) { try Certificate.load(Array("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".utf8)) }
    }

    @Test func pinFilesReadCertificatesAndPublicKeys() throws {
        let backup = try #require(opensslPins["backup"]).spki
        #expect(try PinFiles.read(path: "\(fixtures)/backup.pub.pem", kind: .spki).pin.description == backup)
        #expect(try PinFiles.read(path: "\(fixtures)/backup.pub.der", kind: .spki).pin.description == backup)
        let leaf = try #require(opensslPins["leaf-ec256"])
        #expect(try PinFiles.read(path: "\(fixtures)/leaf-ec256.der", kind: .spki).pin.description == leaf.spki)
        let certPin = try PinFiles.read(path: "\(fixtures)/leaf-ec256.pem", kind: .cert)
        #expect(certPin.pin.description == leaf.cert && certPin.notAfter != nil)
        #expect(throws: FileError.self) { try PinFiles.read(path: "\(fixtures)/backup.pub.pem", kind: .cert) }
        #expect(throws: FileError.self) { try PinFiles.read(path: "\(fixtures)/leaf-ec256.chain.pem", kind: .spki) }
        #expect(throws: FileError.self) { try PinFiles.read(path: "\(fixtures)/nope.pem", kind: .spki) }
        #expect(throws: FileError.self) { try PinFiles.read(path: "\(fixtures)/make-fixtures.sh", kind: .spki) }
    }
}

@Suite struct ChainValidationTests {
    static let goodStore = try! TrustStore.caFile("\(fixtures)/good-root.pem")
    static let bothRoots = try! TrustStore.caFile("\(fixtures)/both-roots.pem")
    static let api = Target.name("api.pinproxy.test")

    func verified(_ result: ChainValidation, sourceLocation: SourceLocation = #_sourceLocation) -> [String] {
        guard case .verified(let chain) = result else {
            Issue.record("not verified: \(result)", sourceLocation: sourceLocation)
            return []
        }
        return chain.certificates.map(\.facts.spki.description)
    }

    func failure(_ result: ChainValidation) -> ChainFailure? {
        if case .failed(let f, _) = result { return f }
        return nil
    }

    @Test(arguments: ["leaf-ec256", "leaf-rsa2048"])
    func goodChainVerifiesToTheRoot(leaf: String) throws {
        let result = ChainValidator.validate(presented: try fixture("\(leaf).chain.pem"), target: Self.api, store: Self.goodStore)
        #expect(verified(result) == [opensslPins[leaf]!.spki, opensslPins["good-intermediate"]!.spki, opensslPins["good-root"]!.spki])
        if case .verified(let chain) = result { #expect(chain.certificates.map(\.isAnchor) == [false, false, true]) }
    }

    @Test func wildcardCoversOneLabelOnly() throws {
        let chain = try fixture("leaf-ec256.chain.pem")
        #expect(verified(ChainValidator.validate(presented: chain, target: .name("x.api.pinproxy.test"), store: Self.goodStore)).count == 3)
        #expect(failure(ChainValidator.validate(presented: chain, target: .name("y.x.api.pinproxy.test"), store: Self.goodStore))?.reason == .hostnameMismatch)
    }

    @Test func rogueRootNotInTheStoreFails() throws {
        let f = failure(ChainValidator.validate(presented: try fixture("rogue-leaf.chain.pem"), target: Self.api, store: Self.goodStore))
        #expect(f == ChainFailure(reason: .chainInvalid, detail: "unable to get local issuer certificate"))
    }

    @Test func expiredLeafFails() throws {
        let f = failure(ChainValidator.validate(presented: try fixture("leaf-expired.chain.pem"), target: Self.api, store: Self.goodStore))
        #expect(f == ChainFailure(reason: .chainInvalid, detail: "certificate has expired"))
    }

    @Test func wrongHostnameFails() throws {
        let f = failure(ChainValidator.validate(presented: try fixture("leaf-other-name.chain.pem"), target: Self.api, store: Self.goodStore))
        #expect(f == ChainFailure(reason: .hostnameMismatch, detail: "hostname mismatch"))
    }

    @Test func ipLiteralsAreCheckedAgainstIPSANs() throws {
        let chain = try fixture("leaf-ip.chain.pem")
        #expect(verified(ChainValidator.validate(presented: chain, target: .ip(IPAddress("127.0.0.1")!), store: Self.goodStore)).count == 3)
        let f = failure(ChainValidator.validate(presented: chain, target: .ip(IPAddress("127.0.0.2")!), store: Self.goodStore))
        #expect(f == ChainFailure(reason: .hostnameMismatch, detail: "IP address mismatch"))
        // A name certificate does not cover an IP literal.
        #expect(failure(ChainValidator.validate(presented: try fixture("leaf-ec256.chain.pem"), target: .ip(IPAddress("127.0.0.1")!), store: Self.goodStore))?.reason == .hostnameMismatch)
    }

    /// CVE-2016-2402: the attacker appends the genuine intermediate to a forged chain. Validation
    /// takes the real path (rogue leaf → rogue root), so the genuine intermediate's pin is not in the
    /// verified chain and cannot satisfy an `at: ca` pin.
    @Test func appendedGenuineIntermediateIsNotInTheVerifiedChain() throws {
        let presented = try fixture("rogue-with-good-intermediate.chain.pem")
        let spkis = verified(ChainValidator.validate(presented: presented, target: Self.api, store: Self.bothRoots))
        #expect(spkis == [opensslPins["rogue-leaf"]!.spki, opensslPins["rogue-root"]!.spki])
        #expect(!spkis.contains(opensslPins["good-intermediate"]!.spki))
    }

    @Test func pinsOnlyTrustAcceptsASelfSignedLeafPinnedByItsOwnHash() throws {
        let presented = try fixture("self-signed.pem")
        let pin = try Pin.parse(opensslPins["self-signed"]!.cert).get()
        #expect(verified(ChainValidator.validate(presented: presented, target: .name("self.pinproxy.test"), store: nil, pinsOnlyAnchors: [pin])).count == 1)
        // the hostname is still checked
        #expect(failure(ChainValidator.validate(presented: presented, target: .name("other.pinproxy.test"), store: nil, pinsOnlyAnchors: [pin]))?.reason == .hostnameMismatch)
        // a pin that matches nothing presented: nothing to anchor on
        let other = try Pin.parse(opensslPins["leaf-ec256"]!.spki).get()
        #expect(failure(ChainValidator.validate(presented: presented, target: .name("self.pinproxy.test"), store: nil, pinsOnlyAnchors: [other]))?.reason == .chainInvalid)
    }

    @Test func pinsOnlyAnchorsOnAPinnedIntermediateAndStillChecksSignatures() throws {
        let intermediate = try Pin.parse(opensslPins["good-intermediate"]!.spki).get()
        let result = ChainValidator.validate(presented: try fixture("leaf-ec256.chain.pem"), target: Self.api, store: nil, pinsOnlyAnchors: [intermediate])
        #expect(verified(result) == [opensslPins["leaf-ec256"]!.spki, opensslPins["good-intermediate"]!.spki])
        // The rogue leaf with the genuine intermediate appended: the intermediate did not sign it.
        let forged = ChainValidator.validate(presented: try fixture("rogue-with-good-intermediate.chain.pem"), target: Self.api, store: nil, pinsOnlyAnchors: [intermediate])
        #expect(failure(forged)?.reason == .chainInvalid)
    }

    @Test func theSystemStoreDoesNotKnowTheTestRootAndACAFileReplacesIt() throws {
        let system = try TrustStore.system()
        #expect(failure(ChainValidator.validate(presented: try fixture("leaf-ec256.chain.pem"), target: Self.api, store: system))?.reason == .chainInvalid)
        // A real public root is trusted by the system store but not by a CA file of ours.
        let isrg = "/etc/ssl/certs/ISRG_Root_X1.pem"
        if FileManager.default.fileExists(atPath: isrg) {
            let root = try Certificate.load(file: isrg)
            let inSystem = ChainValidator.validate(presented: root, target: .name("isrg.example"), store: system)
            let inFile = ChainValidator.validate(presented: root, target: .name("isrg.example"), store: Self.goodStore)
            // trusted by the system store: only the purpose check (a CA is no server leaf) fails
            #expect(failure(inSystem)?.detail == "unsuitable certificate purpose")
            // under the CA file it is just an unknown self-signed certificate
            #expect(failure(inFile)?.detail == "self-signed certificate")
        }
    }

    @Test func validationTimeIsAnInput() throws {
        let presented = try fixture("leaf-expired.chain.pem")
        let during = RFC3339.parse("2020-06-01T00:00:00Z")!
        // The intermediate was made later than 2020, so in 2020 it is "not yet valid"; the leaf's own
        // window is what matters here, so check the failure changes from expired.
        let f = failure(ChainValidator.validate(presented: presented, target: Self.api, store: Self.goodStore, at: during))
        #expect(f?.detail == "certificate is not yet valid")
    }

    @Test func noCertificateIsAFailureNotACrash() {
        #expect(failure(ChainValidator.validate(presented: [], target: Self.api, store: Self.goodStore))?.detail == "the server presented no certificate")
    }
}

/// A rogue CA's leaf whose private extension carries the genuine leaf's PEM text: read as PEM it
/// would be the genuine certificate; off the wire it must be read as the DER it is.
@Suite struct WireCertificateTests {
    @Test func aCertificateCarryingAnotherOnesPEMIsReadAsItself() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pinproxy-wire-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let fixtures = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Fixtures").path
        let genuinePEM = try String(contentsOfFile: "\(fixtures)/leaf-ec256.pem", encoding: .utf8)
        let hex = Array(("\n" + genuinePEM).utf8).map { String(format: "%02X", $0) }.joined()
        try "subjectAltName=DNS:api.pinproxy.test\n1.3.6.1.4.1.55555.1=ASN1:FORMAT:HEX,OCTETSTRING:\(hex)\n"
            .write(toFile: "\(directory)/ext.cnf", atomically: true, encoding: .utf8)
        func openssl(_ arguments: [String]) throws {
            let p = Process()
            p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
            p.arguments = arguments
            p.standardOutput = FileHandle.nullDevice
            p.standardError = FileHandle.nullDevice
            try ChildProcesses.launch(p)
            ChildProcesses.end(p, grace: 60)
            #expect(p.terminationStatus == 0, "openssl \(arguments)")
        }
        try openssl(["req", "-new", "-key", "\(fixtures)/rogue-leaf.key.pem", "-subj", "/CN=api.pinproxy.test", "-out", "\(directory)/csr.pem"])
        try openssl(["x509", "-req", "-in", "\(directory)/csr.pem", "-CA", "\(fixtures)/rogue-root.pem", "-CAkey", "\(fixtures)/rogue-root.key.pem",
                     "-set_serial", "77", "-days", "30", "-extfile", "\(directory)/ext.cnf", "-outform", "DER", "-out", "\(directory)/smuggler.der"])
        let der = Array(try Data(contentsOf: URL(fileURLWithPath: "\(directory)/smuggler.der")))
        let genuine = try #require(Certificate.load(Array(genuinePEM.utf8)).first).facts
        // The trap: the file loader sees the PEM inside and returns the genuine certificate.
        #expect(try Certificate.load(der).first?.facts.certificate == genuine.certificate)
        // Off the wire it is what it is: the rogue CA's leaf.
        let wire = try #require(Certificate.fromDER(der)).facts
        #expect(wire.certificate != genuine.certificate && wire.issuer.contains("rogue root"))
        #expect(Certificate.fromDER(der + [0]) == nil)  // trailing bytes: not one certificate
    }
}

/// A TLS 1.3 flight's leaf is parsed once per distinct DER (`ParsedLeaves`): the same bytes give the
/// same certificate, other bytes another, bytes that do not parse nothing, and the memo stays
/// within its bound.
@Suite struct ParsedLeavesTests {
    @Test func sameBytesSameCertificateOthersNot() throws {
        let leaves = ParsedLeaves(capacity: 2)
        let ec = try #require(try fixture("leaf-ec256.pem").first).der
        let rsa = try #require(try fixture("leaf-rsa2048.pem").first).der
        let first = try #require(leaves.certificate(ec))
        #expect(leaves.certificate(ec) === first)
        #expect(first.der == ec)
        let other = try #require(leaves.certificate(rsa))
        #expect(other !== first && other.der == rsa)
        #expect(leaves.certificate(Array(ec.dropLast())) == nil)  // truncated: does not parse, and is not kept
        #expect(leaves.count == 2)
        let ed = try #require(try fixture("leaf-ed25519.pem").first).der
        _ = try #require(leaves.certificate(ed))
        #expect(leaves.count == 1)  // full: emptied, then the new one kept
        #expect(leaves.certificate(ec) !== first)  // parsed again, equal bytes
        #expect(leaves.certificate(ec)?.der == ec)
    }
}
