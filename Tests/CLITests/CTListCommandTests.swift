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

    /// A file of the directory holding `text`.
    func file(_ name: String, _ text: String) throws -> String {
        let path = directory + "/" + name
        try text.write(toFile: path, atomically: true, encoding: .utf8)
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
            let a1 = ((json["operators"] as! [[String: Any]])[0]["logs"] as! [[String: Any]])[0]["log_id"]
            json.editLog(operator: 1, log: 0) { $0["log_id"] = a1 }
        }
        let r = try pinproxy("ct-list", wrongID)
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == "\(wrongID): error: operators[1].logs[0].log_id: is not the SHA-256 of the log's key\n")

        let noState = try fixture.edited("no-state.json") { $0.editLog(operator: 0, log: 1) { $0["state"] = [String: Any]() } }
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
            json.editOperator(1) { $0["logs"] = Array(($0["logs"] as! [[String: Any]]).dropFirst()) }
        }
        let r = try pinproxy("ct-list", oneOperator)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasSuffix("""
            2 operators, 4 logs (2 usable, 1 retired, 1 pending); 1 operator with a usable or qualified log
            \(oneOperator): warning[ct_list_few_operators]: only 'Test Operator A' has a usable or qualified log; Chrome's policy needs SCTs from 2 operators, so no certificate can comply with this list

            """), "\(r.stdout)")
    }

    /// What a list says is printed escaped: a description or operator name with ESC, CR/LF, NUL, a C1
    /// control or a bidi override cannot clear the screen, forge a line or reorder the output.
    @Test func controlCharactersFromTheListAreEscaped() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        // Operator A named and its first log described with control characters; operator B keeps
        // only its retired and pending logs, so the warning names A too.
        let hostile = try fixture.edited("hostile.json") { json in
            json.editLog(operator: 0, log: 0) { $0["description"] = "a1\u{1b}]0;owned\u{7}\u{202e}gol" }
            json.editOperator(0) { $0["name"] = "Evil\u{1b}[2J\r\nOK\u{0}\u{7f}\u{9b}" }
            json.editOperator(1) { $0["logs"] = Array(($0["logs"] as! [[String: Any]]).dropFirst()) }
        }
        let r = try pinproxy("ct-list", hostile)
        #expect(r.status == 0, "\(r.stderr)")
        let lines = r.stdout.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines.count == 10, "\(r.stdout)")
        #expect(lines[1] == #"operator 'Evil\u{1b}[2J\r\nOK\u{0}\u{7f}\u{9b}' <ct-a@pinproxy.test>: 2 logs"#, "\(r.stdout)")
        #expect(lines[2].contains(#": a1\u{1b}]0;owned\u{7}\u{202e}gol, log_id "#), "\(lines[2])")
        #expect(lines[8] == #"\#(hostile): warning[ct_list_few_operators]: only 'Evil\u{1b}[2J\r\nOK\u{0}\u{7f}\u{9b}' has a usable or qualified log; "#
                    + "Chrome's policy needs SCTs from 2 operators, so no certificate can comply with this list", "\(r.stdout)")
        // Nothing that moves the cursor reached stdout: every scalar printable, or the line's end.
        #expect(r.stdout.unicodeScalars.allSatisfy { $0 == "\n" || ($0.value >= 0x20 && $0.value != 0x7f && !(0x80...0x9f).contains($0.value) && $0.value != 0x202e) })
    }

    /// A list stamped 9999-12-31 would be "0 days old" for ever and make `--install` refuse every
    /// list after it: it is refused, and one already installed (by an older pinproxy) does not stop
    /// the next install.
    @Test func aListFromTheFutureIsRefusedAndDoesNotBlockTheNextInstall() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let future = try fixture.edited("future.json") { $0["log_list_timestamp"] = "9999-12-31T00:00:00Z" }
        let r = try pinproxy("ct-list", future)
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr.hasPrefix("\(future): error: log_list_timestamp: 9999-12-31T00:00:00Z is more than 1 day after this machine's clock ("), "\(r.stderr)")
        #expect(r.stderr.hasSuffix("); a list is stamped when it is published, so the list or the clock is wrong\n"), "\(r.stderr)")

        let installed = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: installed) }
        let target = installed + "/log_list.json"
        let config = try Self.policy(fixture, target: target)
        let refused = try pinproxy("ct-list", future, "--install", "--config", config)
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.hasPrefix("\(future): error: log_list_timestamp: 9999-12-31T00:00:00Z is more than 1 day after"), "\(refused.stderr)")
        #expect(!FileManager.default.fileExists(atPath: target))

        #expect(FileManager.default.createFile(atPath: target, contents: FileManager.default.contents(atPath: future)))
        let next = try pinproxy("ct-list", fixture.list, "--install", "--config", config)
        #expect(next.status == 0, "\(next.stderr)")
        #expect(next.stdout.hasSuffix("installed \(target); reload pinproxy to use it (systemctl reload pinproxy)\n"), "\(next.stdout)")
        #expect(FileManager.default.contents(atPath: target) == FileManager.default.contents(atPath: fixture.list))
    }

    /// A log key OpenSSL does not parse would make that log's SCTs silently count for nothing: the
    /// list is refused, naming the key's JSON path.
    @Test func aKeyThatDoesNotParseIsAnErrorNamingItsJSONPath() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let badKey = try fixture.edited("bad-key.json") { $0.editLog(operator: 1, log: 2) { $0["key"] = "MAA=" } }  // DER: an empty SEQUENCE
        let r = try pinproxy("ct-list", badKey)
        #expect(r.status == 1)
        #expect(r.stdout.isEmpty)
        #expect(r.stderr == "\(badKey): error: operators[1].logs[2].key: is not the DER SubjectPublicKeyInfo of an RSA or EC key, so no SCT of this log could be verified\n")
    }

    @Test func aSignatureWithoutAKeyIsAUsageError() throws {
        let r = try pinproxy("ct-list", "log_list.json", "--signature", "log_list.sig")
        #expect(r.status == 64)
        #expect(r.stderr.hasPrefix("Error: --signature goes with --key: a signature is only checked against a key\n"))
    }

    @Test(arguments: ["RSA", "EC"])
    func theSignatureMustVerifyWithTheKey(algorithm: String) throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let (key, pub) = try fixture.keyPair("publisher", algorithm: algorithm)
        let (_, other) = try fixture.keyPair("someone-else", algorithm: algorithm)
        let signature = fixture.directory + "/log_list.sig"  // where --signature defaults to
        try fixture.sign(fixture.list, with: key, to: signature)

        let good = try pinproxy("ct-list", fixture.list, "--key", pub)
        #expect(good.status == 0, "\(good.stderr)")
        #expect(good.stdout.contains("\nsignature \(signature) verifies with \(pub)\n"))

        let wrongKey = try pinproxy("ct-list", fixture.list, "--key", other)
        #expect(wrongKey.status == 1)
        #expect(wrongKey.stdout.isEmpty)
        #expect(wrongKey.stderr == "\(fixture.list): error: signature \(signature), key \(other): the signature does not verify with the key: the list was changed, or signed by someone else\n")

        // One byte more in the list (still valid JSON): the signature is for other bytes.
        let changed = fixture.directory + "/changed.json"
        try Data((try String(contentsOfFile: fixture.list, encoding: .utf8) + " ").utf8).write(to: URL(fileURLWithPath: changed))
        let tampered = try pinproxy("ct-list", changed, "--signature", signature, "--key", pub)
        #expect(tampered.status == 1)
        #expect(tampered.stderr == "\(changed): error: signature \(signature), key \(pub): the signature does not verify with the key: the list was changed, or signed by someone else\n")

        let noSignature = try pinproxy("ct-list", changed, "--key", pub)  // changed.sig does not exist
        #expect(noSignature.status == 1)
        #expect(noSignature.stderr == "\(fixture.directory)/changed.sig: error: cannot read \(fixture.directory)/changed.sig: No such file or directory (errno 2)\n")

        let notAKey = try pinproxy("ct-list", fixture.list, "--key", fixture.list)
        #expect(notAKey.status == 1)
        #expect(notAKey.stderr == "\(fixture.list): error: signature \(signature), key \(fixture.list): the key file holds no RSA or EC public key (PEM 'PUBLIC KEY' or DER SubjectPublicKeyInfo)\n")
    }

    /// A policy (in the fixture's directory) whose proxy.ct_log_list is `target` (and ct_log_list_key `key`).
    static func policy(_ fixture: CTListFixture, target: String, key: String? = nil, extra: String = "") throws -> String {
        try fixture.file("pinproxy.yaml", """
            version: 1
            proxy:
              ct_log_list: \(target)
            \(key.map { "  ct_log_list_key: \($0)\n" } ?? "")\(extra)defaults: { unpinned: allow, ct: require }
            """)
    }

    @Test func installCopiesTheListAndItsSignatureAtomically() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let (key, pub) = try fixture.keyPair("publisher")
        try fixture.sign(fixture.list, with: key, to: fixture.directory + "/log_list.sig")
        let installed = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: installed) }
        let target = installed + "/log_list.json"
        let config = try Self.policy(fixture, target: target, key: pub)

        // Before: the proxy's own check refuses the policy, its list is missing.
        let before = try pinproxy("check", "--config", config)
        #expect(before.status == 1)
        #expect(before.stderr.contains("\(config):3:16: error: cannot read the CT log list \(target): "))

        let r = try pinproxy("ct-list", fixture.list, "--install", "--config", config)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.hasSuffix("signature \(fixture.directory)/log_list.sig verifies with \(pub)\ninstalled \(target) and \(installed)/log_list.sig; reload pinproxy to use it (systemctl reload pinproxy)\n"), "\(r.stdout)")
        #expect(FileManager.default.contents(atPath: target) == FileManager.default.contents(atPath: fixture.list))
        #expect(FileManager.default.contents(atPath: installed + "/log_list.sig") == FileManager.default.contents(atPath: fixture.directory + "/log_list.sig"))
        // Only the two files, no temporary left behind, readable by the proxy's user.
        #expect(try FileManager.default.contentsOfDirectory(atPath: installed).sorted() == ["log_list.json", "log_list.sig"])
        for name in ["log_list.json", "log_list.sig"] {
            let mode = try FileManager.default.attributesOfItem(atPath: installed + "/" + name)[.posixPermissions] as? Int
            #expect(mode == 0o644, "\(name): \(String(mode ?? 0, radix: 8))")
        }
        // After: the policy loads with it.
        let after = try pinproxy("check", "--config", config)
        #expect(after.status == 0, "\(after.stderr)")
        #expect(after.stderr.isEmpty)
    }

    @Test func installRefusesABadListAndLeavesTheInstalledOne() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let (key, pub) = try fixture.keyPair("publisher")
        try fixture.sign(fixture.list, with: key, to: fixture.directory + "/log_list.sig")
        let installed = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: installed) }
        let target = installed + "/log_list.json"
        let config = try Self.policy(fixture, target: target, key: pub)
        #expect(try pinproxy("ct-list", fixture.list, "--install", "--config", config).status == 0)
        let listBefore = FileManager.default.contents(atPath: target), signatureBefore = FileManager.default.contents(atPath: installed + "/log_list.sig")

        // A list that does not load, signed by the right key.
        let broken = try fixture.edited("broken.json") { $0["operators"] = "none" }
        try fixture.sign(broken, with: key, to: fixture.directory + "/broken.sig")
        let bad = try pinproxy("ct-list", broken, "--install", "--config", config)
        #expect(bad.status == 1)
        #expect(bad.stderr == "\(broken): error: operators: expected an array\n")

        // A good list whose signature is not the publisher's: the policy's key is checked even without --key.
        let (otherKey, _) = try fixture.keyPair("someone-else")
        let forged = try fixture.edited("forged.json") { _ in }
        try fixture.sign(forged, with: otherKey, to: fixture.directory + "/forged.sig")
        let unsigned = try pinproxy("ct-list", forged, "--install", "--config", config)
        #expect(unsigned.status == 1)
        #expect(unsigned.stderr == "\(forged): error: signature \(fixture.directory)/forged.sig, key \(pub): the signature does not verify with the key: the list was changed, or signed by someone else\n")

        // A properly signed list published before the installed one: a replay.
        let oldStamp = Self.rfc3339(Date().addingTimeInterval(-2 * 86400))
        let older = try fixture.edited("older.json") { $0["log_list_timestamp"] = oldStamp }
        try fixture.sign(older, with: key, to: fixture.directory + "/older.sig")
        let replay = try pinproxy("ct-list", older, "--install", "--config", config)
        #expect(replay.status == 1)
        #expect(replay.stderr.hasPrefix("\(older): error: published \(oldStamp), before the list installed in \(target) ("), "\(replay.stderr)")
        #expect(replay.stderr.hasSuffix("); an older list could bring back a log distrusted since. To go back on purpose, remove \(target) first\n"))

        #expect(FileManager.default.contents(atPath: target) == listBefore)
        #expect(FileManager.default.contents(atPath: installed + "/log_list.sig") == signatureBefore)
        #expect(try FileManager.default.contentsOfDirectory(atPath: installed).sorted() == ["log_list.json", "log_list.sig"])
    }

    @Test func installNeedsAPolicyThatSaysWhere() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let noList = try fixture.file("no-list.yaml", "version: 1\ndefaults: { unpinned: allow }\n")
        let r = try pinproxy("ct-list", fixture.list, "--install", "--config", noList)
        #expect(r.status == 1)
        #expect(r.stderr == "\(noList): error: proxy.ct_log_list is not set; --install copies the list where it points (e.g. /var/lib/pinproxy/ct/log_list.json)\n")

        let nowhere = try Self.policy(fixture, target: fixture.directory + "/missing/log_list.json")
        let missingDirectory = try pinproxy("ct-list", fixture.list, "--install", "--config", nowhere)
        #expect(missingDirectory.status == 1)
        #expect(missingDirectory.stderr == "\(fixture.list): error: cannot install \(fixture.directory)/missing/log_list.json: create a temporary file in \(fixture.directory)/missing: No such file or directory (errno 2)\n")

        let broken = try fixture.file("broken.yaml", "version: 1\nproxy:\n  ct_log_list: 3\n")
        let badPolicy = try pinproxy("ct-list", fixture.list, "--install", "--config", broken)
        #expect(badPolicy.status == 1)
        #expect(badPolicy.stdout.isEmpty)
        #expect(badPolicy.stderr.hasSuffix("\(broken): 1 error; the policy was not loaded\n"), "\(badPolicy.stderr)")
    }

    @Test func theMaximumAgeComesFromThePolicy() throws {
        let fixture = try CTListFixture()
        defer { fixture.remove() }
        let config = try Self.policy(fixture, target: fixture.list, extra: "  ct_list_max_age: 10d\n")
        let old = Date().addingTimeInterval(-20 * 86400 - 60)
        let twentyDays = try fixture.edited("twenty-days.json") { $0["log_list_timestamp"] = Self.rfc3339(old) }
        let withPolicy = try pinproxy("ct-list", twentyDays, "--config", config)
        #expect(withPolicy.status == 0, "\(withPolicy.stderr)")
        #expect(withPolicy.stdout.contains(", 20 days old (ct_list_max_age: 10 days)\n"))
        #expect(withPolicy.stdout.hasSuffix("\(twentyDays): warning[ct_list_stale]: the list is 20 days old, older than ct_list_max_age (10 days): logs may have been retired or distrusted since; fetch the current one (pinproxy ct-list FILE --install)\n"))
        let without = try pinproxy("ct-list", twentyDays)
        #expect(without.stdout.contains(", 20 days old (ct_list_max_age: 70 days)\n"))
        #expect(!without.stdout.contains("warning"))
    }

    static func rfc3339(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.string(from: date)
    }
}
