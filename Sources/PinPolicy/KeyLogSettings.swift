#if canImport(CStatfs)
import CStatfs
import Glibc
#endif

/// `proxy.keylog`: the file clients write their TLS key log to (`SSLKEYLOGFILE=PATH`), which
/// pinproxy follows to verify TLS 1.3 tunnels. Off when absent.
public struct KeyLogSettings: Hashable, Sendable {
    /// Absolute; its directory is on tmpfs or ramfs (checked when the policy is loaded).
    public var path: String
    /// How long a pinned TLS 1.3 tunnel waits for its client's key line, in seconds.
    public var wait: Double = 0.1
    /// The file's permission bits (default 0622: anyone may append, only pinproxy's user reads).
    public var mode: UInt32 = 0o622
    /// Line of `keylog:` in the policy file.
    public var line: Int = 0

    public init(path: String, wait: Double = 0.1, mode: UInt32 = 0o622, line: Int = 0) {
        self.path = path
        self.wait = wait
        self.mode = mode
        self.line = line
    }

    /// What a reload cannot change on a running intake: the file it follows and the mode it made.
    public func needsRestart(comparedTo other: KeyLogSettings?) -> Bool {
        guard let other else { return true }
        return path != other.path || mode != other.mode
    }

    /// `0622` as written in the file.
    public var modeText: String { "0" + String(mode, radix: 8) }
}

/// Where a file system keeps its bytes, as far as secrets are concerned.
public enum FileSystemKind: Equatable, Sendable {
    /// tmpfs or ramfs: RAM (and swap, for tmpfs), gone at reboot.
    case memory
    /// Anything else: may reach a disk.
    case other(type: Int)
    case unknown(errno: Int32)

    static let tmpfsMagic = 0x0102_1994
    static let ramfsMagic = 0x8584_58f6

    /// statfs(2) of `path`: a secret must never reach persistent storage.
    public static func of(_ path: String) -> FileSystemKind {
        #if canImport(CStatfs)
        var info = statfs()
        guard statfs(path, &info) == 0 else { return .unknown(errno: errno) }
        return kind(Int(info.f_type))
        #else
        return .unknown(errno: 0)
        #endif
    }

    /// The same, of an open descriptor (fstatfs(2)).
    public static func of(descriptor: Int32) -> FileSystemKind {
        #if canImport(CStatfs)
        var info = statfs()
        guard fstatfs(descriptor, &info) == 0 else { return .unknown(errno: errno) }
        return kind(Int(info.f_type))
        #else
        return .unknown(errno: 0)
        #endif
    }

    private static func kind(_ type: Int) -> FileSystemKind {
        // f_type is a signed word: RAMFS_MAGIC may come back sign-extended on some ABIs.
        let magic = type & 0xffff_ffff
        return magic == tmpfsMagic || magic == ramfsMagic ? .memory : .other(type: magic)
    }
}
