import CLibevent
import Foundation

/// `malloc_trim` for every worker, one at a time: glibc sets its arenas up on first use, and two
/// threads making that first call at once (which is what happens when the allocator is a
/// sanitizer's and glibc's malloc was never called) read a half-made arena list — ThreadSanitizer
/// caught the SEGV. The proxy calls it once on the main thread before the workers start.
enum MemoryTrim {
    private static let lock = NSLock()

    static func run() {
        lock.withLock { _ = malloc_trim(0) }
    }
}
