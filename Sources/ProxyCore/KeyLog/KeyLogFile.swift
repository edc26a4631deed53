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
    let mode: UInt32
    let fd: Int32
    /// The inode we follow: the path must keep naming it (see `Finding`).
    let device: UInt64
    let inode: UInt64
    /// Where the next unread byte is.
    private(set) var offset: Int64 = 0
    /// Bytes before this were read and their blocks given back.
    private var freedUpTo: Int64 = 0
    /// tmpfs punches holes; where that fails (ramfs) we truncate once we have caught up.
    private(set) var punching = true

    /// At start: creates the file with `mode` if it is missing, or takes the existing regular file we
    /// own; never follows a symbolic link. What it holds is discarded: lines written while pinproxy
    /// was stopped belong to connections that are gone.
    convenience init(path: String, mode: UInt32) throws(OpenError) {
        try self.init(path: path, mode: mode, flags: O_CREAT)
        ftruncate(fd, 0)
    }

    /// While running, after the path was taken from us: a new file only (O_EXCL), so that whatever
    /// raced us to the name is never adopted.
    static func fresh(path: String, mode: UInt32) throws(OpenError) -> KeyLogFile {
        try KeyLogFile(path: path, mode: mode, flags: O_CREAT | O_EXCL)
    }

    private init(path: String, mode: UInt32, flags: Int32) throws(OpenError) {
        self.path = path
        self.mode = mode
        let opened = open(path, O_RDWR | flags | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK, mode_t(mode))
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
        fd = opened
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
    }

    deinit { close(fd) }

    /// The file's size now (0 if fstat fails, which it does not on an open descriptor).
    var size: Int64 {
        var info = stat()
        return fstat(fd, &info) == 0 ? Int64(info.st_size) : 0
    }

    /// Bytes appended and not read yet.
    var backlog: Int64 { max(0, size - offset) }

    enum ReadResult: Equatable {
        /// Read up to the end of the file.
        case caughtUp
        /// Stopped at the per-call bound; more is waiting.
        case more
    }

    /// Someone truncated the file (the unit's ExecStopPost of a previous run, a client that opened it
    /// with O_TRUNC): true, and the next read starts again from its beginning.
    func noticeTruncation() -> Bool {
        guard size < offset else { return false }
        offset = 0
        freedUpTo = 0
        return true
    }

    /// Reads what was appended since the last call into `buffer` and hands each chunk to `take`,
    /// then frees those bytes in the file. At most `maxChunks` reads per call (a flood must not keep
    /// the intake from its other work). `take` must not keep the bytes: the buffer is wiped after it
    /// returns.
    func readAppended(into buffer: UnsafeMutableRawBufferPointer, maxChunks: Int,
                      _ take: (UnsafeRawBufferPointer) -> Void) -> ReadResult {
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
        return result
    }

    /// Reads one chunk at `offset` without moving past it (the flood scan decides how far it got).
    func peek(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        while true {
            let n = pread(fd, buffer.baseAddress, buffer.count, off_t(offset))
            if n < 0 && errno == EINTR { continue }
            return max(0, n)
        }
    }

    /// Moves past `count` bytes without parsing them (or past what the flood scan read), and frees them.
    func skip(_ count: Int64) {
        guard count > 0 else { return }
        offset += count
        release(caughtUp: false)
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
        if caughtUp, size == offset { truncate() }
    }

    /// Empties the file: on a clean stop (nothing a client wrote outlives pinproxy in it), and in a
    /// flood while no tunnel waits for a line (every byte in it is worthless, and the size must not
    /// grow without bound). Writers append with O_APPEND, so their next line lands at the new end.
    func truncate() {
        ftruncate(fd, 0)
        offset = 0
        freedUpTo = 0
    }

    // MARK: the path

    /// What the configured path names now, if not the file we follow.
    enum Finding: Equatable {
        /// Nothing: unlinked or renamed away.
        case missing
        case fifo
        case symlink
        /// A regular file another user owns: its owner could read every secret written to it.
        case foreignOwner(uid: UInt32)
        /// A regular file of ours that is not the one we follow (created by a client while the name
        /// was free, or moved there).
        case otherFile
        /// A directory, device or socket.
        case notRegular

        var text: String {
            switch self {
            case .missing: return "missing"
            case .fifo: return "fifo"
            case .symlink: return "symlink"
            case .foreignOwner: return "foreign_owner"
            case .otherFile: return "other_file"
            case .notRegular: return "not_regular"
            }
        }
    }

    /// Nil when the path still names this file (its mode put back if someone changed it).
    func inspectPath() -> Finding? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return .missing }
        switch info.st_mode & S_IFMT {
        case S_IFIFO: return .fifo
        case S_IFLNK: return .symlink
        case S_IFREG: break
        default: return .notRegular
        }
        guard info.st_uid == geteuid() else { return .foreignOwner(uid: info.st_uid) }
        guard UInt64(info.st_dev) == device, UInt64(info.st_ino) == inode else { return .otherFile }
        if info.st_mode & 0o7777 != mode { fchmod(fd, mode_t(mode)) }
        return nil
    }
}

/// inotify(7) for the intake: the followed file's inode (IN_MODIFY: a client wrote) and its
/// directory (the path's name created, deleted, moved or changed: someone may have put something
/// else in its place).
final class KeyLogNotifier {
    let fd: Int32
    private let name: String
    private var fileWatch: Int32 = -1
    private let directoryWatch: Int32

    struct Notice: OptionSet {
        let rawValue: Int
        static let written = Notice(rawValue: 1)
        static let pathChanged = Notice(rawValue: 2)
    }

    init(path: String) throws(KeyLogFile.OpenError) {
        let url = URL(fileURLWithPath: path)
        name = url.lastPathComponent
        let directory = url.deletingLastPathComponent().path
        let opened = inotify_init1(Int32(IN_NONBLOCK | IN_CLOEXEC))
        guard opened >= 0 else { throw .cannotWatch(path, errnoText(errno)) }
        let mask = UInt32(IN_CREATE | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
        let watch = inotify_add_watch(opened, directory, mask)
        guard watch >= 0 else {
            let why = errnoText(errno)
            close(opened)
            throw .cannotWatch(path, why)
        }
        fd = opened
        directoryWatch = watch
    }

    deinit { close(fd) }

    /// Watches the inode `file` has open (through /proc/self/fd, not whatever the path names by now),
    /// instead of the one before.
    func follow(_ file: KeyLogFile) throws(KeyLogFile.OpenError) {
        if fileWatch >= 0 { inotify_rm_watch(fd, fileWatch) }
        fileWatch = inotify_add_watch(fd, "/proc/self/fd/\(file.fd)", UInt32(IN_MODIFY))
        guard fileWatch >= 0 else { throw .cannotWatch(file.path, errnoText(errno)) }
    }

    /// Empties the queue and says what it held (bounded: a queue that keeps filling is read again on
    /// the next turn).
    func drain() -> Notice {
        var notice: Notice = []
        var events = [UInt8](repeating: 0, count: 8192)
        let header = MemoryLayout<inotify_event>.size
        for _ in 0..<64 {
            let n = read(fd, &events, events.count)
            guard n > 0 else { break }
            var at = 0
            while at + header <= n {
                let (wd, mask, length) = events.withUnsafeBytes { raw in
                    (raw.load(fromByteOffset: at, as: Int32.self), raw.load(fromByteOffset: at + 4, as: UInt32.self),
                     Int(raw.load(fromByteOffset: at + 12, as: UInt32.self)))
                }
                if mask & UInt32(IN_Q_OVERFLOW) != 0 {
                    notice.formUnion([.written, .pathChanged])  // events were lost: look at everything
                } else if wd == fileWatch {
                    notice.insert(.written)
                } else if wd == directoryWatch {
                    let nameBytes = events[(at + header)..<min(n, at + header + length)].prefix { $0 != 0 }
                    let selfEvent = mask & UInt32(IN_DELETE_SELF | IN_MOVE_SELF) != 0
                    if selfEvent || String(decoding: nameBytes, as: UTF8.self) == name { notice.insert(.pathChanged) }
                }
                at += header + length
            }
        }
        return notice
    }
}
