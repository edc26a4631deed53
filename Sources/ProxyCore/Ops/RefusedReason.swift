import PinPolicy

/// Why a tunnel was refused, at whichever stage refused it: at the decision (a request, policy or
/// network refusal) or in the stream. The key of `pinproxy_refusals_total`, which counts by `code`,
/// the `reason` of the `tunnel_refused` line: a stream's pin mismatch and a probe's are one series.
public enum RefusedReason: Hashable, Sendable {
    case decision(Refusal.Code)
    case stream(StreamReason)

    /// The line's `reason`.
    public var code: String {
        switch self {
        case .decision(let code): return code.rawValue
        case .stream(let reason): return reason.code
        }
    }
}
