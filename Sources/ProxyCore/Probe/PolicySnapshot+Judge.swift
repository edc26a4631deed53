import Foundation
import PinPolicy
import TLSInspection

/// The one judgement of a chain: what the probe's verdict is made of, and the same for every
/// chain seen after it.
extension PolicySnapshot {
    /// Validates what a server presented under the rule's trust, judges its leaf's SCTs (embedded,
    /// and those `delivered` in the handshake) when CT applies, then evaluates the rule on both: the
    /// one judgement of a chain, whether it came from the proxy's probe, the stream, a key-log or
    /// mirror flight, or the CLI's probe.
    public func judge(_ presented: [Certificate], target: Target, rule: Rule, at now: Date,
                      debugBypassEnabled: Bool) -> (ChainValidation, Evaluation) {
        judge(presented, target: target, rule: rule, at: now, debugBypassEnabled: debugBypassEnabled, delivered: .none)
    }

    public func judge(_ presented: [Certificate], target: Target, rule: Rule, at now: Date, debugBypassEnabled: Bool,
                      delivered: DeliveredSCTs) -> (ChainValidation, Evaluation) {
        let validation = validate(presented, for: target, trust: rule.trust, pins: rule.pins)
        return (validation, policy.evaluate(validation, rule: rule, target: target, at: now, debugBypassEnabled: debugBypassEnabled,
                                            ct: ctStatus(presented, rule: rule, delivered: delivered, at: now)))
    }

    /// CT for a chain under `rule`: nil without a log list, `exempt` when the host's `ct` is off.
    func ctStatus(_ presented: [Certificate], rule: Rule, delivered: DeliveredSCTs, at now: Date) -> CTStatus? {
        guard let ct, !presented.isEmpty else { return nil }
        let mode = policy.ctMode(under: rule)
        guard mode != .off else { return .exempt }
        return .judged(ct.judge(presented, delivered: delivered, mode: mode, at: now))
    }
}
