import Foundation

/// A value shared by the loop and the writer thread, behind a pthread mutex (NSLock). Not
/// `Synchronization.Mutex`: its lock lives in a library ThreadSanitizer cannot see, so TSan reported
/// every access as a race; this lock it checks.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) { self.value = value }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
