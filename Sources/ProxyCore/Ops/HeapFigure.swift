import CShims
import Foundation

/// `PINPROXY_TEST_HEAP=1` (debug builds only, like `TestFault`) adds `heap_bytes` — what the
/// allocator has handed out and not got back, to the byte (glibc's `mallinfo2().uordblks`) — to
/// the `stats` line, so a test can measure what a held tunnel costs in a process of its own. RSS
/// cannot: freed memory stays resident, and a tunnel's few KiB land in pages already resident.
enum HeapFigure {
    static let isOn: Bool = {
        #if DEBUG
        return ProcessInfo.processInfo.environment["PINPROXY_TEST_HEAP"] == "1"
        #else
        return false
        #endif
    }()

    /// The `heap_bytes` field, when the tests asked for it.
    static var field: (String, LogValue)? {
        isOn ? ("heap_bytes", .int(Int(pp_heap_in_use()))) : nil
    }
}
