import PinPolicy

/// The connections a worker accepted whose first request head has not arrived yet, oldest first,
/// and which of them to close when there are too many.
///
/// A flood of connections that never speak must not take the descriptors real clients need. Like
/// nginx and HAProxy, pinproxy sheds the idlest unauthenticated connections first: past `limit`,
/// each arrival closes the oldest silent connection of the client address that holds the most. A
/// real client sends its request within milliseconds of connecting, so it is never the oldest while
/// a flood goes on; on loopback, where every local process shares 127.0.0.1, "the address that holds
/// the most" is everyone and the rule is simply oldest first. Connections that have spoken (a CONNECT
/// in progress, a tunnel) are never counted here: the descriptors outside this limit are their
/// reserve.
///
/// A pure value: the worker feeds it arrivals and departures and closes what it names.
struct SilentConnections {
    /// One address's silent connections in arrival order. Ids that left are skipped lazily.
    private struct Queue {
        var ids: [Int] = []
        var head = 0
        var live = 0
    }

    private(set) var limit: Int
    private var queues: [IPAddress: Queue] = [:]
    /// Every silent connection and its address.
    private var members: [Int: IPAddress] = [:]

    init(limit: Int) {
        precondition(limit > 0, "a limit of \(limit) silent connections")
        self.limit = limit
    }

    var count: Int { members.count }

    /// The limit follows the descriptor limit, which an operator may change while pinproxy runs.
    /// Lowering it closes nothing at once: the next arrivals do.
    mutating func setLimit(_ limit: Int) {
        precondition(limit > 0, "a limit of \(limit) silent connections")
        self.limit = limit
    }

    /// A connection accepted from `address`. Returns the ids to close now to stay within the limit
    /// (never `id` itself: the newest is the one most likely to be a real client about to speak).
    mutating func arrived(_ id: Int, from address: IPAddress) -> [Int] {
        members[id] = address
        queues[address, default: Queue()].ids.append(id)
        queues[address]!.live += 1
        var victims: [Int] = []
        while members.count > limit, let victim = oldestOfBusiestAddress(sparing: id) {
            victims.append(victim)
            left(victim)
        }
        return victims
    }

    /// The connection sent its request head, or closed: it is no longer silent.
    mutating func left(_ id: Int) {
        guard let address = members.removeValue(forKey: id), var queue = queues.removeValue(forKey: address) else { return }
        queue.live -= 1
        guard queue.live > 0 else { return }
        // Ids before the first live one are gone for good: skip them, and compact now and then so
        // the array does not grow with every connection ever accepted.
        while members[queue.ids[queue.head]] == nil { queue.head += 1 }
        if queue.head > 32 && queue.head * 2 > queue.ids.count {
            queue.ids.removeFirst(queue.head)
            queue.head = 0
        }
        queues[address] = queue
    }

    /// Whether `id` is still waiting for its first request head.
    func contains(_ id: Int) -> Bool { members[id] != nil }

    /// The oldest silent connection of the address holding the most, `spared` not counted.
    /// Linear in the number of addresses: on loopback there is one; behind `allow_clients` ranges,
    /// at most `limit`.
    private func oldestOfBusiestAddress(sparing spared: Int) -> Int? {
        let sparedAddress = members[spared]
        func holding(_ entry: (key: IPAddress, value: Queue)) -> Int { entry.value.live - (entry.key == sparedAddress ? 1 : 0) }
        guard let busiest = queues.max(by: { holding($0) < holding($1) }), holding(busiest) > 0 else { return nil }
        let queue = busiest.value
        return queue.ids[queue.head...].first { $0 != spared && members[$0] != nil }
    }
}
