import Foundation

/// Bytes that must not outlive their use: a TLS secret from a client's key log, or a key derived
/// from one. The bytes live in memory this type allocated itself (never in a copy-on-write array
/// that may be copied behind our back), and are overwritten with zeros when the owner lets go.
/// Never printed: `description` names only the length.
public final class SecretBytes: @unchecked Sendable, CustomStringConvertible {
    private let storage: UnsafeMutableRawBufferPointer

    /// Takes the bytes of `source`; the caller wipes its own copy.
    public init(copying source: UnsafeRawBufferPointer) {
        storage = .allocate(byteCount: max(source.count, 1), alignment: 16)
        storage.copyMemory(from: source)
        count = source.count
    }

    /// `count` bytes, filled by `fill` (e.g. a key derivation writing its output in place).
    public init(count: Int, fill: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        storage = .allocate(byteCount: max(count, 1), alignment: 16)
        self.count = count
        do {
            try fill(UnsafeMutableRawBufferPointer(rebasing: storage[0..<count]))
        } catch {
            explicit_bzero(storage.baseAddress!, storage.count)
            storage.deallocate()
            throw error
        }
    }

    public let count: Int

    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<count]))
    }

    /// Same length and same bytes, compared in time independent of where they differ.
    public func matches(_ other: SecretBytes) -> Bool {
        guard count == other.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<count { difference |= storage[index] ^ other.storage[index] }
        return difference == 0
    }

    public var description: String { "SecretBytes(\(count) bytes)" }

    deinit {
        explicit_bzero(storage.baseAddress!, storage.count)
        storage.deallocate()
    }
}
