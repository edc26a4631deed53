import PinPolicy

/// What the client is told when pinproxy will not open a tunnel: a status and a reason phrase that
/// carry meaning on their own (curl shows only the status, Python and Go show the phrase), an RFC
/// 9209 `Proxy-Status` error, and the stable `reason` code of the log line.
public struct Refusal: Hashable, Sendable {
    public let status: Int
    public let phrase: String
    /// RFC 9209 §2.3 error type.
    public let proxyStatus: String
    /// The log line's `reason`.
    public let reason: String
    /// One sentence for the client body and the log's `detail` (never the expected pins).
    public let detail: String

    public init(status: Int, phrase: String, proxyStatus: String, reason: String, detail: String) {
        self.status = status
        self.phrase = phrase
        self.proxyStatus = proxyStatus
        self.reason = reason
        self.detail = detail
    }

    /// A refusal decided by the policy.
    public static func policy(_ reason: RefusalReason, detail: String) -> Refusal {
        switch reason {
        case .pinMismatch:
            return Refusal(status: 502, phrase: "Certificate Pin Mismatch", proxyStatus: "tls_certificate_error", reason: reason.rawValue, detail: detail)
        case .chainInvalid, .hostnameMismatch:
            return Refusal(status: 502, phrase: "Certificate Invalid", proxyStatus: "tls_certificate_error", reason: reason.rawValue, detail: detail)
        case .denylistedKey:
            return Refusal(status: 502, phrase: "Certificate Key Denylisted", proxyStatus: "tls_certificate_error", reason: reason.rawValue, detail: detail)
        case .unpinnedDenied, .portNotAllowed:
            return Refusal(status: 403, phrase: "Forbidden by Pin Policy", proxyStatus: "http_request_denied", reason: reason.rawValue, detail: detail)
        case .clientNotAllowed:
            return Refusal(status: 403, phrase: "Client Not Allowed", proxyStatus: "http_request_denied", reason: reason.rawValue, detail: detail)
        case .destinationProhibited:
            return Refusal(status: 403, phrase: "Destination Forbidden", proxyStatus: "destination_ip_prohibited", reason: reason.rawValue, detail: detail)
        }
    }

    static func badRequest(_ detail: String) -> Refusal {
        Refusal(status: 400, phrase: "Bad Request", proxyStatus: "http_request_error", reason: "bad_request", detail: detail)
    }
    static func methodNotAllowed(_ detail: String) -> Refusal {
        Refusal(status: 405, phrase: "Method Not Allowed", proxyStatus: "http_request_denied", reason: "method_not_allowed", detail: detail)
    }
    static func tooLarge(_ detail: String) -> Refusal {
        Refusal(status: 431, phrase: "Request Header Fields Too Large", proxyStatus: "http_request_error", reason: "request_too_large", detail: detail)
    }
    static let headerTimeout = Refusal(status: 408, phrase: "Request Timeout", proxyStatus: "http_request_error", reason: "header_timeout",
                                       detail: "the request head did not arrive in time")
    static let tunnelLimit = Refusal(status: 503, phrase: "Too Many Tunnels", proxyStatus: "connection_limit_reached", reason: "connection_limit_reached",
                                     detail: "pinproxy is at its max_tunnels limit; retry shortly")
    static let shuttingDown = Refusal(status: 503, phrase: "Shutting Down", proxyStatus: "proxy_internal_error", reason: "shutting_down",
                                      detail: "pinproxy is shutting down")
    static func loop(_ detail: String) -> Refusal {
        Refusal(status: 403, phrase: "Proxy Loop Detected", proxyStatus: "proxy_loop_detected", reason: "proxy_loop_detected", detail: detail)
    }
    static func dnsError(_ detail: String) -> Refusal {
        Refusal(status: 502, phrase: "DNS Error", proxyStatus: "dns_error", reason: "dns_error", detail: detail)
    }
    static let dnsTimeout = Refusal(status: 504, phrase: "DNS Timeout", proxyStatus: "dns_timeout", reason: "dns_timeout",
                                    detail: "the name did not resolve in time")
    static func connectionRefused(_ detail: String) -> Refusal {
        Refusal(status: 502, phrase: "Connection Failed", proxyStatus: "connection_refused", reason: "connection_refused", detail: detail)
    }
    /// `socket()` failed with EMFILE or ENFILE: pinproxy (or the whole system) is out of file
    /// descriptors. A 503 with Retry-After, like `tunnelLimit`, because it passes when tunnels
    /// close, and the upstream is not at fault (not `connection_refused`). The Proxy-Status error
    /// is RFC 9209 §2.3 `connection_limit_reached` (a configured limit on connections to the next
    /// hop was exceeded; recommended 503), as for `tunnelLimit`: RLIMIT_NOFILE (systemd's
    /// LimitNOFILE) is such a limit, every tunnel costs descriptors under it, and the fix is
    /// configuration. `proxy_internal_error` (recommended 500) would tell the client it met a bug.
    static func outOfFileDescriptors(_ detail: String) -> Refusal {
        Refusal(status: 503, phrase: "Out of File Descriptors", proxyStatus: "connection_limit_reached", reason: "out_of_file_descriptors", detail: detail)
    }
    static func connectionTimeout(_ detail: String) -> Refusal {
        Refusal(status: 504, phrase: "Connection Timeout", proxyStatus: "connection_timeout", reason: "connection_timeout", detail: detail)
    }
    static func tlsProtocolError(_ detail: String) -> Refusal {
        Refusal(status: 502, phrase: "TLS Handshake Failed", proxyStatus: "tls_protocol_error", reason: "tls_protocol_error", detail: detail)
    }
    static let probeTimeout = Refusal(status: 504, phrase: "TLS Handshake Timeout", proxyStatus: "connection_read_timeout", reason: "probe_timeout",
                                      detail: "the upstream did not complete a TLS handshake in time")
    static func internalError(_ detail: String) -> Refusal {
        Refusal(status: 500, phrase: "Proxy Internal Error", proxyStatus: "proxy_internal_error", reason: "internal_error", detail: detail)
    }

    /// The whole HTTP response: status line, Proxy-Status, a short text body naming the host, close.
    public func response(host: String?) -> [UInt8] {
        var body = "pinproxy refused "
        body += host.map { "the tunnel to \($0)" } ?? "the request"
        body += ": \(reason) (\(detail))\n"
        var head = "HTTP/1.1 \(status) \(phrase)\r\n"
        head += "Proxy-Status: pinproxy; error=\(proxyStatus); details=\(structuredString(reason))\r\n"
        if status == 405 { head += "Allow: CONNECT\r\n" }
        if status == 503 { head += "Retry-After: 1\r\n" }
        head += "Content-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n"
        return Array((head + body).utf8)
    }

    /// An RFC 8941 sf-string: printable ASCII with `"` and `\` escaped.
    private func structuredString(_ s: String) -> String {
        var out = "\""
        for c in s.unicodeScalars where c.value >= 0x20 && c.value < 0x7f {
            if c == "\"" || c == "\\" { out += "\\" }
            out.unicodeScalars.append(c)
        }
        return out + "\""
    }
}
