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
/// is spared, one already answered goes only after every one that has sent nothing, one that
/// has sent part of its head (a slow client) only after those, and a pinned tunnel still without
/// its client's hello last. Connections that have spoken are not counted here: the
/// descriptors outside this limit are their reserve.
///
/// A pinned tunnel whose client has not sent its ClientHello since its `200` is silent again, and
/// heavier: it holds the client's descriptor, the tunnel's upstream connection and its mirror
/// connections. It is counted here by what it holds (`weight`), so a flood of CONNECTs that never
/// send a hello is shed like a flood of connections that never send a CONNECT.
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
    /// Arrivals in order; those that left (or arrived again later: a tunnel silent again after
    /// its CONNECT) are skipped, and dropped when they outnumber the rest.
    private var order: [(id: Int, serial: Int)] = []
    private var head = 0
    private var members: [Int: Member] = [:]
    private var serials = 0
    private struct Member {
        let client: Client
        let weight: Int
        /// Which arrival in `order` is this member's.
        let serial: Int
    }
    /// Descriptors held, by client and in all.
    private var held: [Client: Int] = [:]
    private(set) var weight = 0

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
    enum Activity: Int, Comparable {
        /// Nothing sent: closed first.
        case idle
        /// Already answered (a 408, a TLS alert, a refusal lingering while it is written): next.
        case answered
        /// Part of a head read, the rest still to come (a slow client): only when none of the above
        /// is left.
        case trickling
        /// A pinned tunnel the policy let through, its `200` sent, still without its client's
        /// ClientHello (or with part of it): after every connection that asked for nothing, was
        /// refused or trickles a head (a flood that sends each connection one byte). A real client
        /// takes milliseconds to send its hello, and a flood of connections that never speak turns a
        /// small book over in fewer (measured under 1,024 descriptors: a real tunnel shed in that
        /// moment, curl's "SSL connect error").
        case awaitingHello
        /// Bytes waiting in the kernel, about to be read (maybe a real client's CONNECT): spared.
        case arriving

        static func < (a: Activity, b: Activity) -> Bool { a.rawValue < b.rawValue }
    }

    /// A connection accepted from `address`. Returns the ids to close now to stay within the limits:
    /// from a client over its share, else from all, the oldest idle connection, else the oldest
    /// answered one, else the oldest trickling one, else the oldest tunnel awaiting its hello —
    /// never `id` itself (the newest is the one most
    /// likely to be a real client about to speak), never one that is `arriving` (it stays in the
    /// book until it has spoken).
    mutating func arrived(_ id: Int, from address: IPAddress, weight: Int = 1, activity: (Int) -> Activity) -> [Int] {
        let client = Client(address)
        // One member never outweighs a client's share: under a tiny descriptor limit a tunnel with
        // many mirrors would otherwise close every other connection of its client as it arrived.
        let weight = min(weight, perClientLimit)
        left(id)
        serials += 1
        members[id] = Member(client: client, weight: weight, serial: serials)
        held[client, default: 0] += weight
        self.weight += weight
        order.append((id, serials))
        var victims: [Int] = []
        var seen: [Int: Activity] = [:]  // each asked once: asking may be a system call
        func activityOf(_ id: Int) -> Activity {
            if let known = seen[id] { return known }
            let now = activity(id)
            seen[id] = now
            return now
        }
        while self.weight > limit || held[client, default: 0] > perClientLimit {
            let overShare = held[client, default: 0] > perClientLimit
            guard let victim = idlest(of: overShare ? client : nil, sparing: id, activity: activityOf) else { break }
            left(victim)
            victims.append(victim)
        }
        return victims
    }

    /// The connection sent its request head, or closed: it is no longer silent.
    mutating func left(_ id: Int) {
        guard let member = members.removeValue(forKey: id) else { return }
        held[member.client]! -= member.weight
        weight -= member.weight
        if held[member.client] == 0 { held[member.client] = nil }
        compact()
    }

    /// Whether `id` is still waiting for its request head.
    func contains(_ id: Int) -> Bool { members[id] != nil }

    /// How many of the oldest candidates are looked at for the idlest: a flood is met with a
    /// bounded cost per arrival (asking what a connection does may be a system call).
    static let window = 64

    /// Among the oldest `window` members (of `client`, when given, never `spared`), the oldest of the
    /// idlest kind; nil when all of them are arriving. Over its share, a client holds more than half
    /// of all members, so its oldest are near the front; an idle one ends the scan at once.
    private func idlest(of client: Client?, sparing spared: Int, activity: (Int) -> Activity) -> Int? {
        var best: (id: Int, activity: Activity)?
        var looked = 0
        for (id, serial) in order[head...] where id != spared && isLive(id, serial) {
            guard let member = members[id], client == nil || member.client == client else { continue }
            let now = activity(id)
            if now == .idle { return id }
            if now != .arriving, best.map({ now < $0.activity }) ?? true { best = (id, now) }
            looked += 1
            if looked == Self.window { break }
        }
        return best?.id
    }

    private func isLive(_ id: Int, _ serial: Int) -> Bool { members[id]?.serial == serial }

    /// Drops the ids that left from the front, and rebuilds the order when those that left
    /// outnumber those still in it: the storage stays within twice the members (plus a little).
    private mutating func compact() {
        while head < order.count, !isLive(order[head].id, order[head].serial) { head += 1 }
        if storedIds > 2 * members.count + 64 {
            order = order[head...].filter { isLive($0.id, $0.serial) }
            head = 0
        } else if head > 64 && head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
