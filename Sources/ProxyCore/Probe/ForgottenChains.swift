import Foundation
import PinPolicy

/// When each host:port's cached probe chains were last forgotten, across every worker. Each worker
/// caches what its probes saw; a refusal or a caught interception on one worker means the chain
/// cached for that host:port no longer speaks for what the server shows (its key changed, or someone
/// answers for it), on any worker. Without this, the other worker admitted its next CONNECT on the
/// old chain, its mirror then met the new one, and a genuine key change looked like an interception.
///
/// A worker's cache consults this at every lookup, so the forgetting holds from the moment it is
/// noted (no message to wait for). Bounded: past `capacity` host:ports the oldest are dropped and
/// everything cached before them counts as forgotten (forgetting too much costs a probe, never a
/// wrong verdict).
final class ForgottenChains: @unchecked Sendable {
    /// What a cache entry is forgotten by: its SNI (or, with none, its one IP literal) and port.
    struct Target: Hashable {
        let serverName: String?
        let address: IPAddress?
        let port: UInt16

        init(_ authority: Authority) {
            switch authority.target {
            case .name(let name): (serverName, address) = (name, nil)
            case .ip(let ip): (serverName, address) = (nil, ip)
            }
            port = authority.port
        }

        init?(_ key: ProbeHub.Key) {
            if let name = key.serverName {
                (serverName, address) = (name, nil)
            } else if key.addresses.count == 1 {
                (serverName, address) = (nil, key.addresses[0])
            } else {
                return nil  // no authority forgets a key that names no one target
            }
            port = key.port
        }
    }

    private struct Book {
        var at: [Target: ContinuousClock.Instant] = [:]
        /// The forgets in the order they came (their instants rise: each is taken under the lock);
        /// a target forgotten again leaves a stale pair, skipped as it reaches the front.
        var order: [(target: Target, at: ContinuousClock.Instant)] = []
        var front = 0
        /// Everything stored up to here is forgotten (raised as old entries are dropped).
        var floor: ContinuousClock.Instant?

        /// Drops the oldest forget: what it covered, the floor covers now.
        mutating func dropOldest() {
            let oldest = order[front]
            front += 1
            if at[oldest.target] == oldest.at {
                at[oldest.target] = nil
                floor = oldest.at
            }
            if front > 64 && front * 2 > order.count {
                order.removeFirst(front)
                front = 0
            }
        }
    }

    private let book = Locked(Book())
    let capacity: Int
    /// A forget older than this covers nothing any cache still holds (no `verify_cache_ttl` is
    /// longer), so it goes.
    static let longestTTL: Duration = .seconds(24 * 3600)

    init(capacity: Int = 4096) { self.capacity = capacity }

    /// Every worker's chains cached for `authority` up to `now` are forgotten (`now` is the clock's,
    /// read under the lock, but for tests).
    func forget(_ authority: Authority, at time: ContinuousClock.Instant? = nil) {
        book.withLock { book in
            let now = time ?? .now
            let target = Target(authority)
            book.at[target] = now
            book.order.append((target, now))
            while book.front < book.order.count, book.at.count > capacity || now - book.order[book.front].at > Self.longestTTL {
                book.dropOldest()
            }
        }
    }

    /// Whether a chain cached for `key` at `stored` was forgotten since.
    func isForgotten(_ key: ProbeHub.Key, storedAt stored: ContinuousClock.Instant) -> Bool {
        book.withLock { book in
            if let floor = book.floor, stored <= floor { return true }
            guard let target = Target(key), let forgotten = book.at[target] else { return false }
            return stored <= forgotten
        }
    }

    /// Host:ports noted (for tests).
    var count: Int { book.withLock { $0.at.count } }
}
