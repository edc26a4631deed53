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
    /// A reload's policy refuses the open tunnel (a key deny-listed, a pin removed, …).
    case policyReload(ReloadCause)
    /// A pinned tunnel whose client had sent no ClientHello since its `200`, closed to make room for
    /// a newer connection (`SilentConnections`, a `max_tunnels` slot).
    case reclaimed

    var code: String {
        switch self {
        case .relay(.finished): return "eof"
        case .relay(.reset(let side)): return "\(side.rawValue)_reset"
        case .relay(.failed(let side)): return "\(side.rawValue)_error"
        case .relay(.idle): return "idle_timeout"
        case .relay(.noClientHello): return "client_hello_timeout"
        case .relay(.clientLeft): return "client_closed"
        case .clientClosed: return "client_closed"
        case .clientError: return "client_error"
        case .shutdown: return "shutdown"
        case .debugBypassExpired: return "debug_bypass_expired"
        case .reaped: return "reaped"
        case .reclaimed: return "reclaimed"
        case .policyReload: return "policy_reload"
        case .relay(.refused(let refusal)): return refusal.reason.code
        }
    }
}
