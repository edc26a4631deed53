import Foundation
import PinPolicy
import Testing
@testable import ProxyCore

/// The intake on a real file in /dev/shm (tmpfs) and a real event loop: a line a client appends
/// reaches the watch of its random through inotify, and the file gives its blocks back.
@Suite(.serialized) struct KeyLogIntakeFileTests {
    static let random = [UInt8](repeating: 0x5a, count: 32)
    static let line = "SERVER_HANDSHAKE_TRAFFIC_SECRET \(String(repeating: "5a", count: 32)) \(String(repeating: "42", count: 48))\n"

    static func append(_ text: String, to path: String) {
        let fd = open(path, O_WRONLY | O_APPEND)
        precondition(fd >= 0, "cannot open \(path)")
        _ = Array(text.utf8).withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    func withIntake(_ body: (EventLoop, KeyLogIntake, String) throws -> Void) throws {
        let directory = "/dev/shm/pinproxy-unit-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let loop = EventLoop()
        let intake = try KeyLogIntake(loop: loop, settings: KeyLogSettings(path: directory + "/keylog", wait: 0.2), maxWatches: 4)
        try body(loop, intake, directory + "/keylog")
    }

    @Test func anAppendedLineReachesItsWatchThroughTheLoop() throws {
        try withIntake { loop, intake, path in
            #expect(intake.wait == 0.2)
            var got: [Int] = []
            let watch = intake.watch(clientRandom: Self.random) { delivery in
                if case .secret(.serverHandshake(let secret)) = delivery { got.append(secret.count) }
                loop.stop()
            }
            #expect(watch.isActive)
            Self.append(Self.line, to: path)
            let giveUp = Timer(loop: loop, after: 5) { loop.stop() }  // bounds the run
            loop.run()
            giveUp.cancel()
            #expect(got == [48])
            #expect(intake.counters.kept == 1 && intake.watchCount == 1)
            watch.cancel()
            #expect(intake.watchCount == 0)
        }
    }

    @Test func readNowTakesWhatIsThereAndTheFileKeepsNoBlocks() throws {
        try withIntake { _, intake, path in
            var delivered = 0
            let watch = intake.watch(clientRandom: Self.random) { _ in delivered += 1 }
            Self.append(String(repeating: "CLIENT_RANDOM \(String(repeating: "01", count: 32)) \(String(repeating: "02", count: 48))\n", count: 2000), to: path)
            Self.append(Self.line, to: path)
            intake.readNow()
            #expect(delivered == 1 && intake.counters.lines == 2001 && intake.counters.dropped == 2000)
            var info = stat()
            #expect(stat(path, &info) == 0 && info.st_size > 300_000 && info.st_blocks <= 8, "blocks \(info.st_blocks)")
            #expect(intake.punchesHoles)
            withExtendedLifetime(watch) {}
        }
    }

    /// Truncated under us (the unit's ExecStopPost, a client opening with O_TRUNC): read from the start again.
    @Test func aFileTruncatedUnderTheIntakeIsReadFromItsStart() throws {
        try withIntake { _, intake, path in
            var delivered = 0
            let watch = intake.watch(clientRandom: Self.random) { _ in delivered += 1 }
            Self.append(String(repeating: "# comment line\n", count: 100), to: path)
            intake.readNow()
            #expect(truncate(path, 0) == 0)
            Self.append(Self.line, to: path)
            intake.readNow()
            #expect(delivered == 1 && intake.truncations == 1)
            intake.stop()
            var info = stat()
            #expect(stat(path, &info) == 0 && info.st_size == 0)
            withExtendedLifetime(watch) {}
        }
    }

    @Test func aFIFOIsRefused() throws {
        let directory = "/dev/shm/pinproxy-unit-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        #expect(mkfifo(directory + "/fifo", 0o622) == 0)
        #expect(throws: KeyLogFile.OpenError.self) { try KeyLogFile(path: directory + "/fifo", mode: 0o622) }
    }
}
