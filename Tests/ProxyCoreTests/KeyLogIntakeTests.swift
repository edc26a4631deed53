import Foundation
import Logging
import PinPolicy
import Testing
@testable import ProxyCore
import TestSupport

/// The intake on a real file in /dev/shm (tmpfs) on its own thread: a line a client appends reaches
/// the watch of its random through inotify, the file gives its blocks back, a flood is passed over
/// (the waited-for line still found), and a path swapped for something else is put right.
@Suite(.serialized) struct KeyLogIntakeFileTests {
    static let random = [UInt8](repeating: 0x5a, count: 32)
    static let line = "SERVER_HANDSHAKE_TRAFFIC_SECRET \(String(repeating: "5a", count: 32)) \(String(repeating: "42", count: 48))\n"
    static let unrelated = "CLIENT_RANDOM \(String(repeating: "01", count: 32)) \(String(repeating: "02", count: 48))\n"

    static func append(_ text: String, to path: String) {
        let fd = open(path, O_WRONLY | O_APPEND)
        precondition(fd >= 0, "cannot open \(path)")
        _ = Array(text.utf8).withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
        close(fd)
    }

    /// Counts deliveries made on the intake's thread.
    final class Deliveries: @unchecked Sendable {
        private let count = Locked(0)
        let arrived = DispatchSemaphore(value: 0)
        func add() {
            count.withLock { $0 += 1 }
            arrived.signal()
        }
        var total: Int { count.withLock { $0 } }
    }

    func withIntake(_ body: (KeyLogIntake, String) throws -> Void) throws {
        let directory = "/dev/shm/pinproxy-unit-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let intake = try KeyLogIntake(settings: KeyLogSettings(path: directory + "/keylog", wait: 0.2), maxWatches: 4,
                                      logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() })
        intake.start()
        defer { intake.stop() }
        try body(intake, directory + "/keylog")
    }

    @Test func anAppendedLineReachesItsWatchThroughTheIntakesThread() throws {
        try withIntake { intake, path in
            #expect(intake.wait == 0.2)
            let got = Deliveries()
            let watch = intake.watch(clientRandom: Self.random) { delivery in
                if case .secret(.serverHandshake(let secret)) = delivery, secret.count == 48 { got.add() }
            }
            #expect(watch.isActive)
            Self.append(Self.line, to: path)
            #expect(got.arrived.wait(timeout: .now() + 10) == .success)
            #expect(got.total == 1 && intake.counters.kept == 1 && intake.watchCount == 1)
            watch.cancel()
            #expect(intake.watchCount == 0)
        }
    }

    @Test func readNowTakesWhatIsThereAndTheFileKeepsNoBlocks() throws {
        try withIntake { intake, path in
            let got = Deliveries()
            let watch = intake.watch(clientRandom: Self.random) { _ in got.add() }
            Self.append(String(repeating: Self.unrelated, count: 2000), to: path)
            Self.append(Self.line, to: path)
            intake.readAndWait()
            #expect(got.total == 1 && intake.counters.lines == 2001 && intake.counters.dropped == 2000)
            var info = stat()
            #expect(stat(path, &info) == 0 && info.st_size > 300_000 && info.st_blocks <= 8, "blocks \(info.st_blocks)")
            #expect(intake.punchesHoles && intake.counters.skippedBytes == 0)
            withExtendedLifetime(watch) {}
        }
    }

    /// Truncated under us (the unit's ExecStopPost, a client opening with O_TRUNC): read from the start again.
    @Test func aFileTruncatedUnderTheIntakeIsReadFromItsStart() throws {
        try withIntake { intake, path in
            let got = Deliveries()
            let watch = intake.watch(clientRandom: Self.random) { _ in got.add() }
            Self.append(String(repeating: "# comment line\n", count: 100), to: path)
            intake.readAndWait()
            #expect(truncate(path, 0) == 0)
            Self.append(Self.line, to: path)
            intake.readAndWait()
            #expect(got.total == 1 && intake.truncations == 1)
            intake.stop()
            var info = stat()
            #expect(stat(path, &info) == 0 && info.st_size == 0)
            withExtendedLifetime(watch) {}
        }
    }

    /// More than the flood threshold at once and nobody waiting: passed over unread, counted, and the
    /// file emptied (its size bounded too, not only its blocks).
    @Test func aFloodWithNoTunnelWaitingIsSkippedAndTheFileEmptied() throws {
        try withIntake { intake, path in
            let flood = String(repeating: Self.unrelated, count: 60_000)  // 10.6 MB, past the 2 MiB threshold
            Self.append(flood, to: path)
            intake.readAndWait()
            let counters = intake.counters
            // The intake's thread may read the first part while the write is still going on (a 10 MB
            // write to tmpfs is not atomic to a reader): that part is parsed, the rest passed over.
            let total = Int64(flood.utf8.count), line = Int64(Self.unrelated.utf8.count)
            #expect(abs(counters.skippedBytes + Int64(counters.lines) * line - total) <= line, "\(counters)")
            #expect(counters.skippedBytes >= total - (2 << 20) - line, "\(counters)")
            var info = stat()
            #expect(stat(path, &info) == 0 && info.st_size == 0 && info.st_blocks == 0)
        }
    }

    /// A flood with a tunnel waiting: what was there before its watch began is passed over, the rest
    /// scanned, and its line (upper-case hex, as some clients write it) delivered from the middle.
    @Test func aFloodWithATunnelWaitingStillDeliversItsLine() throws {
        try withIntake { intake, path in
            let before = String(repeating: Self.unrelated, count: 30_000)
            Self.append(before, to: path)
            let got = Deliveries()
            let watch = intake.watch(clientRandom: Self.random) { _ in got.add() }
            let upper = "SERVER_HANDSHAKE_TRAFFIC_SECRET \(String(repeating: "5A", count: 32)) \(String(repeating: "42", count: 48))\n"
            Self.append(String(repeating: Self.unrelated, count: 30_000) + upper + String(repeating: Self.unrelated, count: 30_000), to: path)
            for _ in 0..<20 where got.total == 0 { intake.readAndWait() }
            #expect(got.total == 1 && intake.counters.kept == 1)
            #expect(intake.counters.skippedBytes >= Int64(before.utf8.count), "\(intake.counters)")
            // What was scanned is given back as it goes (the rest of the flood within a few more turns).
            var info = stat()
            for _ in 0..<20 where stat(path, &info) == 0 && info.st_blocks * 512 >= 1 << 20 { intake.readAndWait() }
            #expect(info.st_blocks * 512 < 1 << 20, "blocks \(info.st_blocks)")
            withExtendedLifetime(watch) {}
        }
    }

    /// A FIFO put in the file's place: a writer blocked in open() is released, and the path is a
    /// regular file of ours again whose lines reach their watch.
    @Test func aFIFOSwappedInIsDrainedAndReplaced() throws {
        try withIntake { intake, path in
            // In one step: a missing file would be put back before a mkfifo at the path could run.
            let beside = (path as NSString).deletingLastPathComponent + "/fifo"
            #expect(mkfifo(beside, 0o666) == 0 && rename(beside, path) == 0)
            // A writer that would block in open() without a reader (bounded by its own alarm).
            let writer = Process()
            writer.executableURL = URL(fileURLWithPath: "/usr/bin/timeout")
            writer.arguments = ["-s", "KILL", "5", "/bin/sh", "-c", "echo line >> \(path)"]
            try ChildProcesses.launch(writer)
            ChildProcesses.end(writer, grace: 10)
            #expect(writer.terminationStatus == 0, "the writer hung in open()")
            let deadline = Date().addingTimeInterval(10)
            var info = stat()
            while Date() < deadline, !(lstat(path, &info) == 0 && info.st_mode & S_IFMT == S_IFREG) { usleep(10_000) }
            #expect(info.st_mode & S_IFMT == S_IFREG && info.st_uid == geteuid() && info.st_mode & 0o7777 == 0o622)
            let got = Deliveries()
            let watch = intake.watch(clientRandom: Self.random) { _ in got.add() }
            Self.append(Self.line, to: path)
            #expect(got.arrived.wait(timeout: .now() + 10) == .success)
            withExtendedLifetime(watch) {}
        }
    }

    /// Unlinked, then a symbolic link put in its place: each time a fresh file of ours, the link
    /// removed and never followed.
    @Test func anUnlinkedFileOrASymlinkIsReplaced() throws {
        try withIntake { intake, path in
            func waitForOwnFile(besides inode: ino_t) -> stat? {
                let deadline = Date().addingTimeInterval(10)
                var info = stat()
                while Date() < deadline {
                    if lstat(path, &info) == 0, info.st_mode & S_IFMT == S_IFREG, info.st_ino != inode { return info }
                    usleep(10_000)
                }
                return nil
            }
            var first = stat()
            #expect(lstat(path, &first) == 0)
            #expect(unlink(path) == 0)
            let second = try #require(waitForOwnFile(besides: first.st_ino))
            let directory = (path as NSString).deletingLastPathComponent
            #expect(symlink(directory + "/elsewhere", directory + "/link") == 0 && rename(directory + "/link", path) == 0)
            let third = try #require(waitForOwnFile(besides: second.st_ino))
            #expect(third.st_mode & 0o7777 == 0o622 && !FileManager.default.fileExists(atPath: directory + "/elsewhere"))
            let got = Deliveries()
            let watch = intake.watch(clientRandom: Self.random) { _ in got.add() }
            Self.append(Self.line, to: path)
            #expect(got.arrived.wait(timeout: .now() + 10) == .success)
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

extension KeyLogIntake {
    /// `readNow`, waited for (bounded).
    func readAndWait() {
        let done = DispatchSemaphore(value: 0)
        readNow { done.signal() }
        _ = done.wait(timeout: .now() + 10)
    }
}
