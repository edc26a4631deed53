import Testing
@testable import ProxyCore

/// The relay's bookkeeping without a socket: backpressure, half-close and the end.
@Suite struct RelayBookTests {
    let max = RelayBook.maxQueued

    @Test func readingStopsAtTheHighMarkAndResumesAtHalf() {
        var book = RelayBook()
        #expect(book.moved(4096, from: .upstream, queuedAtOther: max - 1).isEmpty)
        #expect(book.moved(4096, from: .upstream, queuedAtOther: max) == [.pauseReading(.upstream)])
        #expect(book.moved(4096, from: .upstream, queuedAtOther: max + 4096).isEmpty)  // already paused
        #expect(book.drained(.client, queued: max / 2 + 1).isEmpty)
        #expect(book.drained(.client, queued: max / 2) == [.resumeReading(.upstream)])
        #expect(book.upstream.bytes == 3 * 4096 && book.client.bytes == 0)
    }

    /// A request/response protocol: the client sends and half-closes, the server answers and
    /// closes; each EOF is passed on once everything before it has been written.
    @Test func eachEOFIsPassedOnOnceItsBytesAreWrittenThenTheTunnelIsOver() {
        var book = RelayBook()
        _ = book.moved(100, from: .client, queuedAtOther: 100)
        #expect(book.sentEOF(.client, queuedAtOther: 100).isEmpty)  // 100 bytes still to write upstream
        #expect(book.drained(.upstream, queued: 0) == [.shutDownWrite(.upstream)])
        _ = book.moved(5000, from: .upstream, queuedAtOther: 5000)
        #expect(book.sentEOF(.upstream, queuedAtOther: 5000).isEmpty)
        #expect(book.drained(.client, queued: 0) == [.shutDownWrite(.client), .finished])
    }

    @Test func anEOFWithNothingQueuedShutsDownAtOnce() {
        var book = RelayBook()
        #expect(book.sentEOF(.upstream, queuedAtOther: 0) == [.shutDownWrite(.client)])
        #expect(book.sentEOF(.client, queuedAtOther: 0) == [.shutDownWrite(.upstream), .finished])
    }

    /// A side that has sent EOF is not read again, even when its partner drains.
    @Test func aFinishedSideIsNotResumed() {
        var book = RelayBook()
        _ = book.moved(max, from: .upstream, queuedAtOther: max)
        _ = book.sentEOF(.upstream, queuedAtOther: max)
        #expect(book.drained(.client, queued: 0) == [.shutDownWrite(.client)])
    }
}
