#if canImport(Glibc)
import Glibc
#endif

/// Replaces a file so that a reader sees the old bytes or the new ones, never a mix or a
/// truncated file, even across a crash: a temporary file in the same directory (rename is atomic
/// only within one file system), written and flushed to disk (`stage`), then renamed over the
/// target and the directory flushed so the rename itself survives a power cut (`commit`).
/// Staging every file of a set before committing any keeps a failed write (a full disk) from
/// leaving half of the set replaced.
struct StagedFile {
    struct Failure: Error, CustomStringConvertible {
        let path: String
        let step: String
        let errno: Int32

        var description: String { "cannot install \(path): \(step): \(String(cString: strerror(errno))) (errno \(errno))" }
    }

    let target: String
    let temporary: String

    /// `mode` is set explicitly: mkstemp makes 0600, and the proxy reads the file as another user.
    static func stage(_ target: String, with bytes: [UInt8], mode: mode_t = 0o644) throws(Failure) -> StagedFile {
        let directory = Self.directory(of: target)
        let name = target.split(separator: "/").last.map(String.init) ?? target
        var template = Array("\(directory == "/" ? "" : directory)/.\(name).XXXXXX".utf8CString)
        let fd = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard fd >= 0 else { throw Failure(path: target, step: "create a temporary file in \(directory)", errno: errno) }
        let temporary = String(cString: template)
        func fail(_ step: String) -> Failure {
            let failure = Failure(path: target, step: step, errno: errno)
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
        return StagedFile(target: target, temporary: temporary)
    }

    /// Renames the staged file over the target and flushes the directory.
    func commit() throws(Failure) {
        guard rename(temporary, target) == 0 else {
            let failure = Failure(path: target, step: "rename \(temporary)", errno: errno)
            discard()
            throw failure
        }
        let directory = Self.directory(of: target)
        let fd = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(path: target, step: "open \(directory) to flush it", errno: errno) }
        defer { close(fd) }
        guard fsync(fd) == 0 else { throw Failure(path: target, step: "fsync \(directory)", errno: errno) }
    }

    /// Removes the staged file, leaving the target as it was.
    func discard() { unlink(temporary) }

    private static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }
}
