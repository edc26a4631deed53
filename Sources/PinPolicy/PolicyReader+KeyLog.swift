import Foundation
import Yams

/// The `proxy.keylog:` section.
extension PolicyReader {
    /// `proxy.keylog: { path: PATH, wait: DURATION, mode: "0622" }`. The path's directory must be on
    /// tmpfs or ramfs: the file holds TLS secrets, which must never reach persistent storage.
    func readKeyLog(_ node: Node) -> KeyLogSettings? {
        guard let f = fields(node, "proxy.keylog", allowed: .keylog) else { return nil }
        guard let p = f["path"] else {
            fail(node, "proxy.keylog needs 'path:', the file clients name in SSLKEYLOGFILE, e.g. /run/pinproxy/keylog")
            return nil
        }
        guard let path = string(p, "proxy.keylog.path") else { return nil }
        guard path.hasPrefix("/"), path.count > 1, !path.hasSuffix("/") else {
            fail(p, "proxy.keylog.path must be an absolute file path, such as /run/pinproxy/keylog, not '\(path)'")
            return nil
        }
        var settings = KeyLogSettings(path: path, line: node.mark?.line ?? 0)
        let directory = String(path[..<path.lastIndex(of: "/")!])
        switch FileSystemKind.of(directory.isEmpty ? "/" : directory) {
        case .memory:
            break
        case .other(let type):
            fail(p, "proxy.keylog.path: '\(directory.isEmpty ? "/" : directory)' is not on tmpfs or ramfs (file system type 0x\(String(type, radix: 16))); the key log holds TLS secrets, which must never reach a disk: use a directory under /run or /dev/shm")
        case .unknown(let code):
            fail(p, "proxy.keylog.path: cannot check the directory '\(directory)': \(String(cString: strerror(code))) (errno \(code)); it must exist and be on tmpfs")
        }
        if let n = f["wait"], let seconds = duration(n, "proxy.keylog.wait") {
            if seconds <= 0 || seconds > 10 {
                fail(n, "proxy.keylog.wait must be more than 0 and at most 10s (a pinned TLS 1.3 tunnel holds the server's flight that long)")
            } else {
                settings.wait = seconds
            }
        }
        if let n = f["mode"], let text = string(n, "proxy.keylog.mode") {
            if let mode = UInt32(text, radix: 8), text.count >= 3, text.count <= 4, mode <= 0o777 {
                if mode & 0o400 == 0 {
                    fail(n, "proxy.keylog.mode \(text) does not let pinproxy's own user read the file")
                } else if mode & 0o044 != 0 {
                    fail(n, "proxy.keylog.mode \(text) lets others read the file, and with it the TLS secrets of every client that writes it; give read to the owner only (e.g. 0622 or 0620)")
                } else {
                    settings.mode = mode
                }
            } else {
                fail(n, "proxy.keylog.mode must be octal permission bits such as \"0622\" or \"0620\", not '\(text)'")
            }
        }
        return settings
    }
}
