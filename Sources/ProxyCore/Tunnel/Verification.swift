/// How a tunnel was verified: the `verify` key of its close line.
enum Verification: String, Sendable {
    /// The probe's chain, and the chain the client itself received (TLS ≤ 1.2), or a resumption of
    /// a session whose chain was so verified.
    case probeAndStream = "probe+stream"
    /// The probe's chain, and (TLS 1.3) the chain the client received, read with the client's own
    /// key-log line and signed by its leaf's key in this very handshake.
    case probeAndKeylog = "probe+keylog"
    /// The probe's chain, and (TLS 1.3, no key-log line) the chain the server showed the mirror
    /// check: a connection pinproxy made with a copy of the client's own ClientHello, at the same
    /// moment, signed by its leaf's key in that handshake.
    case probeAndMirror = "probe+mirror"
    /// The probe's chain only: TLS 1.3 encrypts the client's, and no mirror could be made (the
    /// close line says why).
    case probeOnly = "probe-only"
    /// TLS 1.3 resumed a session with no key-log line: no chain is in the handshake and no mirror
    /// can copy a PSK binder, so nothing verified this tunnel.
    case resumptionUnverified = "resumption-unverified"
    /// A debug bypass or report mode let it through.
    case bypass
    /// No rule pins the host.
    case unpinned
}
