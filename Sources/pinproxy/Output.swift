import PinPolicy

#if canImport(Glibc)
import Glibc
#endif

/// stdout carries the output of `check` and `pin`; stderr carries diagnostics and logs.
/// (The C `stdout`/`stderr` globals are not concurrency-safe in Swift 6, so we write to the fds.)
enum Output {
    static func out(_ text: String) { write(1, text + "\n") }
    static func err(_ text: String) { write(2, text + "\n") }

    /// `file:line:column: error: message`, one line each, the form editors and CI annotate; an error
    /// about the file as a whole (it cannot be read) has no position: `file: error: message`.
    static func loadErrors(_ error: PolicyLoadError) {
        for e in error.errors {
            err(e.line == 0 && e.column == 0 ? "\(e.file): error: \(e.message)" : "\(e.file):\(e.line):\(e.column): error: \(e.message)")
        }
    }

    /// Lines for stdout, written a block at a time (`pin --import` writes millions); `flush` writes
    /// what is left.
    final class Lines {
        private var pending = ""
        func append(_ line: String) {
            pending += line
            pending += "\n"
            if pending.utf8.count >= 1 << 16 { flush() }
        }

        func flush() {
            write(1, pending)
            pending = ""
        }
    }

    private static func write(_ fd: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.write(fd, $0.baseAddress! + offset, $0.count - offset) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return }
            offset += n
        }
        bytes.removeAll()
    }
}
