import Foundation
import PinPolicy
import TLSInspection

/// Why a reload closes an open tunnel, with the evidence its detail names. `code` is the
/// `tunnel_closed` line's `reason`: a policy refusal's reason, or `TunnelReason.unverifiedChain`.
enum ReloadCause: Equatable, Sendable {
    /// The address the tunnel reached is in the reloaded `deny_destinations`.
    case addressDenied(IPAddress)
    /// The reloaded policy refuses the CONNECT itself (client, port, destination, `unpinned: deny`).
    case admissionRefused(AdmissionCause)
    /// The reloaded policy pins the target, and the tunnel was opened unpinned: no chain to judge.
    case pinnedWithoutChain(Target, ruleLine: Int)
    /// A certificate of the tunnel's chain no longer parses.
    case chainUnparsable
    /// The reloaded policy refuses the tunnel's chain; `failure` is the chain's validation failure, if any.
    case chainRefused(RefusalReason, failure: String?)

    var code: String {
        switch self {
        case .addressDenied: return RefusalReason.destinationProhibited.rawValue
        case .admissionRefused(let cause): return cause.refusal.reason
        case .chainRefused(let reason, _): return reason.rawValue
        case .pinnedWithoutChain, .chainUnparsable: return TunnelReason.unverifiedChain.rawValue
        }
    }

    var detail: String {
        switch self {
        case .addressDenied(let address): return "the tunnel's address \(address) is in the reloaded deny_destinations"
        case .admissionRefused: return "the reloaded policy refuses this CONNECT before any chain is looked at"
        case .pinnedWithoutChain(let target, let line):
            guard line > 0 else { return "the reloaded policy's defaults.ct judges the chain of \(target); this tunnel was opened unpinned, with no chain to judge" }
            return "the reloaded policy pins \(target) (rule at line \(line)); this tunnel was opened unpinned, with no chain to judge"
        case .chainUnparsable: return "a certificate of the tunnel's chain no longer parses"
        case .chainRefused(let reason, let failure): return "the reloaded policy refuses the tunnel's chain: \(failure ?? reason.rawValue)"
        }
    }
}

/// What a reload makes of a tunnel that is already open.
enum ReloadVerdict: Equatable {
    case stands
    case closes(ReloadCause)
}

extension PolicySnapshot {
    /// Judges an open tunnel again under this (new) snapshot, on what was already verified for it —
    /// no new handshake: the client and target as admitted, the address it reached, and the chain
    /// it was judged on (the stream's when the stream check read one, else the probe's; nil when it
    /// was opened unpinned).
    func rejudge(_ authority: Authority, client: IPAddress, address: IPAddress?, chain: [[UInt8]]?, delivered: DeliveredSCTs = .none,
                 at now: Date, debugBypassEnabled: Bool) -> ReloadVerdict {
        // No loop to look for: the tunnel is open, so its address was not pinproxy's own.
        let destinations = DestinationFilter(deny: policy.proxy.denyDestinations) { _ in false }
        if let address, destinations.entry(denying: address) != nil { return .closes(.addressDenied(address)) }
        switch AdmissionGate.admit(authority, client: client, policy: policy, kind: .connect) {
        case .refused(let cause):
            return .closes(.admissionRefused(cause))
        case .unpinned:
            return .stands
        case .probe(let rule):
            guard let chain, !chain.isEmpty else { return .closes(.pinnedWithoutChain(authority.target, ruleLine: rule.line)) }
            guard let presented = Certificate.chain(fromDER: chain) else { return .closes(.chainUnparsable) }
            let (_, evaluation) = judge(presented, target: authority.target, rule: rule, at: now, debugBypassEnabled: debugBypassEnabled,
                                        delivered: delivered)
            guard case .refused(let reason) = evaluation.verdict else { return .stands }
            return .closes(.chainRefused(reason, failure: evaluation.chainFailure?.detail))
        }
    }
}

extension PolicySnapshot {
    /// An open tunnel judged again, on the chain its stream check read, else its probe's. Through a
    /// parent proxy the address it reached is the parent's: `deny_destinations` judged the target.
    func rejudge(_ admitted: AskedConnect, _ passage: Passage, at address: SocketAddress, stream: StreamSummary?, client: IPAddress,
                 debugBypassEnabled: Bool) -> ReloadVerdict {
        var probe: Judgement?
        if case .pinned(_, let judgement, _) = passage { probe = judgement }
        let judged = stream?.judged
        let viaParent = admitted.snapshot.policy.proxy.upstreamProxy != nil
        return rejudge(admitted.authority, client: client, address: viaParent ? nil : address.ip, chain: judged?.der ?? probe?.presentedDER,
                       delivered: judged?.delivered ?? probe?.delivered ?? .none, at: Date(), debugBypassEnabled: debugBypassEnabled)
    }
}
