import Foundation
import Testing
@testable import PinPolicy

import CMalloc

/// `PolicyLoader.load(file:)`: what a reload (SIGHUP) does to memory, and how a file it cannot
/// read is reported.
@Suite struct PolicyFileReadingTests {
    /// A leak of 100 bytes a load grows each try by 2 MB; the suites running beside this one (their
    /// log buffers, a relay's megabytes in flight) grew one run by 282 KB over a 256 KiB bound, so
    /// the bound sits well above them and well below any leak worth the name.
    static let loads = 20_000
    static let bound = 2 << 20

    /// Loads the file `loads` times and returns how much more malloc holds afterwards, the least
    /// of three tries.
    ///
    /// We measure with `mallinfo2().uordblks`, not RSS: RSS counts resident pages, not bytes in
    /// use. Freed memory stays resident in malloc's arenas and a leaked 4 KiB can land in a page
    /// that is already resident, so RSS is both noisy and blind to small leaks; `uordblks` is the
    /// number of bytes malloc has handed out and not got back, to the byte. It is process-wide,
    /// and other suites run in parallel in this process, so we take the least growth of three
    /// tries: a leak grows every try by loads × its size; another test's buffer is freed again.
    static func growth(loading path: String) -> Int {
        _ = try? PolicyLoader.load(file: path, pinFiles: nil)  // warm up caches and lazy globals
        var least = Int.max
        for _ in 0..<3 {
            let before = mallinfo2().uordblks
            for _ in 0..<loads { _ = try? PolicyLoader.load(file: path, pinFiles: nil) }
            let after = mallinfo2().uordblks
            least = min(least, Int(after) - Int(before))
        }
        return least
    }

    @Test(arguments: [
        ("empty", ""),
        ("valid", "version: 1\ndefaults:\n  unpinned: allow\n"),
    ])
    func reloadingDoesNotLeak(name: String, text: String) throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pinproxy-read-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/\(name).yaml"
        #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
        let grown = Self.growth(loading: path)
        #expect(grown < Self.bound, "\(name): \(Self.loads) loads grew the heap by \(grown) bytes")
    }

    /// One error at 0:0 that says what is wrong with the file in plain words.
    static func loadError(_ path: String) -> PolicyError? {
        switch Result(catching: { () throws(PolicyLoadError) in try PolicyLoader.load(file: path, pinFiles: nil) }) {
        case .success: return nil
        case .failure(let e): return e.errors.count == 1 ? e.errors[0] : nil
        }
    }

    @Test func unreadableFilesAreNamedWithTheirErrno() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pinproxy-read-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        let missing = directory + "/missing.yaml"
        #expect(Self.loadError(missing) == PolicyError(file: missing, line: 0, column: 0,
                                                       message: "cannot read \(missing): No such file or directory (errno 2)"))
        #expect(Self.loadError(directory)?.message == "cannot read \(directory): it is a directory, not a regular file")
        // What is not a regular file is refused before anything is read from it (a FIFO's read would
        // wait for a writer; the end-to-end tests put one at each path a load reads).
        #expect(Self.loadError("/dev/null")?.message == "cannot read /dev/null: it is a character device, not a regular file")
        let socket = directory + "/control.sock"
        let listener = Self.boundUnixSocket(socket)
        defer { close(listener) }
        #expect(Self.loadError(socket)?.message == "cannot read \(socket): it is a socket, not a regular file")

        let huge = directory + "/huge.yaml"  // sparse: 16 MiB + 1 byte, nothing written
        #expect(FileManager.default.createFile(atPath: huge, contents: nil))
        #expect(truncate(huge, off_t(PolicyLoader.maxFileBytes + 1)) == 0)
        #expect(Self.loadError(huge)?.message == "cannot read \(huge): it is larger than 16 MiB, the most this file may be")

        let latin1 = directory + "/latin1.yaml"
        #expect(FileManager.default.createFile(atPath: latin1, contents: Data("version: 1\n# caf\u{e9}\n".utf8.map { $0 == 0xc3 ? 0xe9 : $0 }.filter { $0 != 0xa9 })))
        #expect(Self.loadError(latin1)?.message == "cannot read \(latin1): it is not UTF-8 text")
    }

    @Test func aFileWithAByteOrderMarkStillLoads() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("pinproxy-read-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/bom.yaml"
        #expect(FileManager.default.createFile(atPath: path, contents: Data([0xef, 0xbb, 0xbf] + Array("version: 1\ndefaults:\n  unpinned: allow\n".utf8))))
        #expect(throws: Never.self) { try PolicyLoader.load(file: path, pinFiles: nil) }
    }

    /// A Unix stream socket bound at `path` (the path then names a socket).
    static func boundUnixSocket(_ path: String) -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, byte) in path.utf8.prefix(raw.count - 1).enumerated() { raw[i] = byte }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        precondition(fd >= 0 && bound == 0, "bind \(path): errno \(errno)")
        return fd
    }
}
