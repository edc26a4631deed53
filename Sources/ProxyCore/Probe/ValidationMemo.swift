import Foundation
import PinPolicy

/// Chain validations a snapshot has already done, for byte-identical chains: a warm CONNECT (its
/// probe's chain from the verification cache) and a TLS 1.2 stream check that sees the same chain
/// would otherwise verify every signature again, which was 43 % of a warm CONNECT's CPU.
///
/// What is kept is the validation (the chain's facts under this snapshot's trust), never a verdict:
/// every CONNECT still evaluates its rule, its pins and its mode on it. Only successes are kept, for
/// at most `verify_cache_ttl` and never past the earliest `notAfter` in the chain. The key is the
/// presented certificates' DER bytes themselves (compared whole, so no two chains can share an
/// entry), the target name, the trust and, for `pins-only`, the anchors. A reload makes a new
/// snapshot and so a new, empty memo. Worker threads share a snapshot, hence the lock.
final class ValidationMemo: @unchecked Sendable {
    struct Key: Hashable {
        let chain: [[UInt8]]
        let target: Target
        let trust: Trust
        let anchors: [Pin]?

        /// The chain's bytes hashed in bulk (the synthesized hash feeds them one byte at a time,
        /// which was most of a warm CONNECT's memo lookup).
        func hash(into hasher: inout Hasher) {
            hasher.combine(chain.count)
            for der in chain { hasher.combine(bytesOf: der) }
            hasher.combine(target)
            hasher.combine(trust)
            hasher.combine(anchors)
        }
    }

    private struct Entry {
        let validation: ChainValidation
        let until: ContinuousClock.Instant
        let notAfter: Date
    }

    private let lock = NSLock()
    private var entries: [Key: Entry] = [:]
    private var hitCount = 0
    let capacity: Int

    init(capacity: Int = 256) { self.capacity = capacity }

    /// How many validations were answered from the memo (for the tests).
    var hits: Int { lock.withLock { hitCount } }
    var count: Int { lock.withLock { entries.count } }

    func lookup(_ key: Key, now: ContinuousClock.Instant, date: Date) -> ChainValidation? {
        lock.withLock {
            guard let entry = entries[key] else { return nil }
            guard now < entry.until && date < entry.notAfter else {
                entries[key] = nil
                return nil
            }
            hitCount += 1
            return entry.validation
        }
    }

    /// Keeps a verified chain for `ttl` seconds (never past its earliest `notAfter`); failures are
    /// not kept.
    func store(_ validation: ChainValidation, for key: Key, ttl: Double, now: ContinuousClock.Instant) {
        guard ttl > 0, case .verified(let chain) = validation,
              let notAfter = chain.certificates.map(\.facts.notAfter).min() else { return }
        let entry = Entry(validation: validation, until: now + .milliseconds(Int(ttl * 1000)), notAfter: notAfter)
        lock.withLock {
            if entries[key] == nil && entries.count >= capacity {
                entries = entries.filter { now < $0.value.until }
                if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            }
            entries[key] = entry
        }
    }
}
