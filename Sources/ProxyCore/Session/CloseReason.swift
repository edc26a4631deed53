import PinPolicy

/// Why a session ended without a refusal: the `close_reason` of `tunnel_closed`.
enum CloseReason: Equatable, Sendable {
    case relay(RelayEnd)
    case clientClosed
    case clientError
    case shutdown
    case debugBypassExpired
    /// Closed before its first request head to make room in a flood of silent connections
    /// (`SilentConnections`); counted and summarised by the worker, no line of its own.
    case reaped
    /// Sent not one byte within `header_timeout`: closed without an answer or a line of its own
    /// (counted in `silent_closed`), as a connection that leaves without a byte is.
    case silent
    /// A reload's policy refuses the open tunnel (a key deny-listed, a pin removed, …).
    case policyReload(ReloadCause)
    /// A pinned tunnel whose client had sent no ClientHello since its `200`, closed to make room for
    /// a newer connection (`SilentConnections`, a `max_tunnels` slot).
    case reclaimed

    var code: String {
        let close: CloseCode
        switch self {
        case .relay(.finished): close = .eof
        case .relay(.reset(let side)): close = side == .client ? .clientReset : .upstreamReset
        case .relay(.failed(let side)): close = side == .client ? .clientError : .upstreamError
        case .relay(.idle): close = .idleTimeout
        case .relay(.noClientHello): close = .clientHelloTimeout
        case .relay(.clientLeft): close = .clientClosed
        case .clientClosed: close = .clientClosed
        case .clientError: close = .clientError
        case .shutdown: close = .shutdown
        case .debugBypassExpired: close = .debugBypassExpired
        case .reaped: close = .reaped
        case .silent: close = .silent
        case .reclaimed: close = .reclaimed
        case .policyReload: close = .policyReload
        case .relay(.refused(let refusal)): return refusal.reason.code
        }
        return close.rawValue
    }
}
