import Foundation
import Logging
import PinPolicy

/// The two lines every tunnel costs (its decision and its close), built and handed to a logger
/// exactly as the proxy does, for `Benchmarks/logcost.sh` (issue 8, item 4). Not for the proxy's
/// own use: it only lets a release benchmark reach the internal record types.
@_spi(Benchmarks) public enum LogCost {
    /// One pinned tunnel's decision, judged by `policy`'s rule for `host:port` over `chain`.
    public struct Tunnel {
        let record: DecisionRecord
    }

    /// nil when `policy` has no rule for the host.
    public static func tunnel(policy: Policy, host: String, port: UInt16, address: IPAddress, chain: ChainValidation) -> Tunnel? {
        let authority = Authority(target: .name(host), port: port)
        guard let rule = policy.rule(for: authority) else { return nil }
        let evaluation = policy.evaluate(chain, rule: rule, target: authority.target, at: Date(), debugBypassEnabled: false)
        var record = DecisionRecord(conn: 0, client: SocketAddress(ip: IPAddress("127.0.0.1")!, port: 50000))
        record.authority = authority
        record.policySource = policy.source
        record.rule = rule
        record.verdict = evaluation.verdict
        record.address = SocketAddress(ip: address, port: port)
        record.tlsVersion = "TLSv1.3"
        record.keyProof = nil
        record.cached = false
        record.validation = chain
        record.evaluation = evaluation
        return Tunnel(record: record)
    }

    /// The decision line and the close line of connection `conn`, through `logger` as `Proxy` logs them.
    public static func emitDecisionAndClose(_ tunnel: Tunnel, conn: Int, to logger: Logger) {
        let record = tunnel.record.renumbered(conn)
        logger.emitDecision(record)
        let closed = ClosedTunnel(record: record, openedTunnel: true, bytesUp: 517, bytesDown: 1_048_576 + conn,
                                  duration: .milliseconds(12), stream: nil, relay: .copy)
        logger.emitEnd(.closed(.relay(.finished), closed))
    }
}

extension DecisionRecord {
    /// The same record for another connection number.
    fileprivate func renumbered(_ conn: Int) -> DecisionRecord {
        var copy = DecisionRecord(conn: conn, client: client)
        copy.authority = authority
        copy.rule = rule
        copy.verdict = verdict
        copy.address = address
        copy.tlsVersion = tlsVersion
        copy.keyProof = keyProof
        copy.cached = cached
        copy.validation = validation
        copy.evaluation = evaluation
        copy.policySource = policySource
        return copy
    }
}
