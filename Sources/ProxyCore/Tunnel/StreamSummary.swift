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
    }

    /// A chain the check judged (the one the client received), with its judgement.
    struct JudgedChain {
        let der: [[UInt8]]
        let validation: ChainValidation
        let evaluation: Evaluation
    }

    /// How the tunnel was verified, leaving aside what was let through.
    var verifiedBy: Verification
    /// The protocol version of the tunnel's ServerHello (or HelloRetryRequest), once seen.
    var negotiated: TLSVersion?
    var judged: JudgedChain?
    /// A would-refuse let through, for the warning line.
    var overlooked: Overlooked?

    /// How the tunnel was verified so far: `bypass` once anything was let through.
    var verification: Verification { overlooked != nil ? .bypass : verifiedBy }
}
