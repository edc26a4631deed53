/// How a tunnel was verified: the `verify` key of its close line.
enum Verification: String, Sendable {
    /// The probe's chain, and the chain the client itself received (TLS ≤ 1.2), or a resumption of
    /// a session whose chain was so verified.
    case probeAndStream = "probe+stream"
    /// The probe's chain, and (TLS 1.3) the chain the client received, read with the client's own
    /// key-log line and signed by its leaf's key in this very handshake.
    case probeAndKeylog = "probe+keylog"
    /// The probe's chain only: TLS 1.3 encrypts the client's.
    case probeOnly = "probe-only"
    /// A debug bypass or report mode let it through.
    case bypass
    /// No rule pins the host.
    case unpinned
}
