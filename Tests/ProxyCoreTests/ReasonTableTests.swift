import Foundation
import Logging
import PinPolicy
import TestSupport
import Testing
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
        #expect(Self.clientRows.contains { $0[1].contains("\(entry.status) \(entry.phrase)") && $0[2].contains("`\(entry.proxyStatus)`") },
                "docs/logs.md shows no row with \(entry.status) \(entry.phrase) and `\(entry.proxyStatus)` for \(code.rawValue)")
    }

    /// Each status and phrase the reference shows is one pinproxy sends.
    @Test func everyAnswerInTheReferenceIsInTheTable() throws {
        // The parent proxy's 407, passed on in pinproxy's words (`UpstreamProxy`), is no reason's own.
        var sent: Set<String> = ["502 Parent Proxy Authentication Failed"]
        for code in Self.codes { sent.insert("\(code.entry.status) \(code.entry.phrase)") }
        let errorTypes = Set(Self.codes.map(\.entry.proxyStatus) + ["http_request_denied", "connection_timeout", "destination_unavailable"])
        let answer = try Regex(#"[1-5][0-9][0-9] [A-Z][A-Za-z]*(?: (?:[A-Z][A-Za-z]*|of|by))*"#)
        var shown = 0
        for row in Self.clientRows {
            for match in row[1].matches(of: answer) {
                shown += 1
                #expect(sent.contains(String(row[1][match.range])), "docs/logs.md shows \(row[1][match.range]), which no reason sends")
            }
            for word in row[2].split(separator: "`", omittingEmptySubsequences: false).enumerated().filter({ $0.offset % 2 == 1 }).map({ String($0.element) })
            where !word.hasPrefix("details=") && !word.hasPrefix("received-status=") {
                #expect(errorTypes.contains(word), "docs/logs.md shows the Proxy-Status error \(word), which no reason sends")
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
