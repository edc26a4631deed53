import Foundation
import PinPolicy
import TLSInspection

/// What a reload makes of a tunnel that is already open.
enum ReloadVerdict: Equatable {
    case stands
    /// The new policy refuses it: `reason` as a refusal would say it.
    case closes(reason: String, detail: String)
}

extension PolicySnapshot {
    /// Judges an open tunnel again under this (new) snapshot, on what was already verified for it —
    /// no new handshake: the client and target as admitted, the address it reached, and the chain
    /// it was judged on (the stream's when the stream check read one, else the probe's; nil when it
    /// was opened unpinned).
    func rejudge(_ authority: Authority, client: IPAddress, address: IPAddress?, chain: [[UInt8]]?, at now: Date,
                 debugBypassEnabled: Bool) -> ReloadVerdict {
        if let address, policy.proxy.denyDestinations.containsAnyForm(of: address) {
            return .closes(reason: RefusalReason.destinationProhibited.rawValue, detail: "the tunnel's address \(address) is in the reloaded deny_destinations")
        }
        switch policy.admit(authority, client: client) {
        case .decided(.refused(let reason), _):
            return .closes(reason: reason.rawValue, detail: "the reloaded policy refuses this CONNECT before any chain is looked at")
        case .decided:
            return .stands
        case .probe(let rule):
            guard let chain, !chain.isEmpty else {
                return .closes(reason: "unverified_chain", detail: "the reloaded policy pins \(authority.target) (rule at line \(rule.line)); this tunnel was opened unpinned, with no chain to judge")
            }
            var presented: [Certificate] = []
            for der in chain {
                guard let certificate = Certificate.fromDER(der) else {
                    return .closes(reason: "unverified_chain", detail: "a certificate of the tunnel's chain no longer parses")
                }
                presented.append(certificate)
            }
            let (_, evaluation) = judge(presented, target: authority.target, rule: rule, at: now, debugBypassEnabled: debugBypassEnabled)
            guard case .refused(let reason) = evaluation.verdict else { return .stands }
            return .closes(reason: reason.rawValue, detail: "the reloaded policy refuses the tunnel's chain: \(evaluation.chainFailure?.detail ?? reason.rawValue)")
        }
    }
}
