import PinPolicy

/// The connections a worker accepted whose request head has not arrived yet, oldest first, and
/// which of them to close when there are too many.
///
/// A flood of connections that never speak must not take the descriptors real clients need. Like
/// nginx and HAProxy, pinproxy sheds the idlest unauthenticated connections first: past `limit`,
/// each arrival closes the oldest silent connection; and one client — an address, every loopback
/// address counting as one (any local process may bind any of 127.0.0.0/8), an IPv6 /64 — may hold
/// at most half of the limit, past which its own oldest go first. A real client sends its request
/// within milliseconds of connecting, so it is not the oldest while a flood goes on; before a
/// connection is closed the worker says what it is doing (`Activity`): one whose bytes are arriving
/// is spared, and one that has sent part of its head (a slow client) goes only after every one that
/// has sent nothing. Connections that have spoken are not counted here: the
/// descriptors outside this limit are their reserve.
///
/// A pure value: the worker feeds it arrivals and departures and closes what it names.
struct SilentConnections {
    /// Who a connection counts against.
    struct Client: Hashable {
        let key: [UInt8]

        init(_ address: IPAddress) {
            let address = address.unmapped
            let loopback = address.isIPv4 ? address.bytes[0] == 127 : address.bytes == Array(repeating: 0, count: 15) + [1]
            if loopback {
                key = []
            } else if address.isIPv4 {
                key = address.bytes
            } else {
                key = Array(address.bytes.prefix(8))  // one /64: what one IPv6 host is usually given
            }
        }
    }

    private(set) var limit: Int
    /// Ids in arrival order; those that left are skipped (and dropped when they outnumber the rest).
    private var order: [Int] = []
    private var head = 0
    private var members: [Int: Client] = [:]
    private var held: [Client: Int] = [:]

    init(limit: Int) {
        precondition(limit > 0, "a limit of \(limit) silent connections")
        self.limit = limit
    }

    var count: Int { members.count }
    /// What one client may hold.
    var perClientLimit: Int { max(1, limit / 2) }
    /// Ids kept in the arrival order, live or not (bounded: see `compact`).
    var storedIds: Int { order.count - head }

    /// The limit follows the descriptor limit, which an operator may change while pinproxy runs.
    /// Lowering it closes nothing at once: the next arrivals do.
    mutating func setLimit(_ limit: Int) {
        precondition(limit > 0, "a limit of \(limit) silent connections")
        self.limit = limit
    }

    /// What a silent connection is doing, as the worker sees it when one must go.
    enum Activity {
        /// Nothing sent (or already answered, a refusal lingering): closed first.
        case idle
        /// Part of a head read, the rest still to come: closed only when no idle one is left.
        case trickling
        /// Bytes waiting in the kernel, about to be read (maybe a real client's CONNECT): spared.
        case arriving
    }

    /// A connection accepted from `address`. Returns the ids to close now to stay within the limits:
    /// from a client over its share, else from all, the oldest idle connection, else the oldest
    /// trickling one — never `id` itself (the newest is the one most likely to be a real client
    /// about to speak), never one that is `arriving` (it stays in the book until it has spoken).
    mutating func arrived(_ id: Int, from address: IPAddress, activity: (Int) -> Activity) -> [Int] {
        let client = Client(address)
        members[id] = client
        held[client, default: 0] += 1
        order.append(id)
        var victims: [Int] = []
        var spared: Set<Int> = [id]
        var trickling: [Int] = []
        while members.count > limit || held[client, default: 0] > perClientLimit {
            let overShare = held[client, default: 0] > perClientLimit
            let candidate = oldest(of: overShare ? client : nil, sparing: spared)
            if let candidate {
                spared.insert(candidate)
                switch activity(candidate) {
                case .idle:
                    left(candidate)
                    victims.append(candidate)
                case .trickling:
                    trickling.append(candidate)
                case .arriving:
                    break
                }
            } else if let victim = trickling.first(where: { !overShare || members[$0] == client }) {
                trickling.removeAll { $0 == victim }
                left(victim)
                victims.append(victim)
            } else {
                break
            }
        }
        return victims
    }

    /// The connection sent its request head, or closed: it is no longer silent.
    mutating func left(_ id: Int) {
        guard let client = members.removeValue(forKey: id) else { return }
        held[client]! -= 1
        if held[client] == 0 { held[client] = nil }
        compact()
    }

    /// Whether `id` is still waiting for its request head.
    func contains(_ id: Int) -> Bool { members[id] != nil }

    /// The oldest member (of `client`, when given) not in `spared`. Over its share, a client holds
    /// more than half of all members, so its oldest is near the front.
    private func oldest(of client: Client?, sparing spared: Set<Int>) -> Int? {
        order[head...].first { id in
            !spared.contains(id) && members[id].map { client == nil || $0 == client } == true
        }
    }

    /// Drops the ids that left from the front, and rebuilds the order when those that left
    /// outnumber those still in it: the storage stays within twice the members (plus a little).
    private mutating func compact() {
        while head < order.count, members[order[head]] == nil { head += 1 }
        if storedIds > 2 * members.count + 64 {
            order = order[head...].filter { members[$0] != nil }
            head = 0
        } else if head > 64 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
