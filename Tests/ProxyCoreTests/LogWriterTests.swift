import Foundation
import Testing
@testable import ProxyCore

/// The log writer's bookkeeping over a real pipe, without sockets: a reader that stops reading
/// costs dropped lines, counted exactly and reported in their place, and never a blocked caller.
@Suite struct LogWriterTests {
    /// A pipe whose buffer the test has filled, so the writer's first `write(2)` blocks until the
    /// test reads. Both ends close when the value is dropped.
    final class StalledPipe {
        let readEnd: Int32
        let writeEnd: Int32
        /// How many filler bytes the test wrote: 4 KiB chunks of `#` ending in a newline.
        private(set) var fillerBytes = 0

        init() throws {
            var fds: [Int32] = [0, 0]
            guard pipe(&fds) == 0 else { throw POSIXError(.init(rawValue: errno) ?? .EIO) }
            (readEnd, writeEnd) = (fds[0], fds[1])
            // Chunks of PIPE_BUF are written whole or not at all, so the pipe ends full of whole lines.
            let chunk = Array(repeating: UInt8(ascii: "#"), count: 4095) + [UInt8(ascii: "\n")]
            let flags = fcntl(writeEnd, F_GETFL)
            _ = fcntl(writeEnd, F_SETFL, flags | O_NONBLOCK)
            for _ in 0..<1024 {  // 4 MiB: far beyond any pipe size, so the loop ends at EAGAIN
                guard chunk.withUnsafeBytes({ write(writeEnd, $0.baseAddress, $0.count) }) == chunk.count else { break }
                fillerBytes += chunk.count
            }
            _ = fcntl(writeEnd, F_SETFL, flags)  // the writer gets a blocking pipe, as stderr would be
        }

        /// Reads (bounded by `timeout` and 1 MiB) until a line containing `marker` has arrived
        /// whole, and returns the lines after the filler.
        func read(until marker: String, timeout: Double = 10) -> [String] {
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 65536)
            let deadline = Date().addingTimeInterval(timeout)
            while Date() < deadline && received.count < 1 << 20 {
                let lines = String(decoding: received, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
                if lines.dropLast().contains(where: { $0.contains(marker) }) { break }
                var ready = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
                guard poll(&ready, 1, 100) > 0 else { continue }
                let n = Glibc.read(readEnd, &buffer, buffer.count)
                if n <= 0 { break }
                received += buffer[0..<n]
            }
            let text = String(decoding: received.dropFirst(fillerBytes), as: UTF8.self)
            #expect(received.prefix(fillerBytes).allSatisfy { $0 == UInt8(ascii: "#") || $0 == UInt8(ascii: "\n") })
            return text.split(separator: "\n").map(String.init)
        }

        deinit {
            close(readEnd)
            close(writeEnd)
        }
    }

    /// A 100-byte line (newline included) that names its number.
    static func line(_ number: Int) -> [UInt8] {
        let head = "event=test_line n=\(number) "
        return Array((head + String(repeating: "x", count: 99 - head.utf8.count) + "\n").utf8)
    }

    /// Ten 100-byte lines fill a 1000-byte queue while the reader stalls; the next fifteen are
    /// dropped and counted; a flush gives up at its timeout; once the reader drains the pipe, the ten
    /// arrive in order followed by one `log_lines_dropped dropped=15` line in the sink's format.
    @Test(arguments: [LogFormatChoice.text, .json])
    func linesBeyondTheBoundAreDroppedCountedAndReportedOnceThePipeDrains(format: LogFormatChoice) throws {
        let pipe = try StalledPipe()
        let writer = LogWriter(fd: pipe.writeEnd, format: format, capacity: 1000)
        for number in 1...25 { writer.enqueue(Self.line(number)) }
        #expect(writer.counts == (dropped: 15, queuedBytes: 1000))

        let start = ContinuousClock.now
        #expect(writer.flush(timeout: 0.2) == false)  // the reader never read: the flush gives up
        let waited = ContinuousClock.now - start
        // Not before its timeout (how long after is the machine's business: the call returning at
        // all is what shows it gave up).
        #expect(waited >= .milliseconds(190), "\(waited)")

        let lines = pipe.read(until: "log_lines_dropped")
        #expect(writer.flush(timeout: 5))
        #expect(writer.counts == (dropped: 15, queuedBytes: 0))
        try #require(lines.count == 11, "\(lines)")
        #expect(Array(lines.prefix(10)) == (1...10).map { String(decoding: Self.line($0).dropLast(), as: UTF8.self) })
        let report = lines[10]
        switch format {
        case .text:
            #expect(report.hasPrefix("ts=") && report.hasSuffix(" level=warning event=log_lines_dropped dropped=15"), "\(report)")
        case .json:
            #expect(report.hasPrefix("{\"ts\":") && report.hasSuffix(",\"level\":\"warning\",\"event\":\"log_lines_dropped\",\"dropped\":15}"), "\(report)")
        }
    }

    /// The drop count starts again after a report: a second stall reports only its own drops.
    @Test func eachReportCountsTheDropsSinceThePreviousOne() throws {
        let pipe = try StalledPipe()
        let writer = LogWriter(fd: pipe.writeEnd, format: .text, capacity: 200)
        for number in 1...5 { writer.enqueue(Self.line(number)) }  // 2 queued, 3 dropped
        let first = pipe.read(until: "log_lines_dropped")
        #expect(first.last?.hasSuffix("event=log_lines_dropped dropped=3") == true, "\(first)")
        #expect(writer.flush(timeout: 5))
        writer.enqueue(Self.line(6))
        #expect(writer.flush(timeout: 5))
        var buffer = [UInt8](repeating: 0, count: 4096)
        let n = read(pipe.readEnd, &buffer, buffer.count)
        #expect(n == 100 && Array(buffer.prefix(100)) == Self.line(6))
        #expect(writer.counts == (dropped: 3, queuedBytes: 0))
    }

    /// With the reader gone (EPIPE) or no stderr at all (EBADF) every line is dropped and counted;
    /// nothing crashes (SIGPIPE included) and a flush returns at once.
    @Test func aGoneReaderOrAClosedDescriptorCostsLinesNotTheProcess() throws {
        var fds: [Int32] = [0, 0]
        try #require(pipe(&fds) == 0)
        close(fds[0])
        // The write end stays open for good. A writer lives as long as the process, and this one
        // tries its drop report again whenever it wakes (it never gets out): closed, the number
        // would go to the next descriptor opened, and another test's pipe got a `dropped=3` line.
        for fd in [fds[1], -1] {
            let writer = LogWriter(fd: fd, format: .text, capacity: 1000)
            for number in 1...3 { writer.enqueue(Self.line(number)) }
            #expect(writer.flush(timeout: 5))
            #expect(writer.counts == (dropped: 3, queuedBytes: 0), "fd \(fd)")
        }
    }
}
