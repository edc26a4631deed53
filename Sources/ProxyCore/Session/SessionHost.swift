import PinPolicy

/// What a session needs from the worker that carries it, and nothing more: the loop and the policy
/// in force, the `max_tunnels` and mirror budgets, the worker's book of sessions, the stages'
/// services, and where its counters and lines go. `Worker` is the one real host; a test drives a
/// `Session` with a fake one.
protocol SessionHost: AnyObject {
    var loop: EventLoop { get }
    /// The policy a CONNECT arriving now is judged by.
    var snapshot: PolicySnapshot { get }
    var stopping: Bool { get }
    var debugBypassEnabled: Bool { get }
    var resolver: Resolver { get }
    var tunnelServices: TunnelServices { get }

    // The `max_tunnels` budget every worker shares, and the worker's mirror connections.
    func takeTunnelSlot() -> Bool
    func reclaimTunnelSlot() -> Bool
    func takeTunnelSlotUnchecked()
    func giveBackTunnelSlot()
    func reserveMirrors(_ count: Int, for client: SocketAddress) -> Refusal?
    func mirrorTicket(for client: SocketAddress) -> MirrorBudget.Ticket

    // The worker's book of sessions.
    func sessionObjectMade()
    func sessionObjectFreed()
    func spoke(_ id: Int)
    func awaitsHello(_ id: Int, client: SocketAddress, descriptors: Int)
    func remove(_ session: Session)
    func isOwnAddress(_ address: SocketAddress) -> Bool

    // The stages that are the worker's.
    func probe(_ key: ProbeHub.Key, settings: ProxySettings, cacheable: Bool, _ callback: @escaping (ProbeResult) -> Void) -> ProbeHub.Waiter
    func forgetProbe(_ authority: Authority)
    func confirm(_ confirmation: StreamCheck.Confirmation, dialling addresses: [SocketAddress], hop: ParentHop?, connectTimeout: Double,
                 timeout: Double, record: DecisionRecord)
    /// The plain-HTTP forwarder a connection is handed to (nil: none, the connection is released).
    func forwarder(conn: Int, client: SocketAddress, side: BufferEvent, onEnd: @escaping (PlainForwarder.End) -> Void) -> PlainForwarder?

    // Counters and lines.
    func noteWarnings(_ evaluation: Evaluation, record: DecisionRecord)
    func logStreamNote(_ note: StreamCheck.Note, record: DecisionRecord)
    /// A tunnel opens: counted before its `200`.
    func countOpened(_ decision: TunnelDecision)
    /// Its decision line, after the `200`.
    func logOpened(_ record: DecisionRecord, _ decision: TunnelDecision)
    /// The session's one end line, and its count.
    func ended(_ end: SessionEnd)
    /// A connection that ended without sending a byte: counted (`silent_closed`), no line.
    func closedSilently()
}
