#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Reads a whole file with open/fstat/read/close, bounded in size.
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
            }
        }
    }

    /// The file's bytes, at most `limit` of them. Retries `EINTR`; traps on `EBADF`/`EFAULT`, which
    /// only a bug here can cause (STYLE §10); every other failure is a `ReadError`.
    public static func contents(of path: String, limit: Int) throws(ReadError) -> [UInt8] {
        func failure(_ code: Int32) -> ReadError {
            precondition(code != EBADF && code != EFAULT, "PlainFile.contents(of: \(path)): \(String(cString: strerror(code)))")
            return ReadError(path: path, problem: .system(errno: code))
        }
        var fd: Int32
        repeat { fd = open(path, O_RDONLY | O_CLOEXEC) } while fd < 0 && errno == EINTR
        guard fd >= 0 else { throw ReadError(path: path, problem: .system(errno: errno)) }
        defer { close(fd) }  // not retried on EINTR: Linux has released the descriptor either way

        var info = stat()
        guard fstat(fd, &info) == 0 else { throw failure(errno) }
        // A regular file says its size up front; a pipe (`--config <(…)`) says 0, and we read until
        // EOF, counting. A directory fails in read() with EISDIR.
        let announced = (info.st_mode & S_IFMT) == S_IFREG ? Int(info.st_size) : 0
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
}
