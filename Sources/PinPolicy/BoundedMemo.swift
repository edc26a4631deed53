import Foundation

/// At most `capacity` values by key, emptied when full rather than ordered (the next few tunnels
/// refill it); shared by the worker threads behind one lock. What a memo keeps must be what making
/// it again would give: it saves work, it never stands in for a judgement. The parsed TLS 1.3
/// leaves and the checked SCTs are kept in one.
public final class BoundedMemo<Key: Hashable, Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var values: [Key: Value] = [:]
    public let capacity: Int

    public init(capacity: Int) { self.capacity = capacity }

    /// The value kept for `key`, else `make()`'s, kept unless it is nil. `make` runs outside the
    /// lock: two threads may make the same value at once, and the second one is kept.
    public func value(for key: Key, orMakeIfAny make: () -> Value?) -> Value? {
        if let known = lock.withLock({ values[key] }) { return known }
        guard let made = make() else { return nil }
        lock.withLock {
            if values[key] == nil && values.count >= capacity { values.removeAll(keepingCapacity: true) }
            values[key] = made
        }
        return made
    }

    /// The value kept for `key`, else `make()`'s, kept.
    public func value(for key: Key, orMake make: () -> Value) -> Value {
        value(for: key, orMakeIfAny: { make() })!
    }

    public var count: Int { lock.withLock { values.count } }
}
