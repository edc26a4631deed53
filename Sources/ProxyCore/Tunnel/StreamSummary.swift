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

    /// A chain the check judged (the one the client received), with its judgement.
    struct JudgedChain {
        let der: [[UInt8]]
        let validation: ChainValidation
        let evaluation: Evaluation
        /// The SCTs delivered beside it (judged again on a reload).
        var delivered = DeliveredSCTs.none
    }

    /// How the tunnel was verified, leaving aside what was let through.
    var verifiedBy: Verification
    /// Why a pinned TLS 1.3 tunnel rests on the probe alone (`verify=probe-only`): the mirror
    /// that could not be made. Nil when no mirror was meant to be (`mirror_checks: 0`).
    var unverifiedBecause: String?
    /// The protocol version of the tunnel's ServerHello (or HelloRetryRequest), once seen.
    var negotiated: TLSVersion?
    var judged: JudgedChain?
    /// A would-refuse let through, for the warning line.
    var overlooked: Overlooked?

    /// How the tunnel was verified so far: `bypass` once anything was let through.
    var verification: Verification { overlooked != nil ? .bypass : verifiedBy }
}
