import Foundation
import PinPolicy
import TestSupport
import Testing
import TLSInspection
@testable import ProxyCore

/// The log list as a snapshot loads it (signature, errors naming the file), and Chrome's verdict on
/// the test PKI's leaves (Fixtures/ct) from every place SCTs come.
@Suite struct CTLogBookTests {
    private static let ct = Paths.fixture("ct")
    /// A day after the committed fixtures' SCTs (Fixtures/ct/expected.txt), so they are not in the future.
    private static let now: Date = {
        let text = try! String(contentsOfFile: "\(ct)/expected.txt", encoding: .utf8)
        let milliseconds = Double(text.split(separator: "\n")[0].split(separator: " ")[3])!
        return Date(timeIntervalSince1970: milliseconds / 1000 + 86400)
    }()

    private static func settings(list: String = "\(ct)/log_list.json", key: String? = nil, maxAge: TimeInterval = 70 * 86400,
                                 stale: CTStaleList = .report) -> CTSettings {
        var settings = CTSettings()
        settings.logList = list
        settings.logListLine = 7
        settings.logListKey = key
        settings.maxAge = maxAge
        settings.staleList = stale
        return settings
    }

    private static func loadError(_ settings: CTSettings) -> String {
        do {
            _ = try CTLogBook(settings: settings, policySource: "p.yaml")
            return "loaded"
        } catch {
            return error.description
        }
    }

    private static func chain(_ leaf: String) throws -> [Certificate] { try Certificate.load(Array(Data(contentsOf: URL(fileURLWithPath: "\(ct)/\(leaf).chain.pem")))) }

    @Test func aListThatDoesNotLoadIsALoadErrorNamingTheFileAndPath() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        #expect(Self.loadError(Self.settings(list: "\(dir)/absent.json")).hasPrefix("p.yaml:7:0: cannot read the CT log list \(dir)/absent.json"))
        try #"{"version": "1", "log_list_timestamp": "2026-11-01T00:00:00Z", "operators": [{"name": "A", "email": [], "logs": [{"description": 7}]}]}"#
            .write(toFile: "\(dir)/bad.json", atomically: true, encoding: .utf8)
        let bad = Self.loadError(Self.settings(list: "\(dir)/bad.json"))
        #expect(bad.hasPrefix("p.yaml:7:0: the CT log list \(dir)/bad.json does not load: operators[0].logs[0]"), "\(bad)")
    }

    /// The list a start or reload loads is as strict as `ct-list`: one stamped in the future beyond
    /// the skew, or with a log key OpenSSL does not parse as RSA or EC, does not load.
    @Test func aListFromTheFutureOrWithAKeyThatDoesNotParseIsALoadError() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        func edited(_ name: String, _ edit: (inout [String: Any]) -> Void) throws -> String {
            var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: "\(Self.ct)/log_list.json"))) as? [String: Any])
            edit(&json)
            try JSONSerialization.data(withJSONObject: json).write(to: URL(fileURLWithPath: "\(dir)/\(name)"))
            return "\(dir)/\(name)"
        }

        let future = try edited("future.json") { $0["log_list_timestamp"] = "9999-12-31T00:00:00Z" }
        let late = Self.loadError(Self.settings(list: future))
        #expect(late.hasPrefix("p.yaml:7:0: the CT log list \(future) does not load: log_list_timestamp: 9999-12-31T00:00:00Z is more than 1 day after this machine's clock ("), "\(late)")
        #expect(late.hasSuffix("); a list is stamped when it is published, so the list or the clock is wrong"), "\(late)")

        let notDER = try edited("not-der.json") { $0.editLog(operator: 1, log: 0) { $0["key"] = Base64.encode([0x30, 0x00]) } }
        #expect(Self.loadError(Self.settings(list: notDER)) == "p.yaml:7:0: the CT log list \(notDER) does not load: operators[1].logs[0].key: "
                    + "is not the DER SubjectPublicKeyInfo of an RSA or EC key, so no SCT of this log could be verified")
        // A well-formed Ed25519 key: RFC 6962 logs sign with RSA or ECDSA only.
        let ed25519Key = [0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00] + [UInt8](repeating: 7, count: 32)
        let ed25519 = try edited("ed25519.json") { $0.editLog(operator: 0, log: 1) { $0["key"] = Base64.encode(ed25519Key) } }
        #expect(Self.loadError(Self.settings(list: ed25519)) == "p.yaml:7:0: the CT log list \(ed25519) does not load: operators[0].logs[1].key: "
                    + "is not the DER SubjectPublicKeyInfo of an RSA or EC key, so no SCT of this log could be verified")
    }

    @Test func theSignatureMustVerifyWithTheKey() throws {
        let dir = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: dir) }
        try FileManager.default.copyItem(atPath: "\(Self.ct)/log_list.json", toPath: "\(dir)/log_list.json")
        let key = "\(dir)/signer.pem", pub = "\(dir)/signer.pub.pem"
        #expect(try run("/usr/bin/openssl", ["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", key]).status == 0)
        #expect(try run("/usr/bin/openssl", ["pkey", "-in", key, "-pubout", "-out", pub]).status == 0)
        // No signature file yet.
        #expect(Self.loadError(Self.settings(list: "\(dir)/log_list.json", key: pub)).contains("cannot check the CT log list"))
        #expect(try run("/usr/bin/openssl", ["dgst", "-sha256", "-sign", key, "-out", "\(dir)/log_list.sig", "\(dir)/log_list.json"]).status == 0)
        let book = try CTLogBook(settings: Self.settings(list: "\(dir)/log_list.json", key: pub), policySource: "p.yaml")
        #expect(book.list.operators.count == 2)
        // One byte changed: the list is refused.
        var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: "\(dir)/log_list.json")))
        bytes[bytes.count - 2] = 0x20
        try Data(bytes).write(to: URL(fileURLWithPath: "\(dir)/log_list.json"))
        #expect(Self.loadError(Self.settings(list: "\(dir)/log_list.json", key: pub))
            .contains("is not signed by proxy.ct_log_list_key \(pub) (signature \(dir)/log_list.sig): the signature does not verify"))
    }

    @Test func chromesVerdictOnEachLeaf() throws {
        let book = try CTLogBook(settings: Self.settings(), policySource: "p.yaml")
        func judge(_ leaf: String, _ delivered: DeliveredSCTs = .none) throws -> CTFinding {
            try book.judge(Self.chain(leaf), delivered: delivered, mode: .require, at: Self.now)
        }
        #expect(try judge("two-operators").isCompliant)
        #expect(try judge("three-long").isCompliant)
        #expect(try judge("interception-logged").isCompliant)  // CT is about logging, not who issued
        for leaf in ["no-sct", "one-operator", "two-long", "wrong-cert", "future", "retired-log", "unlisted-log"] {
            #expect(try !judge(leaf).isCompliant, "\(leaf)")
        }
        guard case .notCompliant(let shortfall, _) = try judge("one-operator").verdict else { Issue.record("compliant"); return }
        #expect(shortfall.description.hasPrefix("2 valid embedded SCTs from 1 operator"), "\(shortfall)")
        // no-sct's SCTs come beside it: by TLS extension, and stapled in OCSP.
        let tls = Array(try Data(contentsOf: URL(fileURLWithPath: "\(Self.ct)/no-sct.tls-scts.bin")))
        let ocsp = Array(try Data(contentsOf: URL(fileURLWithPath: "\(Self.ct)/no-sct.ocsp.der")))
        let byExtension = try judge("no-sct", DeliveredSCTs(tlsExtension: tls))
        #expect(byExtension.isCompliant && byExtension.counted.allSatisfy { $0.sct.delivery == .tlsExtension })
        let byOCSP = try judge("no-sct", DeliveredSCTs(ocspResponse: ocsp))
        #expect(byOCSP.isCompliant && byOCSP.counted.allSatisfy { $0.sct.delivery == .ocsp })
        // Another leaf's delivered SCTs do not count for this one.
        #expect(try !judge("one-operator", DeliveredSCTs(tlsExtension: tls)).isCompliant)
    }

    @Test func aStaleListIsEnforcedAsReportUnlessTold() throws {
        let later = Self.now.addingTimeInterval(100 * 86400)
        let relaxed = try CTLogBook(settings: Self.settings(), policySource: "p.yaml")
        let strict = try CTLogBook(settings: Self.settings(stale: .refuse), policySource: "p.yaml")
        let chain = try Self.chain("no-sct")
        #expect(relaxed.judge(chain, delivered: .none, mode: .require, at: Self.now).enforced == .require)
        #expect(relaxed.judge(chain, delivered: .none, mode: .require, at: later).enforced == .report)
        #expect(strict.judge(chain, delivered: .none, mode: .require, at: later).enforced == .require)
        #expect(relaxed.judge(chain, delivered: .none, mode: .report, at: later).enforced == .report)
        // ct_list_stale: at the load, then once a day.
        var log = CTListLog()
        let lines = log.loaded(relaxed, at: later)
        #expect(lines.map(\.event) == ["ct_list_loaded", "ct_list_stale"])
        #expect(lines[1].text(at: later).contains("enforced_as=report"))
        #expect(log.tick(relaxed, at: later.addingTimeInterval(3600)) == nil)
        #expect(log.tick(relaxed, at: later.addingTimeInterval(86400))?.event == "ct_list_stale")
        var strictLog = CTListLog()
        #expect(strictLog.loaded(strict, at: later)[1].text(at: later).contains("enforced_as=require"))
        var fresh = CTListLog()
        #expect(fresh.tick(relaxed, at: Self.now) == nil)
    }
}
