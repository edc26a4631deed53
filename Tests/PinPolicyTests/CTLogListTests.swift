import Foundation
import Testing
@testable import PinPolicy

@Suite struct CTLogListTests {
    @Test func thePublishedListLoads() throws {
        let list = try CTFake.parse(publishedLogListExcerpt)
        #expect(list.version == "93.3")
        #expect(list.timestamp == RFC3339.parse("2026-10-03T13:35:24Z"))
        #expect(list.operators.map(\.name) == ["Google", "Cloudflare"])
        #expect(list.operators.map(\.logs.count) == [6, 1])
        let argon = try #require(list.log(CTLogID(Base64.decode("1219ENGn9XfCx+lf1wC/+YLJM1pl4dCzAXMXwMjFaXc=")!)!))
        #expect(argon.description == "Google 'Argon2026h2' log")
        #expect(argon.operatorName == "Google")
        #expect(argon.endpoint == .rfc6962(url: "https://ct.googleapis.com/logs/us1/argon2026h2/"))
        #expect(argon.mmd == 86400)
        #expect(argon.state == .usable(since: RFC3339.parse("2024-09-30T22:19:27Z")!))
        #expect(argon.temporalInterval == CTTemporalInterval(startInclusive: RFC3339.parse("2026-07-01T00:00:00Z")!,
                                                             endExclusive: RFC3339.parse("2027-01-01T00:00:00Z")!))
        #expect(argon.key.count == 91)  // a P-256 SubjectPublicKeyInfo
        let parcelYard = try #require(list.log(CTLogID(Base64.decode("HIl0B+YBCgEpO7Z439ejaM6xjMpSHcyk04bkoy5bXQQ=")!)!))
        #expect(parcelYard.endpoint == .tiled(submissionURL: "https://parcelyard2027h1.prod.certificate.transparency.goog/",
                                              monitoringURL: "https://storage.googleapis.com/parcelyard2027h1.prod.certificate.transparency.goog/"))
        #expect(parcelYard.mmd == 60)
    }

    @Test func everyStateAndTheReadonlyTreeHead() throws {
        let head = #"{"sha256_root_hash": "\#(Base64.encode(Array(repeating: 7, count: 32)))", "tree_size": 57634084}"#
        let list = try CTFake.parse(CTFake.list([CTFake.operator("A", logs: [
            CTFake.log(1, state: CTFake.state("pending", "2026-01-01T00:00:00Z")),
            CTFake.log(2, state: CTFake.state("qualified", "2026-01-02T00:00:00Z")),
            CTFake.log(3, state: CTFake.state("usable", "2026-01-03T00:00:00Z")),
            CTFake.log(4, state: #"{"readonly": {"timestamp": "2026-01-04T00:00:00Z", "final_tree_head": \#(head)}}"#),
            CTFake.log(5, state: CTFake.state("retired", "2026-01-05T00:00:00Z")),
            CTFake.log(6, state: CTFake.state("rejected", "2026-01-06T00:00:00Z")),
        ])]))
        let day = { (d: Int) in RFC3339.parse("2026-01-0\(d)T00:00:00Z")! }
        #expect(list.operators[0].logs.map(\.state) == [
            .pending(since: day(1)), .qualified(since: day(2)), .usable(since: day(3)),
            .readonly(since: day(4), finalTreeHead: CTTreeHead(treeSize: 57634084, sha256RootHash: Array(repeating: 7, count: 32))),
            .retired(since: day(5)), .rejected(since: day(6)),
        ])
    }

    @Test func previousOperatorsOldestFirst() throws {
        let moves = #", "previous_operators": [{"name": "Y", "end_time": "2025-06-01T00:00:00Z"}, {"name": "X", "end_time": "2024-06-01T00:00:00Z"}]"#
        let log = try CTFake.parse(CTFake.list([CTFake.operator("Z", logs: [CTFake.log(1, extra: moves)])])).operators[0].logs[0]
        #expect(log.previousOperators.map(\.name) == ["X", "Y"])
        #expect(log.operatorName(at: RFC3339.parse("2024-06-01T00:00:00Z")!) == "X")
        #expect(log.operatorName(at: RFC3339.parse("2024-06-01T00:00:01Z")!) == "Y")
        #expect(log.operatorName(at: RFC3339.parse("2025-06-01T00:00:01Z")!) == "Z")
    }

    /// The schema grows: fields pinproxy does not know are skipped, at every level.
    @Test func unknownFieldsAreIgnored() throws {
        let text = CTFake.list([CTFake.operator("A", logs: [CTFake.log(1, extra: #", "dns": "log1.test", "future": {"x": [1, 2]}"#)])])
            .replacingOccurrences(of: #""version": "1.0""#, with: #""version": "1.0", "is_all_logs": false"#)
            .replacingOccurrences(of: #""usable": {"#, with: #""usable": {"extra": true, "#)
        let list = try CTFake.parse(text)
        #expect(list.operators[0].logs.map(\.id) == [CTFake.id(1)])
    }

    /// Each broken list and the exact error: the JSON path, then what is wrong.
    @Test(arguments: [
        ("[]", "expected an object"),
        ("{", "not JSON: Unexpected end of file during JSON parse."),
        ("{\n  \"a\": 1,\n  \"b\": tru\n}", "not JSON: Invalid value around character 22."),
        (#"{"log_list_timestamp": "2026-11-20T00:00:00Z", "operators": [{"name": "A", "email": [], "logs": [7]}]}"#,
         "operators[0].logs[0]: expected an object"),
        (#"{"log_list_timestamp": "2026-11-20T00:00:00Z", "operators": [{"name": "A", "email": [3], "logs": []}]}"#,
         "operators[0].email[0]: expected a string"),
        (CTFake.list([]).replacingOccurrences(of: #""log_list_timestamp": "2026-11-20T00:00:00Z", "#, with: ""),
         "log_list_timestamp: missing"),
        (CTFake.list([], timestamp: "2026-11-20"), "log_list_timestamp: '2026-11-20' is not an RFC 3339 timestamp"),
        (#"{"log_list_timestamp": "2026-11-20T00:00:00Z", "operators": {}}"#, "operators: expected an array"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)]), CTFake.operator("B", logs: [CTFake.log(2)])])
            .replacingOccurrences(of: #""mmd": 86400"#, with: #""mmd": "1d""#),
         "operators[0].logs[0].mmd: expected an integer"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)]), CTFake.operator("B", logs: [CTFake.log(2)])])
            .replacingOccurrences(of: #""name": "B""#, with: #""name": null"#),
         "operators[1].name: null; expected a string"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)])]).replacingOccurrences(of: #", "mmd": 86400"#, with: ""),
         "operators[0].logs[0].mmd: missing"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)])]).replacingOccurrences(of: #""mmd": 86400"#, with: #""mmd": 0"#),
         "operators[0].logs[0].mmd: 0; the merge delay is at least 1 second"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)])]).replacingOccurrences(of: Base64.encode(CTFake.key(1)), with: "MFkw*A=="),
         "operators[0].logs[0].key: 'MFkw*A==' is not base64"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)])]).replacingOccurrences(of: CTFake.id(1).description, with: "AAAA"),
         "operators[0].logs[0].log_id: decodes to 3 bytes; a log id is 32 (SHA-256)"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)])]).replacingOccurrences(of: CTFake.id(1).description, with: CTFake.id(2).description),
         "operators[0].logs[0].log_id: is not the SHA-256 of the log's key"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1, state: #"{"usable": {"timestamp": "2025-01-01T00:00:00Z"}, "retired": {"timestamp": "2026-01-01T00:00:00Z"}}"#)])]),
         "operators[0].logs[0].state: 2 states (usable, retired); exactly one expected"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1, state: "{}")])]),
         "operators[0].logs[0].state: no state; exactly one of pending, qualified, usable, readonly, retired, rejected expected"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1, state: CTFake.state("usable", "2026-13-01T00:00:00Z"))])]),
         "operators[0].logs[0].state.usable.timestamp: '2026-13-01T00:00:00Z' is not an RFC 3339 timestamp"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1, state: CTFake.state("readonly", "2026-01-01T00:00:00Z"))])]),
         "operators[0].logs[0].state.readonly.final_tree_head: missing"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)], tiled: [CTFake.log(2, tiled: true).replacingOccurrences(of: #", "monitoring_url": "https://mon2.test/""#, with: "")])]),
         "operators[0].tiled_logs[0].monitoring_url: missing"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1, tiled: true)])]), "operators[0].logs[0].url: missing"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1, extra: #", "previous_operators": [{"name": "X", "end_time": "soon"}]"#)])]),
         "operators[0].logs[0].previous_operators[0].end_time: 'soon' is not an RFC 3339 timestamp"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1, interval: #"{"start_inclusive": "2027-01-01T00:00:00Z", "end_exclusive": "2026-01-01T00:00:00Z"}"#)])]),
         "operators[0].logs[0].temporal_interval.end_exclusive: is not after start_inclusive"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)]), CTFake.operator("B", logs: [CTFake.log(2)], tiled: [CTFake.log(1, tiled: true)])]),
         "operators[1].tiled_logs[0].log_id: \(CTFake.id(1)) is listed twice (also operators[0].logs[0])"),
        (CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)]), CTFake.operator("A", logs: [CTFake.log(2)])]),
         "operators[1].name: operator 'A' is listed twice (also operators[0])"),
    ])
    func brokenListsNameThePath(text: String, expected: String) {
        do {
            _ = try CTFake.parse(text)
            Issue.record("the list loaded")
        } catch {
            #expect(error.description == expected)
        }
    }

    /// A list stamped more than a day ahead of the clock would never go stale and would make every
    /// later `ct-list --install` refuse the lists published before its date: it does not load.
    @Test func aListFromTheFutureDoesNotLoad() throws {
        let now = RFC3339.parse("2026-11-29T04:00:00Z")!
        func load(_ timestamp: String) throws(CTLogListError) -> CTLogList {
            try CTLogList.parse(Array(CTFake.list([], timestamp: timestamp).utf8), at: now, keyCheck: { _ in true })
        }
        #expect(try load("2026-11-30T04:00:00Z").freshness(at: now) == .fresh(age: 0))  // a clock a day behind the publisher's
        #expect(throws: CTLogListError(path: "log_list_timestamp", problem: "2026-11-30T04:00:01Z is more than 1 day after this machine's clock "
                                                                             + "(2026-11-29T04:00:00Z); a list is stamped when it is published, so the list or the clock is wrong")) {
            try load("2026-11-30T04:00:01Z")
        }
        #expect(throws: CTLogListError(path: "log_list_timestamp", problem: "9999-12-31T00:00:00Z is more than 1 day after this machine's clock "
                                                                             + "(2026-11-29T04:00:00Z); a list is stamped when it is published, so the list or the clock is wrong")) {
            try load("9999-12-31T00:00:00Z")
        }
    }

    /// Every log's key goes through the key check (OpenSSL's, in the proxy): one it refuses is an
    /// error at that key's JSON path, in `logs` or `tiled_logs`.
    @Test func aKeyThatDoesNotParseIsAnErrorAtItsPath() throws {
        let text = CTFake.list([CTFake.operator("A", logs: [CTFake.log(1)]), CTFake.operator("B", logs: [CTFake.log(2)], tiled: [CTFake.log(3, tiled: true)])])
        let now = RFC3339.parse("2026-11-29T04:00:00Z")!
        for (refused, path) in [(UInt8(2), "operators[1].logs[0].key"), (3, "operators[1].tiled_logs[0].key")] {
            #expect(throws: CTLogListError(path: path, problem: "is not the DER SubjectPublicKeyInfo of an RSA or EC key, so no SCT of this log could be verified")) {
                try CTLogList.parse(Array(text.utf8), at: now, keyCheck: { $0 != CTFake.key(refused) })
            }
        }
        #expect(try CTLogList.parse(Array(text.utf8), at: now, keyCheck: { _ in true }).operators.flatMap(\.logs).count == 3)
    }

    /// What an error quotes from the list is escaped: it cannot move the cursor or break the line.
    @Test func anErrorQuotingTheListIsOneLine() {
        let text = CTFake.list([CTFake.operator("X", logs: [CTFake.log(1)]), CTFake.operator("X", logs: [CTFake.log(2)])])
            .replacingOccurrences(of: #""name": "X""#, with: #""name": "A\u001b[2J\r\nB\u0000\u007f\u0085\u202e""#)
        do {
            _ = try CTFake.parse(text)
            Issue.record("the list loaded")
        } catch {
            #expect(error.description == #"operators[1].name: operator 'A\u{1b}[2J\r\nB\u{0}\u{7f}\u{85}\u{202e}' is listed twice (also operators[0])"#)
        }
    }

    @Test func ageAgainstTheMaximum() throws {
        let list = try CTFake.parse(publishedLogListExcerpt)  // 2026-10-03T13:35:24Z
        let published = RFC3339.parse("2026-10-03T13:35:24Z")!
        #expect(list.freshness(at: published.addingTimeInterval(70 * 86400)) == .fresh(age: 70 * 86400))
        #expect(list.freshness(at: published.addingTimeInterval(70 * 86400 + 1)) == .stale(age: 70 * 86400 + 1))
        #expect(list.freshness(at: published.addingTimeInterval(8 * 86400), maxAge: 7 * 86400) == .stale(age: 8 * 86400))
        // A machine whose clock is behind the publisher's: not stale, and no negative age.
        #expect(list.freshness(at: published.addingTimeInterval(-3600)) == .fresh(age: 0))
    }
}
