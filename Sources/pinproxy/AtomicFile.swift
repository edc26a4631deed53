#if canImport(Glibc)
import Glibc
#endif

/// Replaces a file so that a reader sees the old bytes or the new ones, never a mix or a
/// truncated file, even across a crash: a temporary file in the same directory (rename is atomic
/// only within one file system), written, flushed to disk, renamed over the target, and the
/// directory flushed so the rename itself survives a power cut.
enum AtomicFile {
    struct Failure: Error, CustomStringConvertible {
        let path: String
        let step: String
        let errno: Int32

        var description: String { "cannot install \(path): \(step): \(String(cString: strerror(errno))) (errno \(errno))" }
    }

    /// `mode` is set explicitly: mkstemp makes 0600, and the proxy reads the file as another user.
    static func replace(_ path: String, with bytes: [UInt8], mode: mode_t = 0o644) throws(Failure) {
        let directory = path.lastIndex(of: "/").map { String(path[..<$0]) } ?? "."
        let name = path.split(separator: "/").last.map(String.init) ?? path
        var template = Array("\(directory.isEmpty ? "" : directory)/.\(name).XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw Failure(path: path, step: "create a temporary file in \(directory.isEmpty ? "/" : directory)", errno: errno) }
        let temporary = String(cString: template)
        func fail(_ step: String) -> Failure {
            let failure = Failure(path: path, step: step, errno: errno)
            close(fd)
            unlink(temporary)
            return failure
        }
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { throw fail("write \(temporary)") }
            offset += n
        }
        guard fchmod(fd, mode) == 0 else { throw fail("chmod \(temporary)") }
        guard fsync(fd) == 0 else { throw fail("fsync \(temporary)") }
        close(fd)
        guard rename(temporary, path) == 0 else {
            let failure = Failure(path: path, step: "rename \(temporary)", errno: errno)
            unlink(temporary)
            throw failure
        }
        let directoryFD = open(directory.isEmpty ? "/" : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryFD >= 0 else { throw Failure(path: path, step: "open \(directory) to flush it", errno: errno) }
        defer { close(directoryFD) }
        guard fsync(directoryFD) == 0 else { throw Failure(path: path, step: "fsync \(directory)", errno: errno) }
    }
}
