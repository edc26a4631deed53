import Foundation
import PinPolicy
import TLSInspection

/// The life of one CONNECT as values: the stage it is in and what it knows there. Each event is a
/// method that moves it and returns what the session must do; an event that cannot happen in the
/// current state is a programming error and traps. No I/O: tests drive it without sockets.
///
/// readingRequest → resolving → probing → connecting → relaying → closed, with `lingering` (a
/// refusal being written) and `closed` reachable from every stage before it.
struct SessionMachine {
    enum State {
        case readingRequest
        case resolving(AskedConnect, AdmissionBasis)
        /// A pinned CONNECT's probe, whose chain is judged under this rule.
        case probing(AskedConnect, Rule)
        case connecting(AskedConnect, Passage)
        case relaying(AskedConnect, Passage, address: SocketAddress)
        /// Forwarding plain-HTTP requests (`PlainForwarder` judges each one).
        case forwarding
        case lingering
        case closed
    }

    enum Action {
        /// Not a CONNECT pinproxy accepts: log `request_rejected`, answer, linger.
        case reject(Refusal, DecisionRecord)
        /// A CONNECT refused: log `tunnel_refused`, answer, linger.
        case refuse(Refusal, DecisionRecord)
        /// Resolve this name with evdns.
        case lookUp(String)
        /// Probe these addresses in order.
        case probe(ProbeHub.Key)
        /// Open the tunnel's TCP connection to the first of these that accepts.
        case connect([IPAddress])
        /// Answer 200, log the decision, relay.
        case open(DecisionRecord, TunnelDecision)
        /// The session is over: log `tunnel_closed` with what was known (the decision, once open).
        case close(CloseReason, DecisionRecord)
        /// Hand the connection to a plain-HTTP forwarder, starting with this request head.
        case forward([UInt8])
        /// A plain-HTTP request refused (the forwarder logged it): answer, linger.
        case answer(Refusal)
        /// The plain-HTTP connection is over: let go (each request had its own line).
        case release
        /// Nothing to do (the session already ended).
        case none
    }

    let conn: Int
    let client: SocketAddress
    /// Whether an address is one pinproxy itself listens on (a CONNECT there is a loop).
    private let isOwnAddress: (SocketAddress) -> Bool
    /// Transparent mode: the connection's original destination (TransparentOrigin); nil for the proxy port.
    let original: SocketAddress?
    private(set) var state = State.readingRequest

    init(conn: Int, client: SocketAddress, original: SocketAddress? = nil, isOwnAddress: @escaping (SocketAddress) -> Bool) {
        self.conn = conn
        self.client = client
        self.original = original
        self.isOwnAddress = isOwnAddress
    }

    /// Whether this session counts against `max_tunnels` now (admitted, not yet over).
    var holdsTunnelSlot: Bool {
        switch state {
        case .resolving, .probing, .connecting, .relaying: return true
        case .readingRequest, .forwarding, .lingering, .closed: return false
        }
    }

    /// What this CONNECT asked for and the snapshot it is judged by, once it is admitted.
    var admitted: AskedConnect? {
        switch state {
        case .resolving(let a, _), .probing(let a, _), .connecting(let a, _), .relaying(let a, _, _): return a
        case .readingRequest, .forwarding, .lingering, .closed: return nil
        }
    }

    var isRelaying: Bool {
        if case .relaying = state { return true }
        return false
    }

    // MARK: events

    /// A request head that is not a CONNECT: plain HTTP, judged request by request by the forwarder.
    mutating func plainRequest(_ head: [UInt8]) -> Action {
        guard case .readingRequest = state else { preconditionFailure("plain request in \(state)") }
        state = .forwarding
        return .forward(head)
    }

    /// The forwarder refused a plain-HTTP request: the connection ends with that answer.
    mutating func plainRefused(_ refusal: Refusal) -> Action {
        guard case .forwarding = state else { preconditionFailure("plain refusal in \(state)") }
        state = .lingering
        return .answer(refusal)
    }

    /// The request head did not parse, or did not arrive in time.
    mutating func requestRejected(_ refusal: Refusal) -> Action {
        guard case .readingRequest = state else { preconditionFailure("request rejected in \(state)") }
        state = .lingering
        return .reject(refusal, record(.requested))
    }

    /// A CONNECT arrived. The policy's refusals come before the tunnel cap: a CONNECT it refuses is
    /// a 403 whatever the load, and only one that may open a tunnel takes a slot.
    mutating func requestParsed(_ authority: Authority, snapshot: PolicySnapshot, stopping: Bool, tunnelAvailable: Bool) -> Action {
        guard case .readingRequest = state else { preconditionFailure("request parsed in \(state)") }
        let admitted = AskedConnect(authority: authority, snapshot: snapshot, original: original)
        if stopping { return refuse(.shuttingDown, record(.asked(admitted))) }
        let policy = snapshot.policy
        let basis: AdmissionBasis
        switch AdmissionGate.admit(authority, client: client.ip, policy: policy, kind: .connect) {
        case .refused(let cause): return refuse(cause.refusal, record(.asked(admitted)))
        case .unpinned(let unpinned, let rule): basis = .unpinned(unpinned, rule: rule)
        case .probe(let rule): basis = .pinned(rule)
        }
        guard tunnelAvailable else { return refuse(.tunnelLimit, record(.admitted(admitted, basis))) }
        state = .resolving(admitted, basis)
        switch authority.target {
        case .ip(let ip):
            return addressesKnown([ip])
        case .name(let name):
            // Transparent mode: the client chose the address; the pins decide whether it is the server.
            if let original { return addressesKnown([original.ip]) }
            // Behind a parent proxy, the parent resolves names (deny_destinations then applies to
            // IP-literal targets only: pinproxy never learns the address).
            if let parent = policy.proxy.upstreamProxy { return throughParent(admitted, basis, ParentHop(parent: parent, target: authority)) }
            if TestFault.dns.isInjected { return resolved(.failure(.failed(TestFault.detail))) }
            if let mapped = policy.resolve[name] { return addressesKnown(mapped) }
            return .lookUp(name)
        }
    }

    /// evdns answered.
    mutating func resolved(_ result: Result<[IPAddress], Resolver.Failure>) -> Action {
        guard case .resolving(let admitted, let basis) = state, case .name(let name) = admitted.authority.target else {
            preconditionFailure("resolved in \(state)")
        }
        switch result {
        case .success(let addresses): return addressesKnown(addresses)
        case .failure(let failure): return refuse(.dnsError(failure.detail(resolving: name)), record(.admitted(admitted, basis)))
        }
    }

    /// evdns did not answer within `dns_timeout`.
    mutating func resolveTimedOut() -> Action {
        guard case .resolving(let admitted, let basis) = state else { preconditionFailure("resolve timeout in \(state)") }
        return refuse(.dnsTimeout, record(.admitted(admitted, basis)))
    }

    /// Drops denied destinations (every spelling of an address), refuses loops, then probes or
    /// connects.
    private mutating func addressesKnown(_ all: [IPAddress]) -> Action {
        guard case .resolving(let admitted, let basis) = state else { preconditionFailure("addresses in \(state)") }
        let authority = admitted.authority
        let filter = DestinationFilter(deny: admitted.snapshot.policy.proxy.denyDestinations, isOwnAddress: isOwnAddress)
        let allowed: [IPAddress]
        switch filter.filter(all, for: authority) {
        case .reach(let addresses): allowed = addresses
        case .refused(let cause): return refuse(cause.refusal, record(.admitted(admitted, basis)))
        }
        if let parent = admitted.snapshot.policy.proxy.upstreamProxy {
            return throughParent(admitted, basis, ParentHop(parent: parent, target: authority))
        }
        switch basis {
        case .unpinned(let unpinned, let rule):  // no probe: tunnel to the first address that accepts
            state = .connecting(admitted, .unpinned(unpinned, rule: rule))
            return .connect(allowed)
        case .pinned(let rule):
            state = .probing(admitted, rule)
            let serverName: String? = if case .name(let n) = authority.target { n } else { nil }
            return .probe(ProbeHub.Key(serverName: serverName, port: authority.port, addresses: allowed))
        }
    }

    /// Probes (or, unpinned, connects) through the parent proxy; the session's connect goes through
    /// it too.
    private mutating func throughParent(_ admitted: AskedConnect, _ basis: AdmissionBasis, _ hop: ParentHop) -> Action {
        switch basis {
        case .unpinned(let unpinned, let rule):
            state = .connecting(admitted, .unpinned(unpinned, rule: rule))
            return .connect([])
        case .pinned(let rule):
            state = .probing(admitted, rule)
            let serverName: String? = if case .name(let n) = admitted.authority.target { n } else { nil }
            let literal = admitted.authority.target.ipValue.map { [$0] } ?? []
            return .probe(ProbeHub.Key(serverName: serverName, port: admitted.authority.port, addresses: literal, parent: hop))
        }
    }

    /// The probe saw a chain (with a proof of key) or failed; the chain is judged under this
    /// CONNECT's snapshot and rule.
    mutating func probed(_ result: ProbeResult, at now: Date, debugBypassEnabled: Bool) -> Action {
        guard case .probing(let admitted, let rule) = state else { preconditionFailure("probed in \(state)") }
        let presented: [Certificate], proof: KeyProof
        switch result.outcome {
        case .failed(let refusal):
            return refuse(refusal, record(.probeFailed(admitted, rule, ProbeContact(address: result.address, tlsVersion: result.tlsVersion))))
        case .chain(let certificates, let how):
            (presented, proof) = (certificates, how)
        }
        guard let address = result.address else { preconditionFailure("a chain without the address that sent it") }
        let (validation, evaluation) = admitted.snapshot.judge(presented, target: admitted.authority.target, rule: rule, at: now,
                                                              debugBypassEnabled: debugBypassEnabled, delivered: result.delivered)
        let judgement = Judgement(address: address, tlsVersion: result.tlsVersion, keyProof: proof, validation: validation, evaluation: evaluation,
                                  presentedDER: presented.map(\.der), cached: result.cached, delivered: result.delivered)
        let judged = record(.judged(admitted, rule, judgement))
        if TestFault.evaluation.isInjected {
            return refuse(.internalError("pin evaluation failed: \(TestFault.detail)"), judged)
        }
        let decision: TunnelDecision
        switch evaluation.verdict {
        case .refused(let reason): return refuse(.policy(reason, detail: reason.detail(admitted.authority.target, evaluation)), judged)
        case .allowed(let match): decision = .allowed(match)
        case .bypassed(let reason, let basis): decision = .bypassed(wouldRefuse: reason, by: basis)
        case .unpinned(let basis): decision = .unpinned(basis)
        }
        // The tunnel goes to the address the probe verified, never a fresh resolution.
        state = .connecting(admitted, .pinned(rule, judgement, decision))
        return .connect([address.ip])
    }

    /// The tunnel's TCP connection failed.
    mutating func connectFailed(_ refusal: Refusal) -> Action {
        guard case .connecting(let admitted, let passage) = state else { preconditionFailure("connect failed in \(state)") }
        switch passage {
        case .pinned(let rule, let judgement, _): return refuse(refusal, record(.judged(admitted, rule, judgement)))
        case .unpinned: return refuse(refusal, record(.admitted(admitted, passage.basis)))
        }
    }

    /// The tunnel's TCP connection is up: the decision is final.
    mutating func connected(to address: SocketAddress) -> Action {
        guard case .connecting(let admitted, let passage) = state else { preconditionFailure("connected in \(state)") }
        state = .relaying(admitted, passage, address: address)
        return .open(record(.opened(admitted, passage, address: address)), passage.decision)
    }

    /// The session ends without a refusal: a hang-up before the decision, the relay's end, a
    /// shutdown, the end of a debug bypass.
    mutating func ended(_ reason: CloseReason) -> Action {
        let known: DecisionRecord
        switch state {
        case .lingering, .closed:
            return .none
        case .forwarding:
            state = .closed
            return .release
        case .relaying(let admitted, let passage, let address):
            known = record(.opened(admitted, passage, address: address))
        case .resolving(let admitted, let basis):
            known = record(.admitted(admitted, basis))
        case .probing(let admitted, let rule):
            known = record(.admitted(admitted, .pinned(rule)))
        case .connecting(let admitted, let passage):
            known = record(.admitted(admitted, passage.basis))
        case .readingRequest:
            known = record(.requested)
        }
        state = .closed
        return .close(reason, known)
    }

    /// The refusal has been written (or given up on): nothing is left.
    mutating func lingered() {
        guard case .lingering = state else { preconditionFailure("lingered in \(state)") }
        state = .closed
    }

    // MARK: helpers

    private func record(_ stage: DecisionRecord.Stage) -> DecisionRecord { DecisionRecord(conn: conn, client: client, stage, original: original) }

    private mutating func refuse(_ refusal: Refusal, _ record: DecisionRecord) -> Action {
        state = .lingering
        return .refuse(refusal, record)
    }
}
