import Foundation
import Logging
import PinPolicy

/// The two lines every tunnel costs (its decision and its close), built and handed to a logger
/// exactly as the proxy does, for `Benchmarks/logcost.sh` (issue 8, item 4). Not for the proxy's
/// own use: it only lets a release benchmark reach the internal record types.
@_spi(Benchmarks) public enum LogCost {
    /// One pinned tunnel, open: what its decision and close lines are made from.
    public struct Tunnel {
        let asked: AskedConnect
        let passage: Passage
        let address: SocketAddress
    }

    /// One pinned tunnel's decision, judged by `policy`'s rule for `host:port` over `chain`; nil when
    /// `policy` has no rule for the host, or its rule refuses the chain.
    public static func tunnel(policy: Policy, host: String, port: UInt16, address: IPAddress, chain: ChainValidation) -> Tunnel? {
        let authority = Authority(target: .name(host), port: port)
        guard let rule = policy.rule(for: authority) else { return nil }
        let evaluation = policy.evaluate(chain, rule: rule, target: authority.target, at: Date(), debugBypassEnabled: false)
        let decision: TunnelDecision
        switch evaluation.verdict {
        case .allowed(let match): decision = .allowed(match)
        case .bypassed(let reason, let basis): decision = .bypassed(wouldRefuse: reason, by: basis)
        case .unpinned(let basis): decision = .unpinned(basis)
        case .refused: return nil
        }
        let reached = SocketAddress(ip: address, port: port)
        let judgement = Judgement(address: reached, tlsVersion: .tls13, keyProof: .handshakeCompleted, validation: chain, evaluation: evaluation,
                                  presentedDER: [])
        // The lines read only the snapshot's policy: an empty trust store does for it.
        guard let snapshot = try? PolicySnapshot(policy: policy, systemStore: .anchors([], name: "none")) else { return nil }
        return Tunnel(asked: AskedConnect(authority: authority, snapshot: snapshot), passage: .pinned(rule, judgement, decision), address: reached)
    }

    /// The decision line and the close line of connection `conn`, through `logger` as `Proxy` logs them.
    public static func emitDecisionAndClose(_ tunnel: Tunnel, conn: Int, to logger: Logger) {
        let record = DecisionRecord(conn: conn, client: SocketAddress(ip: IPAddress("127.0.0.1")!, port: 50000),
                                    .opened(tunnel.asked, tunnel.passage, address: tunnel.address))
        logger.emitDecision(record, tunnel.passage.decision, worker: 0)
        let closed = ClosedTunnel(record: record, bytesUp: 517, bytesDown: 1_048_576 + conn, duration: .milliseconds(12), stream: nil, relay: .copy)
        logger.emitEnd(.closed(.relay(.finished), closed))
    }
}
