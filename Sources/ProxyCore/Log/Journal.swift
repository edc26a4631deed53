import CLibevent  // its shim brings <sys/socket.h> (SOCK_DGRAM, SOCK_CLOEXEC) the way the rest of ProxyCore sees it
import Foundation
import Logging

/// journald's native protocol, written here rather than through libsystemd's `sd_journal_sendv`:
/// libsystemd sends to the fixed path `/run/systemd/journal/socket` (a constant in its
/// journal-send.c, with no variable to move it), so no test could stand a socket of its own in for
/// the journal; and the protocol is a datagram of `KEY=value` lines, simpler than the dependency.
enum Journal {
    /// Where journald listens for native messages.
    static let defaultSocketPath = "/run/systemd/journal/socket"

    /// Whether our stderr is the journal: systemd sets `JOURNAL_STREAM=<dev>:<inode>` to the stream
    /// it connected stderr to (`StandardError=journal`). A stderr redirected elsewhere by a child or a
    /// shell has another device and inode, and then lines stay lines.
    static func stderrIsJournal(environment: [String: String] = ProcessInfo.processInfo.environment, fd: Int32 = 2) -> Bool {
        guard let value = environment["JOURNAL_STREAM"] else { return false }
        let parts = value.split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var facts = stat()
        guard fstat(fd, &facts) == 0 else { return false }
        return UInt64(facts.st_dev) == device && UInt64(facts.st_ino) == inode
    }

    /// The journal's socket. Debug builds read `PINPROXY_TEST_JOURNAL_SOCKET` so that a test's
    /// datagram socket can stand in for journald; a release build has no such switch.
    static func socketPath(environment: [String: String] = ProcessInfo.processInfo.environment) -> String {
        #if DEBUG
        if let path = environment["PINPROXY_TEST_JOURNAL_SOCKET"], !path.isEmpty { return path }
        #endif
        return defaultSocketPath
    }

    /// Whether a Unix socket is at `path` (journald listening), checked once at start.
    static func isSocket(_ path: String) -> Bool {
        var facts = stat()
        return stat(path, &facts) == 0 && (facts.st_mode & S_IFMT) == S_IFSOCK
    }

    /// syslog priorities (RFC 5424), what `journalctl -p` filters on.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .critical: return 2
        case .error: return 3
        case .warning: return 4
        case .notice: return 5
        case .info: return 6
        case .debug, .trace: return 7
        }
    }

    /// `chain.0.spki` → `PINPROXY_CHAIN_0_SPKI`: journal field names are upper-case letters, digits
    /// and underscores.
    static func fieldName(_ key: String) -> String {
        "PINPROXY_" + String(key.uppercased().map { $0.isLetter || $0.isNumber ? $0 : "_" })
    }
}

extension LogRecord {
    /// The record as journal fields: `PRIORITY`, `SYSLOG_IDENTIFIER`, a short `MESSAGE`,
    /// `PINPROXY_EVENT`, and every key as `PINPROXY_<KEY>` (arrays flattened as in logfmt:
    /// `PINPROXY_CHAIN_0_SPKI`). Values are the plain values, unquoted.
    public var journalFields: [(String, String)] {
        var out = [("PRIORITY", String(Journal.priority(level))), ("SYSLOG_IDENTIFIER", "pinproxy"),
                   ("MESSAGE", journalMessage), ("PINPROXY_EVENT", event)]
        for (key, value) in fields {
            switch value {
            case .objects(let list):
                for (index, object) in list.enumerated() {
                    for (field, inner) in object { out.append((Journal.fieldName("\(key).\(index).\(field)"), inner.plain)) }
                }
            default:
                out.append((Journal.fieldName(key), value.plain))
            }
        }
        return out
    }

    /// One short line for `journalctl`'s default view: the event, the target, and the reason, or
    /// the detail when there is no reason (`tunnel_refused api.example.com:443: pin_mismatch`).
    var journalMessage: String {
        var message = event
        if case .string(let host)? = self["host"] {
            message += " " + (host.contains(":") ? "[\(host)]" : host)
            if let port = self["port"] { message += ":" + port.plain }
        }
        if let reason = self["reason"] {
            message += ": " + reason.plain
        } else if let detail = self["detail"] {
            message += ": " + detail.plain
        }
        return message
    }

    /// The native protocol's datagram: `KEY=value\n` per field; a value with a newline (hosts and
    /// subjects come from the network) as `KEY\n`, its length as 64-bit little endian, the bytes, `\n`.
    func journalDatagram() -> [UInt8] {
        var out: [UInt8] = []
        for (name, value) in journalFields {
            let bytes = Array(value.utf8)
            out += Array(name.utf8)
            if bytes.contains(UInt8(ascii: "\n")) {
                out.append(UInt8(ascii: "\n"))
                withUnsafeBytes(of: UInt64(bytes.count).littleEndian) { out += $0 }
            } else {
                out.append(UInt8(ascii: "="))
            }
            out += bytes
            out.append(UInt8(ascii: "\n"))
        }
        return out
    }
}

extension LogValue {
    /// The value as it reads, without logfmt's quoting.
    var plain: String {
        switch self {
        case .string(let s): return s
        case .int(let i): return String(i)
        case .bool(let b): return b ? "true" : "false"
        case .objects: return json
        }
    }
}

/// A datagram socket to the journal, used only by the log writer's thread. Unconnected, with the
/// address on every send as libsystemd does, so a journald that restarts is found again.
final class JournalSocket: Sendable {
    let fd: Int32
    private let address: sockaddr_un
    private let length: socklen_t

    init?(path: String) {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { return nil }
        withUnsafeMutableBytes(of: &address.sun_path) { $0.copyBytes(from: bytes) }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return nil }
        // Room for large entries (a long chain), as libsystemd asks for; the kernel caps it at wmem_max.
        var size: Int32 = 8 << 20
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        self.fd = fd
        self.address = address
        self.length = socklen_t(MemoryLayout<sa_family_t>.size + bytes.count)
    }

    /// Sends one entry, blocking while journald's queue is full (the writer thread's to wait, never
    /// the loop's). False when it could not be delivered: no journald, or an entry too large.
    func send(_ datagram: [UInt8]) -> Bool {
        var address = self.address
        while true {
            let sent = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { sa in
                    datagram.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, length) }
                }
            }
            if sent >= 0 { return true }
            if errno != EINTR { return false }
        }
    }

    deinit { close(fd) }
}
