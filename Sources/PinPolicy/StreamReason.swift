/// Why the stream check closes a tunnel.
public enum StreamReason: Hashable, Sendable {
    /// The client's first bytes are not a TLS ClientHello (a pinned tunnel carries only TLS).
    case notTLS
    /// The ClientHello names another host than the CONNECT, or one another enforced rule pins.
    case sniMismatch
    /// A TLS 1.2 resumption of a session pinproxy never saw verified.
    case unverifiedResumption
    /// The TLS the peers exchanged does not parse (or exceeds the reader's limits).
    case malformedTLS
    /// The chain the server sent in the tunnel fails the rule, as a probe's would.
    case policy(RefusalReason)
    /// TLS 1.3: the client's key-log line does not open the server's flight, conflicts with another,
    /// or opens a flight its leaf's key did not sign.
    case keylogInvalid
    /// TLS 1.3 under `require_keylog`: no key-log line for the handshake within `wait`.
    case keylogMissing
    /// TLS 1.3: the server's flight on the mirror check's connection does not verify: its
    /// CertificateVerify or Finished fails, or it does not open under the mirror's own secret.
    case mirrorInvalid
    /// The server answered the mirror check with what proves no chain: an alert, a flight that
    /// does not parse, a key share or a retry pinproxy cannot follow. The client's own hello most
    /// likely gets the same answer (a suite, ALPN or extension the server refuses): never an incident.
    case mirrorFailed
    /// TLS 1.3: the server answered the tunnel but not the mirror check (the mirror connection
    /// closed, reset or stayed silent after its hello): an interceptor that could drop one of two
    /// look-alike connections must not win the other by it.
    case mirrorLost
    /// TLS 1.3 with nothing to verify the tunnel by itself (no key-log line), to a host:port in
    /// quarantine after a caught interception.
    case quarantined
    /// The server sent no byte of its first flight, in the tunnel or to a mirror, within
    /// `probe_timeout` of the client's hello (or did not complete a TLS ≤ 1.2 flight up to its
    /// Certificate in that time): the probe's own deadline, and the same `reason`.
    case firstFlightTimeout
    /// The client's ClientHello carries the random of a hello an earlier tunnel carried: a replay
    /// (a real client makes a fresh random for each connection), refused before any mirror is sent.
    case helloReplayed

    /// Every reason, each pin-policy reason included once.
    public static let all: [StreamReason] = [.notTLS, .sniMismatch, .unverifiedResumption, .malformedTLS, .keylogInvalid, .keylogMissing,
                                             .mirrorInvalid, .mirrorFailed, .mirrorLost, .quarantined, .firstFlightTimeout, .helloReplayed]
        + RefusalReason.allCases.map(StreamReason.policy)

    /// The log line's `reason`.
    public var code: String {
        switch self {
        case .notTLS: return "not_tls"
        case .sniMismatch: return "sni_mismatch"
        case .unverifiedResumption: return "unverified_resumption"
        case .malformedTLS: return "tls_protocol_error"
        case .policy(let reason): return reason.rawValue
        case .keylogInvalid: return "keylog_invalid"
        case .keylogMissing: return "keylog_missing"
        case .mirrorInvalid: return "mirror_invalid"
        case .mirrorFailed: return "mirror_failed"
        case .mirrorLost: return "mirror_lost"
        case .quarantined: return "quarantined"
        case .firstFlightTimeout: return NetworkRefusal.probeTimeout.rawValue
        case .helloReplayed: return "hello_replayed"
        }
    }
}
