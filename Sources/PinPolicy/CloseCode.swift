/// How a tunnel (or a connection before its decision) ended without a refusal: the `close_reason`
/// of `tunnel_closed`, a stable interface like every reason code.
public enum CloseCode: String, Hashable, Sendable, CaseIterable {
    /// Both sides finished.
    case eof
    case clientReset = "client_reset"
    case upstreamReset = "upstream_reset"
    case clientError = "client_error"
    case upstreamError = "upstream_error"
    case idleTimeout = "idle_timeout"
    /// A pinned tunnel's client sent no complete ClientHello within `client_hello_timeout`.
    case clientHelloTimeout = "client_hello_timeout"
    /// The client left while the stream check held the tunnel (or before its decision).
    case clientClosed = "client_closed"
    case shutdown
    case debugBypassExpired = "debug_bypass_expired"
    /// Closed before its first request head to make room in a flood (no line of its own).
    case reaped
    /// Sent not one byte within `header_timeout` (no line of its own: `silent_closed` counts it).
    case silent
    /// A pinned tunnel without its client's hello, closed to make room for a newer connection.
    case reclaimed
    /// A reload's policy refuses the open tunnel (the line carries its `reason`).
    case policyReload = "policy_reload"
}

/// The reasons a tunnel's lines carry that are not a refusal's: what left an open tunnel unverified,
/// and what changed under it.
public enum TunnelReason: String, Hashable, Sendable, CaseIterable {
    /// `tunnel_closed verify=probe-only`: the mirror could not be made (a warning).
    case mirrorUnavailable = "mirror_unavailable"
    /// `tunnel_closed verify=resumption-unverified`: TLS 1.3 resumed with nothing to verify it.
    case resumptionUnverified = "resumption_unverified"
    /// `close_reason=policy_reload`: the reloaded policy pins the host, and the tunnel has no chain
    /// it can judge (opened unpinned, or a certificate that no longer parses).
    case unverifiedChain = "unverified_chain"
    /// `tunnel_warning`: the tunnel negotiated another TLS version than the probe.
    case tlsVersionChanged = "tls_version_changed"
}

/// Why a quarantine ended: the `reason` of `quarantine_lifted`.
public enum QuarantineLift: String, Hashable, Sendable, CaseIterable {
    /// Its time ran out.
    case expired
    /// A reload changed the rule it was caught under.
    case ruleChanged = "rule_changed"
    /// An operator lifted it through the control socket (`pinproxy quarantine lift`).
    case `operator`
}

/// How a forwarded plain-HTTP exchange ended: the `outcome` of `http_forwarded`.
public enum ForwardOutcome: String, Hashable, Sendable, CaseIterable {
    /// Both bodies went through.
    case complete
    /// Still running when `drain_timeout` ended.
    case shutdown
    /// A reload pinned the host or denied its address.
    case policyReload = "policy_reload"
    /// The request body's framing is broken.
    case badRequestBody = "bad_request_body"
    /// The server's answer cannot be passed on.
    case badResponse = "bad_response"
    /// The server ended before its response did: it went silent, closed, reset or failed.
    case upstreamTimeout = "upstream_timeout"
    case upstreamClosed = "upstream_closed"
    case upstreamReset = "upstream_reset"
    case upstreamError = "upstream_error"
    /// Nothing moved for `idle_timeout`.
    case idleTimeout = "idle_timeout"
    /// The client ended what it sends (a half-close counts), or its connection broke.
    case clientClosed = "client_closed"
    case clientError = "client_error"
}

/// What a confirming look concluded when it found no interception: the `outcome` of `confirming_look`.
public enum LookOutcome: String, Hashable, Sendable, CaseIterable {
    /// The server proved the same failing chain again for the client's hello.
    case sameChain = "same_chain"
    /// The second look showed no proved chain.
    case undecided
}
