import Foundation
import Testing
import TestSupport

/// A log list of the test PKI (Fixtures/ct/make-ct-fixtures.py, run offline into a temporary
/// directory so that its timestamp is now): operators A (a1, a2 usable) and B (b1 usable, b2
/// retired, b3 pending). Removed with the value's directory by `remove()`.
struct CTListFixture {
    let directory: String
    var list: String { directory + "/log_list.json" }

    init() throws {
        directory = try temporaryDirectory()
        let made = try run("/usr/bin/env", ["python3", Paths.fixture("ct/make-ct-fixtures.py"), "--out", directory])
        guard made.status == 0 else { throw FixtureError(message: "make-ct-fixtures.py: \(made.stderr)") }
    }

    func remove() { try? FileManager.default.removeItem(atPath: directory) }

    /// The list's JSON object, changed by `edit`, written to `name` in the directory.
    func edited(_ name: String, _ edit: (inout [String: Any]) -> Void) throws -> String {
        var json = try #require(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: list))) as? [String: Any])
        edit(&json)
        let path = directory + "/" + name
        try JSONSerialization.data(withJSONObject: json, options: [.prettyPrinted, .sortedKeys]).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// A fresh key pair in the directory (`name.key.pem`, `name.pub.pem`).
    func keyPair(_ name: String, algorithm: String = "RSA") throws -> (key: String, pub: String) {
        let key = "\(directory)/\(name).key.pem", pub = "\(directory)/\(name).pub.pem"
        let options = algorithm == "RSA" ? ["-pkeyopt", "rsa_keygen_bits:2048"] : ["-pkeyopt", "ec_paramgen_curve:P-256"]
        let made = try run("/usr/bin/openssl", ["genpkey", "-algorithm", algorithm] + options + ["-out", key])
        let exported = try run("/usr/bin/openssl", ["pkey", "-in", key, "-pubout", "-out", pub])
        guard made.status == 0, exported.status == 0 else { throw FixtureError(message: "openssl: \(made.stderr)\(exported.stderr)") }
        return (key, pub)
    }

    /// `openssl dgst -sha256 -sign`: the list's detached signature, as Google makes log_list.sig.
    func sign(_ file: String, with key: String, to signature: String) throws {
        let r = try run("/usr/bin/openssl", ["dgst", "-sha256", "-sign", key, "-out", signature, file])
        guard r.status == 0 else { throw FixtureError(message: "openssl dgst: \(r.stderr)") }
    }
}

struct FixtureError: Error, CustomStringConvertible {
    let message: String
    var description: String { message }
}

@Suite struct CTListCommandTests {
    @Test func aGoodListIsPrintedWithItsOperatorsLogsAndAge() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let r = try pinproxy("ct-list", fixture.list)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stderr.isEmpty)
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.count == 10, "\(r.stdout)")
        #expect(lines[0].hasPrefix("\(fixture.list): OK: version 1.0, published "))
        #expect(lines[0].hasSuffix(", 0 days old (ct_list_max_age: 70 days)"))
        #expect(lines[1] == "operator 'Test Operator A' <ct-a@pinproxy.test>: 2 logs")
        #expect(lines[2].hasPrefix("  usable since "))
        #expect(lines[2].contains(": Test Operator A 'a1' log, log_id "))
        #expect(lines[2].contains(", temporal_interval ["))
        #expect(lines[4] == "operator 'Test Operator B' <ct-b@pinproxy.test>: 3 logs")
        #expect(lines[6].hasPrefix("  retired since ") && lines[6].contains("Test Operator B 'b2' log"))
        #expect(lines[7].hasPrefix("  pending since ") && lines[7].contains("Test Operator B 'b3' log"))
        #expect(lines[8] == "2 operators, 5 logs (3 usable, 1 retired, 1 pending); 2 operators with a usable or qualified log")
        #expect(lines[9] == "")
        // The log id printed is the list's own.
        let listed = try String(contentsOfFile: fixture.list, encoding: .utf8)
        let id = try #require(lines[2].components(separatedBy: "log_id ").last?.components(separatedBy: ",").first)
        #expect(listed.contains("\"log_id\": \"\(id)\""))
    }

    @Test func aBadListIsAnErrorNamingItsJSONPath() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        // b1's log id replaced by a1's: the id is no longer the SHA-256 of b1's key.
        let wrongID = try fixture.edited("wrong-id.json") { json in
            var operators = json["operators"] as! [[String: Any]]
            var logs = operators[1]["logs"] as! [[String: Any]]
            logs[0]["log_id"] = (operators[0]["logs"] as! [[String: Any]])[0]["log_id"]
            operators[1]["logs"] = logs
            json["operators"] = operators
        }
        let r = try pinproxy("ct-list", wrongID)
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == "\(wrongID): error: operators[1].logs[0].log_id: is not the SHA-256 of the log's key\n")

        let noState = try fixture.edited("no-state.json") { json in
            var operators = json["operators"] as! [[String: Any]]
            var logs = operators[0]["logs"] as! [[String: Any]]
            logs[1]["state"] = [String: Any]()
            operators[0]["logs"] = logs
            json["operators"] = operators
        }
        let state = try pinproxy("ct-list", noState)
        #expect(state.status == 1)
        #expect(state.stderr == "\(noState): error: operators[0].logs[1].state: no state; exactly one of pending, qualified, usable, readonly, retired, rejected expected\n")

        let notJSON = try temporaryFile("{\"operators\": [", name: "log_list.json")
        defer { try? FileManager.default.removeItem(atPath: (notJSON as NSString).deletingLastPathComponent) }
        let syntax = try pinproxy("ct-list", notJSON)
        #expect(syntax.status == 1)
        #expect(syntax.stderr.hasPrefix("\(notJSON): error: not JSON: "), "\(syntax.stderr)")

        let missing = try pinproxy("ct-list", fixture.directory + "/none.json")
        #expect(missing.status == 1)
        #expect(missing.stderr == "\(fixture.directory)/none.json: error: cannot read \(fixture.directory)/none.json: No such file or directory (errno 2)\n")
    }

    @Test func aStaleListIsAWarningAndExits0() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let old = Date().addingTimeInterval(-80 * 86400 - 3600)
        let stale = try fixture.edited("stale.json") { $0["log_list_timestamp"] = Self.rfc3339(old) }
        let r = try pinproxy("ct-list", stale)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasPrefix("\(stale): OK: version 1.0, published \(Self.rfc3339(old)), 80 days old (ct_list_max_age: 70 days)\n"))
        #expect(r.stdout.hasSuffix("""
            \(stale): warning[ct_list_stale]: the list is 80 days old, older than ct_list_max_age (70 days): logs may have been retired or distrusted since; fetch the current one (pinproxy ct-list FILE --install)

            """), "\(r.stdout)")
    }

    @Test func aListWithOneOperatorInServiceIsAWarning() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        // Operator B keeps only its retired and pending logs.
        let oneOperator = try fixture.edited("one-operator.json") { json in
            var operators = json["operators"] as! [[String: Any]]
            operators[1]["logs"] = Array((operators[1]["logs"] as! [[String: Any]]).dropFirst())
            json["operators"] = operators
        }
        let r = try pinproxy("ct-list", oneOperator)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasSuffix("""
            2 operators, 4 logs (2 usable, 1 retired, 1 pending); 1 operator with a usable or qualified log
            \(oneOperator): warning[ct_list_few_operators]: only 'Test Operator A' has a usable or qualified log; Chrome's policy needs SCTs from 2 operators, so no certificate can comply with this list

            """), "\(r.stdout)")
    }

    @Test func aSignatureWithoutAKeyIsAUsageError() throws {
        let r = try pinproxy("ct-list", "log_list.json", "--signature", "log_list.sig")
        #expect(r.status == 64)
        #expect(r.stderr.hasPrefix("Error: --signature goes with --key: a signature is only checked against a key\n"))
    }

    static func rfc3339(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: date)
    }
}
