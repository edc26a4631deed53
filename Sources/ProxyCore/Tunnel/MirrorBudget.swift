import PinPolicy

/// The mirror connections one worker's pinned tunnels hold, by client and in all. Each costs a
/// descriptor and the server a handshake, from the CONNECT through the connect, the wait for the
/// client's hello (`client_hello_timeout`) and the server's answer (`probe_timeout`); a client that
/// makes CONNECTs faster than the servers answer them must not take everyone's.
/// A quarter of the descriptor limit, shared out over the workers (the same share as silent
/// connections), and one client — as `SilentConnections` counts clients — at most half of it.
///
/// A CONNECT that needs more than is left first has the worker close its oldest tunnels still
/// without a ClientHello (they hold mirrors for nothing); then it is refused `503` with
/// `reason=mirror_limit_reached`.
///
/// Bound to its worker's loop thread.
final class MirrorBudget {
    private(set) var limit: Int
    private(set) var total = 0
    private var held: [SilentConnections.Client: Int] = [:]

    init(limit: Int) { self.limit = max(2, limit) }

    /// The limit follows the descriptor limit (see `Worker.silentLimit`).
    func setLimit(_ limit: Int) { self.limit = max(2, limit) }

    var perClientLimit: Int { max(1, limit / 2) }

    /// What `count` more mirrors for `client` would exceed; nil when they fit.
    func shortfall(_ count: Int, for client: SilentConnections.Client) -> Shortfall? {
        if held[client, default: 0] + count > perClientLimit { return .client(held: held[client, default: 0]) }
        if total + count > limit { return .all }
        return nil
    }

    enum Shortfall: Equatable {
        /// The client holds `held` of its share.
        case client(held: Int)
        case all
    }

    /// One mirror connection's share, given back when the connection ends (`MirrorConnection`).
    func take(for client: SilentConnections.Client) -> Ticket {
        total += 1
        held[client, default: 0] += 1
        return Ticket(budget: self, client: client)
    }

    fileprivate func giveBack(_ client: SilentConnections.Client) {
        total -= 1
        held[client, default: 0] -= 1
        if held[client] == 0 { held[client] = nil }
    }

    /// Held by a mirror connection for as long as its descriptor is open.
    final class Ticket {
        private weak var budget: MirrorBudget?
        private let client: SilentConnections.Client

        fileprivate init(budget: MirrorBudget, client: SilentConnections.Client) {
            self.budget = budget
            self.client = client
        }

        deinit { budget?.giveBack(client) }
    }
}

@available(*, unavailable) extension MirrorBudget: Sendable {}
