import Foundation
import Testing
import TLSInspection
@testable import ProxyCore

/// The key log as pinproxy parses it: only the server secrets of watched randoms are kept, every
/// other line is dropped (and counted) as it is read; lines are bounded and may arrive in pieces.
@Suite struct KeyLogBookTests {
    let t0 = ContinuousClock.now
    static let random = [UInt8](repeating: 0xab, count: 32)
    static let other = [UInt8](repeating: 0xcd, count: 32)
    static let secretA = [UInt8](repeating: 0x11, count: 32)
    static let secretB = [UInt8](repeating: 0x22, count: 32)
    static let secret384 = [UInt8](repeating: 0x33, count: 48)

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }
    static func line(_ label: String, _ random: [UInt8], _ secret: [UInt8]) -> String { "\(label) \(hex(random)) \(hex(secret))\n" }

    /// What a watch received, as plain values.
    enum Got: Equatable {
        case handshake([UInt8]), traffic0([UInt8]), conflict(String)
    }

    final class Recorder {
        var got: [Got] = []
        func take(_ delivery: KeyLogDelivery) {
            switch delivery {
            case .secret(.serverHandshake(let s)): got.append(.handshake(s.withUnsafeBytes { Array($0) }))
            case .secret(.serverTraffic0(let s)): got.append(.traffic0(s.withUnsafeBytes { Array($0) }))
            case .conflict(let label): got.append(.conflict(label))
            }
        }
    }

    func feed(_ book: KeyLogBook, _ text: String) {
        Array(text.utf8).withUnsafeBytes { book.consume($0, now: t0) }
    }

    @Test func theServerSecretsOfAWatchedRandomAreDelivered() {
        let book = KeyLogBook(capacity: 8)
        let recorder = Recorder()
        _ = book.watch(clientRandom: Self.random, now: t0, recorder.take)
        feed(book, Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.random, Self.secretA)
            + Self.line("SERVER_TRAFFIC_SECRET_0", Self.random, Self.secret384))
        #expect(recorder.got == [.handshake(Self.secretA), .traffic0(Self.secret384)])
        #expect(book.counters == KeyLogBook.Counters(lines: 2, kept: 2))
    }

    @Test func clientSecretsAreNeverKeptEvenForAWatchedRandom() {
        let book = KeyLogBook(capacity: 8)
        let recorder = Recorder()
        _ = book.watch(clientRandom: Self.random, now: t0, recorder.take)
        for label in ["CLIENT_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0", "CLIENT_RANDOM", "EXPORTER_SECRET", "CLIENT_EARLY_TRAFFIC_SECRET"] {
            feed(book, Self.line(label, Self.random, Self.secretA))
        }
        #expect(recorder.got.isEmpty)
        #expect(book.counters == KeyLogBook.Counters(lines: 5, dropped: 5))
    }

    @Test func linesOfUnwatchedRandomsAreDroppedAndCounted() {
        let book = KeyLogBook(capacity: 8)
        let recorder = Recorder()
        _ = book.watch(clientRandom: Self.random, now: t0, recorder.take)
        feed(book, String(repeating: Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.other, Self.secretA), count: 100))
        #expect(recorder.got.isEmpty)
        #expect(book.counters == KeyLogBook.Counters(lines: 100, dropped: 100))
    }

    @Test func aSecondDifferentSecretForTheSameRandomAndLabelIsAConflict() {
        let book = KeyLogBook(capacity: 8)
        let recorder = Recorder()
        _ = book.watch(clientRandom: Self.random, now: t0, recorder.take)
        feed(book, Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.random, Self.secretA))
        feed(book, Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.random, Self.secretA))  // a repeat: no news
        feed(book, Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.random, Self.secretB))
        #expect(recorder.got == [.handshake(Self.secretA), .conflict("SERVER_HANDSHAKE_TRAFFIC_SECRET")])
        #expect(book.counters == KeyLogBook.Counters(lines: 3, kept: 2, dropped: 1))
    }

    @Test(arguments: [
        "garbage", "SERVER_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET abcd 1122",
        "server_handshake_traffic_secret \(hex(random)) \(hex(secretA))",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET \(hex(random)) \(hex(secretA)) extra",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET  \(hex(random)) \(hex(secretA))",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET \(hex(random)) \(hex(secretA))zz",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET \(hex(random)) \(hex([UInt8](repeating: 1, count: 20)))",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET \(hex(random).dropLast(2)) \(hex(secretA))",
    ])
    func malformedLinesAreCountedNeverDelivered(_ text: String) {
        let book = KeyLogBook(capacity: 8)
        let recorder = Recorder()
        _ = book.watch(clientRandom: Self.random, now: t0, recorder.take)
        feed(book, text + "\n")
        #expect(recorder.got.isEmpty)
        #expect(book.counters == KeyLogBook.Counters(lines: 1, unparsable: 1))
    }

    @Test func commentsBlankLinesAndCRLFAreTolerated() {
        let book = KeyLogBook(capacity: 8)
        let recorder = Recorder()
        _ = book.watch(clientRandom: Self.random, now: t0, recorder.take)
        feed(book, "# SSL/TLS secrets log file, generated by NSS\n\n" + Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.random, Self.secretA).dropLast() + "\r\n")
        #expect(recorder.got == [.handshake(Self.secretA)])
        #expect(book.counters == KeyLogBook.Counters(lines: 2, kept: 1, dropped: 1))
    }

    /// A line cut at any byte across two reads is the same line.
    @Test func aLineSplitAcrossReadsAtEveryByteIsReassembled() {
        let text = Array(Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.random, Self.secretA).utf8)
        for cut in 0...text.count {
            let book = KeyLogBook(capacity: 8)
            let recorder = Recorder()
            _ = book.watch(clientRandom: Self.random, now: t0, recorder.take)
            Array(text[..<cut]).withUnsafeBytes { book.consume($0, now: t0) }
            Array(text[cut...]).withUnsafeBytes { book.consume($0, now: t0) }
            #expect(recorder.got == [.handshake(Self.secretA)], "cut at \(cut)")
        }
    }

    /// Longer than the limit, whole or in pieces: dropped unread, and the next line is read again.
    @Test func anOverlongLineIsDroppedAndTheNextLineStillCounts() {
        let book = KeyLogBook(capacity: 8)
        let recorder = Recorder()
        _ = book.watch(clientRandom: Self.random, now: t0, recorder.take)
        let long = "SERVER_HANDSHAKE_TRAFFIC_SECRET \(Self.hex(Self.random)) " + String(repeating: "11", count: 400) + "\n"
        feed(book, long)
        for chunk in stride(from: 0, to: long.utf8.count, by: 100) {
            feed(book, String(decoding: Array(long.utf8)[chunk..<min(chunk + 100, long.utf8.count)], as: UTF8.self))
        }
        feed(book, Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.random, Self.secretA))
        #expect(recorder.got == [.handshake(Self.secretA)])
        #expect(book.counters == KeyLogBook.Counters(lines: 3, kept: 1, tooLong: 2))
    }

    @Test func theTableIsCappedAndAFullTableGivesAnInertWatch() {
        let book = KeyLogBook(capacity: 2)
        #expect(book.watch(clientRandom: Self.random, now: t0) { _ in } != nil)
        #expect(book.watch(clientRandom: Self.other, now: t0) { _ in } != nil)
        #expect(book.watch(clientRandom: [UInt8](repeating: 7, count: 32), now: t0) { _ in } == nil)
        #expect(book.watch(clientRandom: [1, 2, 3], now: t0) { _ in } == nil)  // not a client random
        #expect(book.watchCount == 2 && book.counters.watchesRefused == 2)
    }

    @Test func aWatchExpiresAfterItsTTLAndACancelledOneGetsNothing() {
        let book = KeyLogBook(capacity: 2, ttl: .seconds(60))
        let expiring = Recorder(), cancelled = Recorder()
        _ = book.watch(clientRandom: Self.random, now: t0, expiring.take)
        let id = book.watch(clientRandom: Self.other, now: t0, cancelled.take)!
        book.cancel(id: id, clientRandom: Self.other)
        #expect(book.watchCount == 1)
        Array(Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.random, Self.secretA).utf8).withUnsafeBytes {
            book.consume($0, now: t0 + .seconds(61))
        }
        Array(Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.other, Self.secretA).utf8).withUnsafeBytes {
            book.consume($0, now: t0 + .seconds(61))
        }
        #expect(expiring.got.isEmpty && cancelled.got.isEmpty)
        #expect(book.watchCount == 0 && book.counters.dropped == 2)
        // The room is free again.
        #expect(book.watch(clientRandom: Self.random, now: t0 + .seconds(61)) { _ in } != nil)
    }

    /// Two tunnels that present the same ClientHello random (a replay) both hear its lines.
    @Test func everyWatchOfARandomHearsItsLines() {
        let book = KeyLogBook(capacity: 4)
        let first = Recorder(), second = Recorder()
        _ = book.watch(clientRandom: Self.random, now: t0, first.take)
        _ = book.watch(clientRandom: Self.random, now: t0, second.take)
        feed(book, Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.random, Self.secretA))
        #expect(first.got == [.handshake(Self.secretA)] && second.got == first.got)
    }

    /// A watch may cancel itself from its callback (the tunnel got what it waited for).
    @Test func aWatchMayCancelItselfWhileBeingDelivered() {
        let book = KeyLogBook(capacity: 4)
        let recorder = Recorder()
        var id: Int?
        id = book.watch(clientRandom: Self.random, now: t0) { delivery in
            recorder.take(delivery)
            book.cancel(id: id!, clientRandom: Self.random)
        }
        feed(book, Self.line("SERVER_HANDSHAKE_TRAFFIC_SECRET", Self.random, Self.secretA) + Self.line("SERVER_TRAFFIC_SECRET_0", Self.random, Self.secretB))
        #expect(recorder.got == [.handshake(Self.secretA)] && book.watchCount == 0)
    }

    @Test func aSecretNeverShowsInItsDescription() {
        let secret = Self.secretA.withUnsafeBytes { SecretBytes(copying: $0) }
        #expect("\(secret)" == "SecretBytes(32 bytes)")
        #expect("\(KeyLogDelivery.secret(.serverHandshake(secret)))".contains("1111") == false)
    }

    /// What a flood needs from the book: where the oldest watch began, the randoms in both cases of
    /// hex, and offsets forgotten when the file is emptied or replaced.
    @Test func theOldestWatchAndTheWatchedHexAreKnown() {
        let book = KeyLogBook(capacity: 8)
        #expect(book.oldestStart == nil && book.watchedHex.isEmpty)
        let late = book.watch(clientRandom: Self.random, now: t0, from: 5000) { _ in }
        let early = book.watch(clientRandom: Self.other, now: t0, from: 1200) { _ in }
        #expect(book.oldestStart == 1200)
        #expect(Set(book.watchedHex.map { String(decoding: $0, as: UTF8.self) })
                == [Self.hex(Self.random), Self.hex(Self.random).uppercased(), Self.hex(Self.other), Self.hex(Self.other).uppercased()])
        book.cancel(id: early!, clientRandom: Self.other)
        #expect(book.oldestStart == 5000)
        book.rebase()
        #expect(book.oldestStart == 0)
        book.cancel(id: late!, clientRandom: Self.random)
        #expect(book.oldestStart == nil)
        book.noteSkipped(100)
        #expect(book.counters.skippedBytes == 100)
    }
}

/// The flood gauge without I/O: the writers' rate, the file's size a moment ago, and its line's pace.
@Suite struct KeyLogFloodTests {
    @Test func theRateIsMeasuredFromTheFloodsStartAndTheLineIsPaced() throws {
        let t0 = ContinuousClock.now
        var flood = KeyLogFlood()
        flood.observe(size: 0, at: t0)
        flood.observe(size: 50 << 20, at: t0 + .milliseconds(100))
        let report1 = flood.report(at: t0 + .milliseconds(100), watches: 0, path: "/k")
        #expect(report1.map(\.event) == nil)  // the flood's first pass
        flood.skipped(7)
        flood.observe(size: 150 << 20, at: t0 + .milliseconds(300))
        let report2 = flood.report(at: t0 + .milliseconds(300), watches: 0, path: "/k")
        #expect(report2.map(\.event) == nil)  // not half a second yet
        flood.observe(size: 250 << 20, at: t0 + .milliseconds(600))
        let reported = flood.report(at: t0 + .milliseconds(600), watches: 2, path: "/k")
        let line = try #require(reported)
        #expect(line.event == "keylog_flooded" && line.level == .warning)
        #expect(line["bytes_per_s"]?.json == "\(400 << 20)" && line["skipped_bytes"]?.json == "7" && line["watches"]?.json == "2")
        #expect(line["keylog"]?.json == "\"/k\"")
        flood.observe(size: 300 << 20, at: t0 + .seconds(5))
        let report3 = flood.report(at: t0 + .seconds(5), watches: 0, path: "/k")
        #expect(report3.map(\.event) == nil)  // once every 10 s
        // A new flood a minute later: its rate is measured from its own start, not from the old line.
        flood.observe(size: 400 << 20, at: t0 + .seconds(60))
        let again = flood.report(at: t0 + .seconds(60), watches: 0, path: "/k")
        #expect(again.map(\.event) == nil)
        flood.observe(size: 500 << 20, at: t0 + .seconds(61))
        let second = flood.report(at: t0 + .seconds(61), watches: 0, path: "/k")
        #expect(second?["bytes_per_s"]?.json == "\(100 << 20)")
        #expect(flood.size(before: t0 + .milliseconds(350)) == 150 << 20)
        #expect(flood.size(before: t0 - .seconds(1)) == nil)
        flood.restart()
        #expect(flood.size(before: t0 + .milliseconds(350)) == 0)
    }
}
