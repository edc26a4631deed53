import Foundation

/// A value shared by threads (the loop and the writer thread; the tests' process books), behind a
/// pthread mutex (NSLock). Not `Synchronization.Mutex`: its lock lives in a library ThreadSanitizer
/// cannot see, so TSan reported every access as a race; this lock it checks.
public final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    public init(_ value: Value) { self.value = value }

    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
