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

    /// The fast relay's limit of 1: reading stops as soon as anything waits, and resumes only once
    /// the other side has taken all of it.
    @Test func withALimitOfOneAnythingQueuedPausesUntilAllIsWritten() {
        var book = RelayBook()
        #expect(book.moved(10, from: .client, queuedAtOther: 0, limit: 1).isEmpty)
        #expect(book.moved(10, from: .client, queuedAtOther: 1, limit: 1) == [.pauseReading(.client)])
        #expect(book.drained(.upstream, queued: 1, limit: 1).isEmpty)
        #expect(book.drained(.upstream, queued: 0, limit: 1) == [.resumeReading(.client)])
        #expect(book.client.bytes == 20 && !book.client.readPaused)
    }

    /// Draining again after a side was shut down does not shut it down twice.
    @Test func aSideIsShutDownOnlyOnce() {
        var book = RelayBook()
        #expect(book.sentEOF(.client, queuedAtOther: 0) == [.shutDownWrite(.upstream)])
        #expect(book.drained(.upstream, queued: 0).isEmpty)
        #expect(book.sentEOF(.upstream, queuedAtOther: 0) == [.shutDownWrite(.client), .finished])
        #expect(!book.drained(.client, queued: 0).contains(.shutDownWrite(.client)))
        #expect(book.upstream.shutDown && book.client.shutDown)
    }

    /// A partly drained queue below the resume mark resumes reading but passes no EOF on yet.
    @Test func anEOFWaitsForTheLastQueuedByteEvenAfterReadingResumes() {
        var book = RelayBook()
        _ = book.moved(max, from: .client, queuedAtOther: max)
        // The client is paused, so its EOF is not read until it resumes; the upstream's arrives.
        #expect(book.sentEOF(.upstream, queuedAtOther: 0) == [.shutDownWrite(.client)])
        #expect(book.drained(.upstream, queued: max / 4) == [.resumeReading(.client)])
        #expect(book.sentEOF(.client, queuedAtOther: max / 4).isEmpty)
        #expect(book.drained(.upstream, queued: 0) == [.shutDownWrite(.upstream), .finished])
    }

    /// The relay may change hands (bufferevents to the fast relay) only while both ways are open.
    @Test func openBothWaysUntilTheFirstEOF() {
        var book = RelayBook()
        _ = book.moved(100, from: .client, queuedAtOther: 0)
        _ = book.moved(100, from: .upstream, queuedAtOther: 0)
        #expect(book.isOpenBothWays)
        _ = book.sentEOF(.upstream, queuedAtOther: 10)
        #expect(!book.isOpenBothWays)
    }
}
