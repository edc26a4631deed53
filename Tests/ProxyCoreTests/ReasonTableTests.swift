import Foundation
import Logging
import TestSupport
import Testing
@testable import PinPolicy
@testable import ProxyCore

/// The reason table (`ReasonTable.swift`) is the one place a reason's answer, hint, level and
/// counter are decided; these check that what is derived from it says the same, and that the log
/// reference's "What the client sees" table agrees with it both ways.
@Suite struct ReasonTableTests {
    static let codes: [Refusal.Code] = RefusalReason.allCases.map { .policy($0) } + NetworkRefusal.allCases.map { .network($0) }

    /// The rows of docs/logs.md's "What the client sees": situation, status and phrase, Proxy-Status.
    static let clientRows: [[String]] = {
        let reference = (try? String(contentsOfFile: Paths.repository.appendingPathComponent("docs/logs.md").path, encoding: .utf8)) ?? ""
        guard let start = reference.range(of: "### What the client sees") else { return [] }
        return reference[start.upperBound...].split(separator: "\n", omittingEmptySubsequences: false)
            .drop { !$0.hasPrefix("|") }.prefix { $0.hasPrefix("|") }.dropFirst(2)
            .map { $0.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast().map { $0.trimmingCharacters(in: .whitespaces) } }
    }()

    /// How the client table names the situation of a code that shares its answer with another.
    static let situationWords: [Refusal.Code: String] = [
        .policy(.chainInvalid): "chain", .policy(.hostnameMismatch): "hostname", .policy(.unpinnedDenied): "unpinned: deny",
        .policy(.portNotAllowed): "port not allowed", .network(.badRequest): "bad target or head",
    ]

    /// Every answer and hint, byte for byte, as the committed fixture has them: a change to any of
    /// them is a change to the log interface, made on purpose (`PINPROXY_WRITE_FIXTURE=1` rewrites it).
    @Test func everyAnswerAndHintIsAsCommitted() throws {
        let fixture = Paths.repository.appendingPathComponent("Tests/ProxyCoreTests/Fixtures/reason-table.txt")
        let client = SocketAddress.parse("127.0.0.1:4000")!
        let snapshot = PolicySnapshot.loaded(from: """
            version: 1
            defaults: { unpinned: deny, require_backup: off }
            rules:
              - host: pinned.example.test
                pins: ["\(Pins.leafEC)"]
            """)
        let authority = try Authority.parse("pinned.example.test:443").get()
        let rule = try #require(snapshot.policy.rules.first)
        let bare = DecisionRecord(conn: 7, client: client)
        let ruled = DecisionRecord(conn: 7, client: client, .admitted(AskedConnect(authority: authority, snapshot: snapshot), .pinned(rule)))
        var text = ""
        for code in Self.codes {
            let entry = code.entry
            text += "\(code.rawValue): \(entry.status) \(entry.phrase); \(entry.proxyStatus)\n"
            text += "  hint: \(entry.hint(bare))\n"
            text += "  hint with a rule: \(entry.hint(ruled))\n"
            text += "  plain hint: \(PlainLog.hint(for: Refusal(code, detail: ""), conn: 7, client: client))\n"
        }
        for reason in StreamReason.all {
            text += "stream \(reason.code): mayBeLetThrough=\(reason.mayBeLetThrough); \(reason.hint(ruled))\n"
        }
        let evaluation = Evaluation(verdict: .refused(.pinMismatch), rule: rule, denylisted: nil, chainFailure: nil, warnings: [])
        for reason in RefusalReason.allCases { text += "detail \(reason.rawValue): \(reason.detail(authority.target, evaluation))\n" }
        let date = Date(timeIntervalSince1970: 1_800_000_000)
        for warning in [RuntimeWarning.noRealBackup, .leafExpiresSoon(notAfter: date), .ruleExpired(date), .ruleExpiresSoon(date)] {
            text += "warning \(warning.code): \(warning.level) \(warning.hint(ruled) ?? "-")\n"
        }
        // A counter by the `stats` key that reports it.
        func counted(_ entry: OutcomeEntry) -> String {
            entry.counters.map { counter in
                let path: AnyKeyPath = (\StatsSample.counters).appending(path: counter)
                return StatsSample.keys.first { $0.value as AnyKeyPath == path }?.name ?? (counter == \.closedByReload ? "policy_reloaded tunnels_closed" : "?")
            }.joined(separator: ", ")
        }
        for code in CloseCode.allCases {
            // A close with a line counts in `closed` too (`Counters.count`).
            let counters = ((code.entry.level == nil ? [] : ["closed"]) + [counted(code.entry)]).filter { !$0.isEmpty }.joined(separator: ", ")
            text += "close \(code.rawValue): \(code.entry.level.map { "\($0)" } ?? "no line"); counted in: \(counters)\n"
        }
        for reason in TunnelReason.allCases { text += "tunnel \(reason.rawValue): \(reason.entry.level.map { "\($0)" } ?? "no line"); counted in: \(counted(reason.entry))\n" }
        for outcome in ForwardOutcome.allCases { text += "forwarded \(outcome.rawValue): \(outcome.level)\n" }
        if ProcessInfo.processInfo.environment["PINPROXY_WRITE_FIXTURE"] == "1" {
            try text.write(to: fixture, atomically: true, encoding: .utf8)
            Issue.record("the fixture was rewritten: read its diff, then run again without PINPROXY_WRITE_FIXTURE")
        }
        let committed = try String(contentsOf: fixture, encoding: .utf8)
        let (got, want) = (text.split(separator: "\n", omittingEmptySubsequences: false), committed.split(separator: "\n", omittingEmptySubsequences: false))
        for (index, line) in got.enumerated() where index >= want.count || want[index] != line {
            Issue.record("line \(index + 1) differs from the fixture:\n  now: \(line)\n  was: \(index < want.count ? want[index] : "(none)")")
            break
        }
        #expect(got.count == want.count)
    }

    /// A reason's answer as its HTTP response carries it.
    @Test(arguments: codes)
    func theResponseSaysTheEntrysAnswer(_ code: Refusal.Code) {
        let entry = code.entry
        let head = String(decoding: Refusal(code, detail: "why").response(host: "h.example"), as: UTF8.self)
        guard code != .network(.tlsToProxy) && code != .network(.socksToProxy) else { return }
        #expect(head.hasPrefix("HTTP/1.1 \(entry.status) \(entry.phrase)\r\n"))
        #expect(head.contains("\r\nProxy-Status: pinproxy; error=\(entry.proxyStatus); details=\"\(code.rawValue)\"\r\n"))
        #expect(head.contains("\r\nRetry-After: 1\r\n") == (entry.status == 503))
    }

    /// Each reason that gets an HTTP answer has a row with its status, phrase and error type.
    @Test(arguments: codes)
    func theReferenceShowsWhatTheClientSees(_ code: Refusal.Code) throws {
        try #require(Self.clientRows.count > 20, "docs/logs.md has no \"What the client sees\" table")
        if code == .network(.tlsToProxy) || code == .network(.socksToProxy) {
            // Answered in the client's own protocol, never with HTTP.
            #expect(Self.clientRows.contains { $0[0].contains("TLS or SOCKS") && $0[1].hasPrefix("no HTTP") })
            return
        }
        let entry = code.entry
        // A code that shares its answer with another is told apart by its `details=` in the row.
        let sharing = Self.codes.filter { $0 != code && $0.entry.status == entry.status && $0.entry.phrase == entry.phrase }
        let named = Self.clientRows.contains { $0[2].contains("details=\"\(code.rawValue)\"") }
        #expect(Self.clientRows.contains { row in
            row[1].contains("\(entry.status) \(entry.phrase)") && row[2].contains("`\(entry.proxyStatus)`")
                && (!named || row[2].contains("details=\"\(code.rawValue)\""))
        }, "docs/logs.md shows no row with \(entry.status) \(entry.phrase) and `\(entry.proxyStatus)` for \(code.rawValue)")
        if !sharing.isEmpty && !named {
            // Then the situation column says which situations share it (e.g. "port not allowed").
            #expect(Self.clientRows.contains { $0[1].contains("\(entry.status) \(entry.phrase)") && $0[0].contains(Self.situationWords[code] ?? code.rawValue) },
                    "docs/logs.md's row for \(entry.status) \(entry.phrase) does not name \(code.rawValue)'s situation")
        }
    }

    /// Each status and phrase the reference shows is one pinproxy sends.
    @Test func everyAnswerInTheReferenceIsInTheTable() throws {
        // The parent proxy's 407, passed on in pinproxy's words (`UpstreamProxy`), is no reason's own.
        var sent: Set<String> = ["502 Parent Proxy Authentication Failed"]
        for code in Self.codes { sent.insert("\(code.entry.status) \(code.entry.phrase)") }
        let errorTypes = Set(Self.codes.map(\.entry.proxyStatus) + ["http_request_denied", "connection_timeout", "destination_unavailable"])
        let answer = try Regex(#"[1-5][0-9][0-9] [A-Z][A-Za-z]*(?: (?:[A-Z][A-Za-z]*|of|by))*"#)
        let pairs = Set(Self.codes.map { "\($0.entry.status) \($0.entry.phrase) `\($0.entry.proxyStatus)`" })
        var shown = 0
        for row in Self.clientRows {
            let answers = row[1].matches(of: answer).map { String(row[1][$0.range]) }
            shown += answers.count
            for shownAnswer in answers { #expect(sent.contains(shownAnswer), "docs/logs.md shows \(shownAnswer), which no reason sends") }
            let types = row[2].split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
                .filter { !$0.hasPrefix("details=") && !$0.hasPrefix("received-status=") }
            for type in types { #expect(errorTypes.contains(type), "docs/logs.md shows the Proxy-Status error \(type), which no reason sends") }
            // A row's `details="code"` names a code whose answer the row shows.
            for named in row[2].matches(of: try Regex(#"details="([a-z_]+)""#)) {
                let code = Self.codes.first { "details=\"\($0.rawValue)\"" == row[2][named.range] }
                #expect(code.map { answers.contains($0.answerLine) } == true, "docs/logs.md's row \(row[1]) names \(row[2][named.range])")
            }
            // "502 DNS Error / 504 DNS Timeout" with "`dns_error` / `dns_timeout`": each answer goes with its type.
            if answers.count == types.count {
                for (shownAnswer, type) in zip(answers, types) {
                    #expect(pairs.contains("\(shownAnswer) `\(type)`"), "docs/logs.md pairs \(shownAnswer) with `\(type)`, which no reason sends together")
                }
            }
        }
        #expect(shown >= Set(Self.codes.map { "\($0.entry.status) \($0.entry.phrase)" }).count)
    }

    /// A plain-HTTP request's hint is the CONNECT's unless the entry says otherwise.
    @Test func aPlainRequestsHintComesFromTheSameEntry() {
        let client = SocketAddress.parse("127.0.0.1:4000")!
        let record = DecisionRecord(conn: 1, client: client)
        for code in Self.codes {
            let plain = PlainLog.hint(for: Refusal(code, detail: ""), conn: 1, client: client)
            #expect(plain == code.entry.plainHint ?? code.entry.hint(record), "\(code.rawValue)")
        }
        #expect(Refusal.Code.network(.badRequest).entry.plainHint?.contains("http_proxy") == true)
    }

    /// A close line's level and counters come from its close code's entry, raised by what left the
    /// tunnel unverified, unless something was let through (then it says `bypass`, at info).
    @Test func aCloseLineTakesItsLevelAndCountersFromTheTable() {
        let record = DecisionRecord(conn: 1, client: SocketAddress.parse("127.0.0.1:4000")!)
        func closed(_ reason: CloseReason, _ stream: StreamSummary?) -> SessionEnd {
            .closed(reason, ClosedTunnel(record: record, bytesUp: 0, bytesDown: 0, duration: .zero, stream: stream, relay: nil))
        }
        var mirrorless = StreamSummary(verifiedBy: .probeOnly)
        mirrorless.unverified = .init(reason: .mirrorUnavailable, detail: "the mirror's connect failed")
        var overlooked = mirrorless
        overlooked.overlooked = .init(reason: .sniMismatch, detail: "d", basis: .reportMode)
        let cases: [(SessionEnd, level: Logger.Level, counted: [WritableKeyPath<Counters, Int>], reason: String?)] = [
            (closed(.relay(.finished), nil), .info, [\.closed], nil),
            (closed(.relay(.noClientHello), nil), .info, [\.closed, \.withoutClientHello], nil),
            (closed(.reclaimed, nil), .info, [\.closed, \.withoutClientHello], nil),
            (closed(.policyReload(.chainUnparsable), nil), .warning, [\.closed, \.closedByReload], "unverified_chain"),
            (closed(.relay(.idle), mirrorless), .warning, [\.closed, \.mirrorsUnavailable], "mirror_unavailable"),
            (closed(.relay(.idle), overlooked), .info, [\.closed], nil),
        ]
        for (end, level, counted, reason) in cases {
            #expect(SessionLog.level(of: end) == level, "\(end)")
            let line = SessionLog.end(end)
            #expect(line.level == level)
            #expect(line["reason"]?.json == reason.map { "\"\($0)\"" }, "\(end)")
            var counters = Counters()
            counters.count(end)
            var expected = Counters()
            for counter in counted { expected[keyPath: counter] += 1 }
            #expect(counters == expected, "\(end)")
        }
    }

    /// Every counter an entry names is a `stats` key and a `/metrics` series (but the one the
    /// reload line's count of tunnels it closed is taken from).
    @Test func everyCounterAnEntryNamesIsReported() {
        let entries = CloseCode.allCases.map(\.entry) + TunnelReason.allCases.map(\.entry)
        let statsKeys = StatsSample.keys.map { $0.value as AnyKeyPath }
        let series = MetricsText.statsFamilies.flatMap { $0.samples.map { $0.value as AnyKeyPath } }
        for counter in entries.flatMap(\.counters) where counter != \.closedByReload {
            let path: AnyKeyPath = (\StatsSample.counters).appending(path: counter)
            #expect(statsKeys.contains(path), "\(counter) is no stats key")
            #expect(series.contains(path), "\(counter) is no metrics series")
        }
    }
}
