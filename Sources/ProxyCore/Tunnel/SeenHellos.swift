import Foundation

/// The randoms of the ClientHellos pinned tunnels carried lately, across every worker. A client
/// makes a fresh 32-byte random for each connection (RFC 8446 §4.1.2), so a hello whose random an
/// earlier tunnel carried was captured and sent again: a program that replays one canned hello
/// needs no cryptography of its own, and each replay would cost the server one handshake per look.
/// It is refused before any mirror is sent.
///
/// A second hello after a HelloRetryRequest repeats the first one's random inside the same tunnel;
/// only the first hello of a tunnel is noted here, so that is never a replay.
///
/// Bounded: the last `capacity` randoms, each kept as a 64-bit keyed hash (Swift's hasher is seeded
/// per process, so no one can choose randoms that collide with another client's). A replay older
/// than that many tunnels passes as a new hello: it then costs what a fresh hello costs.
final class SeenHellos: @unchecked Sendable {
    private struct Ring {
        var members: Set<Int> = []
        var order: [Int] = []
        var next = 0
    }

    private let ring = Locked(Ring())
    let capacity: Int

    init(capacity: Int = 65_536) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    /// Notes `random`; false when it was already noted (a replay).
    func note(_ random: [UInt8]) -> Bool {
        var hasher = Hasher()
        hasher.combine(bytesOf: random)
        let key = hasher.finalize()
        return ring.withLock { ring in
            guard ring.members.insert(key).inserted else { return false }
            if ring.order.count < capacity {
                ring.order.append(key)
            } else {
                ring.members.remove(ring.order[ring.next])
                ring.order[ring.next] = key
                ring.next = (ring.next + 1) % capacity
            }
            return true
        }
    }
}
