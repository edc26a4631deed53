import CShims
import Foundation
import PinPolicy

/// The key-log file on tmpfs, opened for following: pinproxy reads what clients append and frees it
/// behind itself.
///
/// Why a regular file and not a FIFO: a FIFO without a reader blocks a client in open(), and one
/// held by a process that does not read fills at 64 KiB and then blocks every writer. With a file a
/// client never waits for pinproxy, whether it is stopped, restarting, slow or killed: its line lands
/// in the file (in RAM), and the next start discards it.
final class KeyLogFile {
    enum OpenError: Error, CustomStringConvertible {
        case cannotOpen(String, String)
        case notRegular(String)
        case foreignOwner(String, uid: UInt32)
        case notInMemory(String)
        case cannotWatch(String, String)
        case inUse(String)

        var description: String {
            switch self {
            case .cannotOpen(let path, let why): return "cannot open the key log \(path): \(why)"
            case .notRegular(let path): return "the key log \(path) exists and is not a regular file (a FIFO, device or directory); remove it"
            case .foreignOwner(let path, let uid):
                return "the key log \(path) belongs to uid \(uid), not to pinproxy's user (uid \(geteuid())): its owner could read every secret written to it; remove it and let pinproxy create it"
            case .notInMemory(let path): return "the key log \(path) is not on tmpfs or ramfs; TLS secrets must never reach a disk"
            case .cannotWatch(let path, let why): return "cannot follow the key log \(path) with inotify: \(why)"
            case .inUse(let path): return "another process (another pinproxy?) follows the key log \(path); each pinproxy needs a key log of its own, since a reader frees what it has read"
            }
        }
    }

    // linux/falloc.h, which Swift's Glibc module does not carry.
    private static let fallocKeepSize: Int32 = 0x01
    private static let fallocPunchHole: Int32 = 0x02
    private static let pageSize = Int64(sysconf(Int32(_SC_PAGESIZE)))

    let path: String
    let fd: Int32
    /// inotify(7) descriptor watching `fd`'s inode for IN_MODIFY; readable when a client wrote.
    let inotify: Int32
    /// Where the next unread byte is.
    private(set) var offset: Int64 = 0
    /// Bytes before this were read and their blocks given back.
    private var freedUpTo: Int64 = 0
    /// tmpfs punches holes; where that fails (ramfs) we truncate once we have caught up.
    private(set) var punching = true

    /// Creates the file with `mode` if it is missing, or takes the existing regular file we own;
    /// never follows a symbolic link. What it holds is discarded: lines written while pinproxy was
    /// stopped belong to connections that are gone.
    init(path: String, mode: UInt32) throws(OpenError) {
        self.path = path
        let opened = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode_t(mode))
        guard opened >= 0 else {
            let code = errno
            throw .cannotOpen(path, code == ELOOP ? "it is a symbolic link" : errnoText(code))
        }
        var info = stat()
        guard fstat(opened, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
            close(opened)
            throw .notRegular(path)
        }
        guard info.st_uid == geteuid() else {
            close(opened)
            throw .foreignOwner(path, uid: info.st_uid)
        }
        guard FileSystemKind.of(descriptor: opened) == .memory else {
            close(opened)
            throw .notInMemory(path)
        }
        // Two readers would punch holes in each other's unread lines: one follower per file.
        guard flock(opened, LOCK_EX | LOCK_NB) == 0 else {
            close(opened)
            throw .inUse(path)
        }
        // The umask (0077 in the unit) must not narrow the mode the operator chose, and an existing
        // file gets it too.
        fchmod(opened, mode_t(mode))
        ftruncate(opened, 0)
        let watcher = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        // Watch the inode we opened (through /proc/self/fd), not whatever the path names by now.
        guard watcher >= 0, inotify_add_watch(watcher, "/proc/self/fd/\(opened)", UInt32(IN_MODIFY)) >= 0 else {
            let why = errnoText(errno)
            if watcher >= 0 { close(watcher) }
            close(opened)
            throw .cannotWatch(path, why)
        }
        fd = opened
        inotify = watcher
    }

    deinit {
        close(inotify)
        close(fd)
    }

    /// Empties the inotify queue: we only need to know that something was written.
    func drainNotifications() {
        var events = [UInt8](repeating: 0, count: 4096)
        var rounds = 0
        while rounds < 64, read(inotify, &events, events.count) > 0 { rounds += 1 }
    }

    enum ReadResult: Equatable {
        /// Read up to the end of the file.
        case caughtUp
        /// Stopped at the per-call bound; more is waiting.
        case more
    }

    /// Reads what was appended since the last call into `buffer` and hands each chunk to `take`,
    /// then frees those bytes in the file. At most `maxChunks` reads per call (the loop has other work).
    /// `take` must not keep the bytes: the buffer is wiped after it returns.
    func readAppended(into buffer: UnsafeMutableRawBufferPointer, maxChunks: Int,
                      _ take: (UnsafeRawBufferPointer) -> Void) -> (ReadResult, truncated: Bool) {
        var truncated = false
        var info = stat()
        if fstat(fd, &info) == 0, Int64(info.st_size) < offset {
            // Someone truncated the file (the unit's ExecStopPost of a previous run, a client that
            // opened it with O_TRUNC): start again from its beginning.
            offset = 0
            freedUpTo = 0
            truncated = true
        }
        var result = ReadResult.more
        for _ in 0..<maxChunks {
            let n = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else {
                result = .caughtUp
                break
            }
            take(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
            explicit_bzero(buffer.baseAddress!, n)
            offset += Int64(n)
        }
        release(caughtUp: result == .caughtUp)
        return (result, truncated)
    }

    /// Gives back the blocks that held what we read, so secrets do not stay in the file and it does
    /// not grow in RAM. Writers append with O_APPEND, so we punch holes (the size stays) instead of
    /// truncating under them.
    private func release(caughtUp: Bool) {
        guard offset > freedUpTo else { return }
        if punching {
            // From the start of the page where the last punch ended: a punch that covers only part of
            // a page zeroes it but keeps it, so the page a read ended in is freed by the next punch.
            let start = freedUpTo - freedUpTo % Self.pageSize
            if pp_fallocate(fd, Self.fallocPunchHole | Self.fallocKeepSize, start, offset - start) == 0 {
                freedUpTo = offset
                return
            }
            punching = false  // EOPNOTSUPP (ramfs): fall back to truncating
        }
        // XXX: a line appended between the fstat and the ftruncate is lost; only without hole punching.
        var info = stat()
        if caughtUp, fstat(fd, &info) == 0, Int64(info.st_size) == offset {
            ftruncate(fd, 0)
            offset = 0
            freedUpTo = 0
        }
    }

    /// On a clean stop: nothing a client wrote outlives pinproxy in the file.
    func truncate() {
        ftruncate(fd, 0)
        offset = 0
        freedUpTo = 0
    }
}
