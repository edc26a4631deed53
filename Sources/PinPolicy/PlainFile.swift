#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a whole regular file with open/fstat/read/close, bounded in size: every file a start, a
/// reload or `pinproxy check` reads comes through here.
///
/// Only a regular file is read. The proxy reads its files on its one event loop, where a FIFO would
/// block `open()` until some writer came: no CONNECT, no `/metrics`, no SIGTERM meanwhile. So the
/// file is opened with `O_NONBLOCK` (a FIFO's open returns at once; `O_NOCTTY` keeps a terminal
/// from becoming ours), and anything `fstat` does not call regular is refused before a read. A
/// pipe (`--config <(…)`) is refused too, by the same rule. A regular file on a file system that
/// stops answering (a dead NFS server) still blocks the read; that is outside what this guards.
///
/// We do not use Foundation's `String(contentsOfFile:)` here: on Linux it leaked about 4 KiB each
/// time it read an empty file, and every SIGHUP reads the policy file
/// (PolicyFileReadingTests.reloadingDoesNotLeak). Its errors were Cocoa errors, too; ours are the
/// path, `strerror` and the errno, which is what someone fixing a deployment needs.
public enum PlainFile {
    public struct ReadError: Error, Hashable, Sendable, CustomStringConvertible {
        public enum Problem: Hashable, Sendable {
            case system(errno: Int32)
            case tooLarge(limit: Int)
            /// What the path names instead of a regular file: `a FIFO`, `a directory` …
            case notRegular(kind: String)
        }

        public let path: String
        public let problem: Problem

        /// `cannot read /etc/pinproxy/pinproxy.yaml: No such file or directory (errno 2)`
        public var description: String { "cannot read \(path): \(reason)" }

        /// Why, without the path: `No such file or directory (errno 2)`.
        public var reason: String {
            switch problem {
            case .system(let code): return "\(String(cString: strerror(code))) (errno \(code))"
            case .tooLarge(let limit): return "it is larger than \(limit >> 20) MiB, the most this file may be"
            case .notRegular(let kind): return "it is \(kind), not a regular file"
            }
        }
    }

    /// The file's bytes, at most `limit` of them. Retries `EINTR`; traps on `EBADF`/`EFAULT`, which
    /// only a bug here can cause (a programmer's error traps, the environment's is a value); every other failure is a `ReadError`.
    public static func contents(of path: String, limit: Int) throws(ReadError) -> [UInt8] {
        func failure(_ code: Int32) -> ReadError {
            precondition(code != EBADF && code != EFAULT, "PlainFile.contents(of: \(path)): \(String(cString: strerror(code)))")
            return ReadError(path: path, problem: .system(errno: code))
        }
        var fd: Int32
        repeat { fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC) } while fd < 0 && errno == EINTR
        guard fd >= 0 else {
            let code = errno
            // A Unix socket cannot be opened at all (ENXIO); say what it is.
            var info = stat()
            if code == ENXIO, stat(path, &info) == 0, let kind = kind(info.st_mode) { throw ReadError(path: path, problem: .notRegular(kind: kind)) }
            throw ReadError(path: path, problem: .system(errno: code))
        }
        defer { close(fd) }  // not retried on EINTR: Linux has released the descriptor either way

        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure(errno) }
        if let kind = kind(info.st_mode) { throw ReadError(path: path, problem: .notRegular(kind: kind)) }
        // A regular file says its size up front, except in /proc, which says 0: we read until EOF,
        // counting, either way.
        let announced = Int(info.st_size)
        guard announced <= limit else { throw ReadError(path: path, problem: .tooLarge(limit: limit)) }

        var bytes: [UInt8] = []
        bytes.reserveCapacity(announced)
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw failure(errno)
            }
            if n == 0 { return bytes }
            bytes += chunk[0..<n]
            guard bytes.count <= limit else { throw ReadError(path: path, problem: .tooLarge(limit: limit)) }
        }
    }

    /// nil for a regular file; else what the mode says the file is, in words.
    private static func kind(_ mode: mode_t) -> String? {
        switch mode & S_IFMT {
        case S_IFREG: return nil
        case S_IFIFO: return "a FIFO"
        case S_IFDIR: return "a directory"
        case S_IFCHR: return "a character device"
        case S_IFBLK: return "a block device"
        case S_IFSOCK: return "a socket"
        default: return "a file of type 0o\(String(mode & S_IFMT, radix: 8))"
        }
    }
}
