/// The I/O in flight for a session's current stage: leaving the stage drops it, and so cancels or
/// frees what it was waiting for.
enum SessionWork {
    case none
    case readingRequest(headerTimeout: Timer)
    case resolving(ResolveRequest, deadline: Timer)
    case probing(ProbeHub.Waiter)
    case connecting(UpstreamDial)
    case relaying(Relay, bypassEnd: Timer?)
    case forwarding(PlainForwarder)
    case lingering(giveUp: Timer)

    /// Stops what is pending without its callback.
    func cancel() {
        switch self {
        case .resolving(let request, _): request.cancel()
        case .probing(let waiter): waiter.cancel()
        case .connecting(let dial): dial.cancel()
        case .relaying(let relay, _): relay.cancel()
        case .forwarding(let forwarder): forwarder.cancel()
        case .none, .readingRequest, .lingering: break
        }
    }

    /// The open tunnel's relay.
    var relay: Relay? {
        if case .relaying(let relay, _) = self { return relay }
        return nil
    }
}
