import PinPolicy

/// What a `tunnel_closed` line is made from.
struct ClosedTunnel {
    /// What was known when it closed: the decision, if the tunnel opened.
    let record: DecisionRecord
    let bytesUp: Int
    let bytesDown: Int
    let duration: Duration
    /// What the tunnel's stream check found, when it had one: how it was verified, the TLS it
    /// negotiated, the chain it judged.
    let stream: StreamSummary?
    /// Which relay carried it at the end (nil: it never opened).
    let relay: RelayStage?

    /// How the tunnel passed, when it opened.
    var passage: Passage? { record.passage }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension Target {
    var ipValue: IPAddress? {
        if case .ip(let a) = self { return a }
        return nil
    }
}
