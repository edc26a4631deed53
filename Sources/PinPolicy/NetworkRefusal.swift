/// The refusals pinproxy decides without the policy: bad requests, limits, and the network.
/// Their raw values are the log line's `reason` (a stable interface, see the README).
public enum NetworkRefusal: String, Hashable, Sendable, CaseIterable {
    case badRequest = "bad_request"
    case methodNotAllowed = "method_not_allowed"
    case requestTooLarge = "request_too_large"
    case headerTimeout = "header_timeout"
    case connectionLimitReached = "connection_limit_reached"
    /// The client's (or every client's) share of the worker's mirror connections is in use.
    case mirrorLimitReached = "mirror_limit_reached"
    case outOfFileDescriptors = "out_of_file_descriptors"
    case shuttingDown = "shutting_down"
    case proxyLoopDetected = "proxy_loop_detected"
    case dnsError = "dns_error"
    case dnsTimeout = "dns_timeout"
    case connectionRefused = "connection_refused"
    case connectionTimeout = "connection_timeout"
    case tlsProtocolError = "tls_protocol_error"
    case probeTimeout = "probe_timeout"
    case internalError = "internal_error"
    /// The client spoke TLS to the proxy (`HTTPS_PROXY=https://…`).
    case tlsToProxy = "tls_to_proxy"
    /// The client spoke SOCKS 4 or 5 to the proxy (`socks5h://…`).
    case socksToProxy = "socks_to_proxy"
    /// The parent proxy (`proxy.upstream_proxy`) refused or failed the CONNECT.
    case upstreamProxyRefused = "upstream_proxy_refused"
    /// A plain-HTTP request for a host a rule pins: a downgrade, refused as HSTS refuses it.
    case plainHTTPToPinnedHost = "plain_http_to_pinned_host"
    /// A plain-HTTP request while `proxy.plain_http` is `refuse`.
    case plainHTTPRefused = "plain_http_refused"
    /// A plain-HTTP request to a port outside `proxy.allowed_plain_ports`.
    case plainPortNotAllowed = "plain_port_not_allowed"
    /// The server's answer to a forwarded request was not an HTTP/1.x response pinproxy can pass on.
    case badUpstreamResponse = "bad_upstream_response"
}
