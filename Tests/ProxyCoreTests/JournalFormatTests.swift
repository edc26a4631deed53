import Foundation
import Logging
import Testing
import TestSupport
@testable import ProxyCore

/// The journal's encoding of a record, the key order of lines, and when `stats` is written.
@Suite struct JournalFormatTests {
    @Test func aRefusalBecomesPriorityMessageAndPrefixedFields() {
        let record = LogRecord(.warning, "tunnel_refused", [
            ("host", .string("api.example.com")), ("port", .int(443)), ("reason", .string("pin_mismatch")),
            ("would_refuse", .bool(true)),
            ("chain", .objects([[("position", .int(0)), ("spki", .string("spki-sha256:AA=="))]])),
        ])
        #expect(record.journalFields.map { "\($0.0)=\($0.1)" } == [
            "PRIORITY=4", "SYSLOG_IDENTIFIER=pinproxy", "MESSAGE=tunnel_refused api.example.com:443: pin_mismatch",
            "PINPROXY_EVENT=tunnel_refused", "PINPROXY_HOST=api.example.com", "PINPROXY_PORT=443", "PINPROXY_REASON=pin_mismatch",
            "PINPROXY_WOULD_REFUSE=true", "PINPROXY_CHAIN_0_POSITION=0", "PINPROXY_CHAIN_0_SPKI=spki-sha256:AA==",
        ])
    }

    @Test(arguments: [(Logger.Level.critical, 2), (.error, 3), (.warning, 4), (.notice, 5), (.info, 6), (.debug, 7), (.trace, 7)])
    func levelsMapToSyslogPriorities(level: Logger.Level, priority: Int) {
        #expect(Journal.priority(level) == priority)
    }

    @Test func theMessageIsShortAndFallsBackToTheDetail() {
        #expect(LogRecord(.info, "stats", [("accepted", .int(3))]).journalMessage == "stats")
        #expect(LogRecord(.error, "start_failed", [("detail", .string("cannot listen"))]).journalMessage == "start_failed: cannot listen")
        #expect(LogRecord(.info, "tunnel_closed", [("host", .string("2001:db8::1")), ("port", .int(8443))]).journalMessage == "tunnel_closed [2001:db8::1]:8443")
    }

    /// A value with a newline (a host or subject from the network) takes the protocol's binary form:
    /// name, newline, 64-bit little-endian length, the bytes, newline.
    @Test func aValueWithANewlineIsLengthPrefixed() {
        let datagram = LogRecord(.info, "x", [("detail", .string("a\nb"))]).journalDatagram()
        let text = "PRIORITY=6\nSYSLOG_IDENTIFIER=pinproxy\n"
        #expect(Array(datagram.prefix(text.utf8.count)) == Array(text.utf8))
        let tail: [UInt8] = Array("PINPROXY_DETAIL\n".utf8) + [3, 0, 0, 0, 0, 0, 0, 0] + Array("a\nb\n".utf8)
        #expect(Array(datagram.suffix(tail.count)) == tail)
        // The MESSAGE repeats the detail, so it takes the binary form too.
        let message: [UInt8] = Array("MESSAGE\n".utf8) + [6, 0, 0, 0, 0, 0, 0, 0] + Array("x: a\nb\n".utf8)
        #expect(datagram.count == text.utf8.count + message.count + "PINPROXY_EVENT=x\n".utf8.count + tail.count)
    }

    @Test func stderrIsTheJournalOnlyWhenDeviceAndInodeMatch() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]); close(fds[1]) }
        var facts = stat()
        fstat(fds[1], &facts)
        #expect(Journal.stderrIsJournal(environment: ["JOURNAL_STREAM": "\(facts.st_dev):\(facts.st_ino)"], fd: fds[1]))
        #expect(!Journal.stderrIsJournal(environment: ["JOURNAL_STREAM": "\(facts.st_dev):\(facts.st_ino + 1)"], fd: fds[1]))
        #expect(!Journal.stderrIsJournal(environment: ["JOURNAL_STREAM": "garbage"], fd: fds[1]))
        #expect(!Journal.stderrIsJournal(environment: [:], fd: fds[1]))
    }

    /// `ts level event host port reason verdict hint …`, whatever order the fields were made in,
    /// with the expected pins and the chain last.
    @Test func linesLeadWithTargetReasonVerdictAndHint() {
        let made = LogRecord(.warning, "tunnel_refused", [
            ("chain", .objects([[("position", .int(0))]])), ("expected", .objects([[("pin", .string("p"))]])), ("conn", .int(1)),
            ("hint", .string("h")), ("detail", .string("d")), ("verdict", .string("refused")), ("reason", .string("pin_mismatch")),
            ("port", .int(443)), ("host", .string("a.test")), ("chain_verified", .bool(true)),
        ])
        let line = LogRecord(level: .warning, event: "tunnel_refused", metadata: made.metadata).text(at: Date(timeIntervalSince1970: 0))
        #expect(line == "ts=1970-01-01T00:00:00.000Z level=warning event=tunnel_refused host=a.test port=443 reason=pin_mismatch verdict=refused hint=h conn=1 detail=d chain_verified=true expected.0.pin=p chain.0.position=0")
    }

    @Test func statsAreLoggedFirstThenOnlyWhenACounterMovedOrHourly() {
        var gate = StatsGate()
        let start = ContinuousClock.now
        let idle: [(String, LogValue)] = [("accepted", .int(0)), ("bytes_up", .int(0))]
        let busy: [(String, LogValue)] = [("accepted", .int(1)), ("bytes_up", .int(0))]
        func tick(_ fields: [(String, LogValue)], _ seconds: Int) -> Bool { gate.shouldLog(fields, at: start + .seconds(seconds)) }
        #expect(tick(idle, 0))                         // the baseline after start
        #expect(!tick(idle, 60))
        #expect(!tick(idle, 3599))
        #expect(tick(idle, 3600))        // an hour after the last line
        #expect(tick(busy, 3660))        // a counter moved
        #expect(!tick(busy, 3720))
        #expect(tick(idle, 3780))        // moved back is a move too
    }

    /// The journal behind the same bounded queue as a pipe: a journald that does not take entries
    /// blocks the writer's thread only; entries beyond the bound are dropped, counted, and reported
    /// in their place as one `log_lines_dropped` entry once journald reads again.
    @Test func aJournalThatStallsCostsDroppedEntriesCountedAndReported() throws {
        let path = try temporaryDirectory() + "/journal"
        let journal = try JournalListener(path: path)
        let socket = try #require(JournalSocket(path: path))
        let writer = LogWriter(destination: .journal(socket), capacity: 2000)
        let sent = 500
        for n in 1...sent { writer.enqueue(LogRecord(.info, "test_line", [("n", .int(n))]).journalDatagram()) }
        let dropped = writer.counts.dropped
        #expect(dropped > 0)
        // Each gap is reported before the next entry that got through; read until every drop is.
        func reported(_ entries: [[String: String]]) -> Int {
            entries.filter { $0["PINPROXY_EVENT"] == "log_lines_dropped" }.compactMap { $0["PINPROXY_DROPPED"].flatMap(Int.init) }.reduce(0, +)
        }
        let deadline = Date().addingTimeInterval(10)
        var entries = journal.entries(waiting: 0.2)
        while reported(entries) < dropped && Date() < deadline { entries = journal.entries(waiting: 0.2) }
        #expect(reported(entries) == dropped)
        #expect(entries.filter { $0["PINPROXY_EVENT"] == "log_lines_dropped" }.allSatisfy { $0["PRIORITY"] == "4" })
        let lines = entries.filter { $0["PINPROXY_EVENT"] == "test_line" }.compactMap { $0["PINPROXY_N"].flatMap(Int.init) }
        #expect(lines.count + dropped == sent)
        #expect(lines == lines.sorted() && lines.first == 1)
    }

    /// No journald (nothing listens at the socket): each entry is a drop, counted, never a hang.
    @Test func noJournaldCostsEntriesNotTheProcess() throws {
        let socket = try #require(JournalSocket(path: try temporaryDirectory() + "/nobody"))
        let writer = LogWriter(destination: .journal(socket), capacity: 1 << 20)
        for n in 1...3 { writer.enqueue(LogRecord(.info, "test_line", [("n", .int(n))]).journalDatagram()) }
        #expect(writer.flush(timeout: 5))
        #expect(writer.counts.dropped == 3)
    }
}
