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

    /// The close line's `close_reason`; nil when the stream check refused the tunnel (its line is
    /// `tunnel_refused`, with the refusal's reason).
    var closeCode: CloseCode? {
        switch self {
        case .relay(.finished): return .eof
        case .relay(.reset(let side)): return side == .client ? .clientReset : .upstreamReset
        case .relay(.failed(let side)): return side == .client ? .clientError : .upstreamError
        case .relay(.idle): return .idleTimeout
        case .relay(.noClientHello): return .clientHelloTimeout
        case .relay(.clientLeft): return .clientClosed
        case .clientClosed: return .clientClosed
        case .clientError: return .clientError
        case .shutdown: return .shutdown
        case .debugBypassExpired: return .debugBypassExpired
        case .reaped: return .reaped
        case .silent: return .silent
        case .reclaimed: return .reclaimed
        case .policyReload: return .policyReload
        case .relay(.refused): return nil
        }
    }

    var code: String {
        if case .relay(.refused(let refusal)) = self { return refusal.reason.code }
        return closeCode?.rawValue ?? ""
    }
}
