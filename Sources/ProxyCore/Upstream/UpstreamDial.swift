import PinPolicy

/// Dials a tunnel's upstream and, for a pinned rule with mirror checks, its mirror connections in
/// the same turn, the tunnel's at a random place among them: an interceptor sees look-alike
/// connections arrive together and cannot tell which is the tunnel's by its order. Behind a parent
/// proxy every connection is a CONNECT on the parent, like the probe's was.
///
/// Ready only once the mirrors have settled too: an interceptor that completed one connect and
/// held the others would otherwise learn from the client's hello which was the tunnel's.
final class UpstreamDial {
    /// The tunnel's upstream, connected, with the mirror connections made beside it.
    struct Dialled {
        let upstream: BufferEvent
        let address: SocketAddress
        let mirrors: [MirrorConnection]

        func close() {
            for mirror in mirrors { mirror.close() }
        }
    }

    enum Outcome {
        case ready(Dialled)
        case failed(Refusal)
    }

    private let loop: EventLoop
    private var connector: Connector?
    private var mirrors: [MirrorConnection] = []
    private var upstream: (side: BufferEvent, address: SocketAddress)?
    private var completion: ((Outcome) -> Void)?

    /// Starts at once; `completion` may run inside this call (a connect that fails at once).
    /// `ticket` gives each mirror its share of the worker's mirror budget.
    init(loop: EventLoop, to authority: Authority, at addresses: [IPAddress], settings: ProxySettings, mirrors mirrorCount: Int,
         ticket: () -> MirrorBudget.Ticket, completion: @escaping (Outcome) -> Void) {
        self.loop = loop
        self.completion = completion
        let hop = settings.upstreamProxy.map { ParentHop(parent: $0, target: authority) }
        let dialled = hop.map { [$0.parent.address] } ?? addresses.map { SocketAddress(ip: $0, port: authority.port) }
        // One address of the server's: its own connect timeout; several, or the parent's CONNECT: the total.
        let perAddress = settings.connectTimeout
        let deadline = hop == nil && addresses.count == 1 ? settings.connectTimeout : settings.connectTotalTimeout
        let tunnelAt = Int.random(in: 0...mirrorCount)
        for index in 0...mirrorCount {
            guard index == tunnelAt else {
                let mirror = MirrorConnection(loop: loop, addresses: dialled, perAddress: perAddress, total: deadline, through: hop)
                if mirror.ended == nil { mirror.ticket = ticket() }  // not one that failed at once
                mirrors.append(mirror)
                continue
            }
            connector = Connector(loop: loop, addresses: dialled, perAddress: perAddress, total: deadline, through: hop) { [weak self] outcome in
                guard let self else { return }
                switch outcome {
                case .failed(let refusal): end(.failed(refusal))
                case .connected(let fd, let address): connected(fd: fd, address: address)
                }
            }
        }
    }

    /// Stops without calling back, and closes what was dialled.
    func cancel() {
        completion = nil
        connector?.cancel()
        upstream = nil
        for mirror in mirrors { mirror.close() }
        mirrors = []
    }

    private func connected(fd: Int32, address: SocketAddress) {
        guard let side = BufferEvent(loop: loop, socket: fd) else {
            return end(.failed(.internalError("bufferevent_socket_new failed")))
        }
        upstream = (side, address)
        let waiting = mirrors.filter { !$0.settled }
        guard waiting.isEmpty else {
            for mirror in waiting { mirror.onSettled = { [weak self] in self?.mirrorSettled() } }
            return
        }
        ready()
    }

    private func mirrorSettled() {
        guard upstream != nil, mirrors.allSatisfy(\.settled) else { return }
        ready()
    }

    private func ready() {
        guard let upstream else { return }
        let dialled = Dialled(upstream: upstream.side, address: upstream.address, mirrors: mirrors)
        self.upstream = nil
        mirrors = []
        end(.ready(dialled))
    }

    private func end(_ outcome: Outcome) {
        guard let completion else { return }
        self.completion = nil
        completion(outcome)
    }
}
