/// A worker's pinned tunnels whose clients have not sent their ClientHello since the `200`, oldest
/// first: the ones to close when a newer CONNECT needs the room they hold (a `max_tunnels` slot,
/// mirror connections). Kept apart from the book of silent connections so that a reclaim finds
/// them however many other silent connections are older.
///
/// A pure value: the worker feeds it arrivals and departures.
struct HelloWaiters {
    /// Ids in arrival order, with those that left skipped (and dropped as they reach the front, or
    /// when they outnumber the rest).
    private var order: [Int] = []
    private var head = 0
    private var members: [Int: SilentConnections.Client] = [:]

    var count: Int { members.count }

    mutating func arrived(_ id: Int, client: SilentConnections.Client) {
        guard members.updateValue(client, forKey: id) == nil else { return }
        order.append(id)
    }

    mutating func left(_ id: Int) {
        guard members.removeValue(forKey: id) != nil else { return }
        while head < order.count, members[order[head]] == nil { head += 1 }
        if order.count - head > 2 * members.count + 64 {
            order = order[head...].filter { members[$0] != nil }
            head = 0
        } else if head > 64 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }

    /// The oldest, of `client` when given.
    func oldest(of client: SilentConnections.Client? = nil) -> Int? {
        for id in order[head...] {
            guard let member = members[id] else { continue }
            if client == nil || member == client { return id }
        }
        return nil
    }
}
