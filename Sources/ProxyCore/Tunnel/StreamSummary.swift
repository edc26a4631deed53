import Foundation
import PinPolicy
import TLSInspection

/// What a tunnel's stream check found, as a value: what its close line says (`verify`, `tls`, the
/// judged chain's evidence) and what a reload judges again. It grows as the check reads the
/// handshake and outlives the check.
struct StreamSummary {
    /// A would-refuse that report mode or a debug bypass let through: logged as a warning.
    struct Overlooked: Equatable {
        let reason: StreamReason
        let detail: String
        let basis: BypassBasis
        /// Which check would have refused.
        var stage: StreamStage = .stream
    }

    /// A chain the check judged (the one the client received), with its judgement. An immutable
    /// object: the summary of every tunnel carries a pointer, not the judgement inline.
    final class JudgedChain {
        let der: [[UInt8]]
        let validation: ChainValidation
        let evaluation: Evaluation
        /// The SCTs delivered beside it (judged again on a reload).
        let delivered: DeliveredSCTs
        /// It is the probe's own judgement, reused for a chain byte for byte the probe's.
        let isProbes: Bool

        init(der: [[UInt8]], validation: ChainValidation, evaluation: Evaluation, delivered: DeliveredSCTs = .none, isProbes: Bool = false) {
            self.der = der
            self.validation = validation
            self.evaluation = evaluation
            self.delivered = delivered
            self.isProbes = isProbes
        }
    }

    /// What left a pinned TLS 1.3 tunnel without a check of its own, said on its close line.
    struct Unverified: Equatable {
        /// `mirror_unavailable` (`verify=probe-only`) or `resumption_unverified`.
        let reason: TunnelReason
        let detail: String
    }

    /// How the tunnel was verified, leaving aside what was let through.
    var verifiedBy: Verification
    /// Why nothing but the probe verified it: a mirror that could not be made, or a resumption.
    /// Nil when no check was meant to be (`mirror_checks: 0`).
    var unverified: Unverified?
    /// The protocol version of the tunnel's ServerHello (or HelloRetryRequest), once seen.
    var negotiated: TLSVersion?
    var judged: JudgedChain?
    /// A would-refuse let through, for the warning line.
    var overlooked: Overlooked?

    /// What outlives the check: the same, but without a judged chain that is the probe's own
    /// judgement delivered with the probe's SCTs — every later reader (a reload, a refusal's
    /// evidence) falls back to the probe's, which the session keeps anyway.
    func lasting(probe: Judgement?) -> StreamSummary {
        guard let judged, judged.isProbes, let probe, judged.delivered == probe.delivered else { return self }
        var kept = self
        kept.judged = nil
        return kept
    }

    /// How the tunnel was verified so far: `bypass` once anything was let through.
    var verification: Verification { overlooked != nil ? .bypass : verifiedBy }

    /// What left it unverified, unless something was let through (the line then says `bypass`).
    var leftUnverified: Unverified? { overlooked == nil ? unverified : nil }
}
