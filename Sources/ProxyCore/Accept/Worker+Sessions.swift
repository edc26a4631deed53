import PinPolicy

/// The worker as its sessions see it (`SessionHost`): what the protocol asks beyond the members
/// the worker has for its own sake.
extension Worker: SessionHost {
    var tunnelServices: TunnelServices {
        TunnelServices(loop: loop, debugBypassEnabled: debugBypassEnabled, keyLog: keyLog, quarantine: quarantine, seenHellos: seenHellos,
                       resumptions: resumptions)
    }

    func forwarder(conn: Int, client: SocketAddress, side: BufferEvent, onEnd: @escaping (PlainForwarder.End) -> Void) -> PlainForwarder? {
        PlainForwarder(worker: self, conn: conn, client: client, side: side, onEnd: onEnd)
    }

    func countOpened(_ decision: TunnelDecision) { tally.withLock { $0.counters.count(decision) } }

    func logOpened(_ record: DecisionRecord, _ decision: TunnelDecision) { logger.emitDecision(record, decision, worker: index) }

    /// Counted from what the line says, then logged (built only when its level is written). Every
    /// end that has a line comes through here, once.
    func ended(_ end: SessionEnd) {
        tally.withLock { $0.counters.count(end) }
        logger.emitEnd(end)
    }

    func closedSilently() { tally.withLock { $0.counters.count(CloseCode.silent.entry) } }
}
