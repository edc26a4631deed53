import PinPolicy

/// What the client is told when pinproxy will not open a tunnel: the status, reason phrase and RFC
/// 9209 `Proxy-Status` error of its reason's entry (`ReasonTable`), the stable `reason` code of the
/// log line, and a detail.
public struct Refusal: Hashable, Sendable {
    /// Why: a policy reason or a network one.
    public enum Code: Hashable, Sendable {
        case policy(RefusalReason)
        case network(NetworkRefusal)

        /// The log line's `reason`.
        public var rawValue: String {
            switch self {
            case .policy(let reason): return reason.rawValue
            case .network(let reason): return reason.rawValue
            }
        }
    }

    public let code: Code
    /// One sentence for the client body and the log's `detail` (never the expected pins).
    public let detail: String
    /// What the client is sent instead of an HTTP response, for a client that does not speak HTTP
    /// (a TLS alert, a SOCKS failure reply).
    public let reply: [UInt8]?
    /// The parent proxy's answer, passed on: the status the client gets, and the one received.
    public let relayed: Relayed?
    /// `connection_refused` because every address refused the connect (ECONNREFUSED: nothing
    /// listens on that port there), not because a network was unreachable: `check --probe` says
    /// "nothing listens" for it, apart from a failure of the policy.
    public internal(set) var nothingListens = false

    public struct Relayed: Hashable, Sendable {
        public let status: Int
        public let phrase: String
        /// The parent's own status (RFC 9209 `received-status`); nil when it sent none.
        public let received: Int?
    }

    public init(_ code: Code, detail: String, reply: [UInt8]? = nil, relayed: Relayed? = nil) {
        self.code = code
        self.detail = detail
        self.reply = reply
        self.relayed = relayed
    }

    /// The log line's `reason`.
    public var reason: String { code.rawValue }

    /// Status, reason phrase and RFC 9209 §2.3 error type: the reason's entry (`ReasonTable`), or
    /// the parent proxy's answer passed on.
    public var status: Int { answer.status }
    public var phrase: String { answer.phrase }
    public var proxyStatus: String { answer.proxyStatus }

    private var answer: (status: Int, phrase: String, proxyStatus: String) {
        guard let relayed else {
            let entry = code.entry
            return (entry.status, entry.phrase, entry.proxyStatus)
        }
        let type = switch relayed.received {
        case 403?, 407?: "http_request_denied"
        case 504?: "connection_timeout"
        default: "destination_unavailable"
        }
        return (relayed.status, relayed.phrase, type)
    }

    /// A refusal decided by the policy.
    public static func policy(_ reason: RefusalReason, detail: String) -> Refusal { Refusal(.policy(reason), detail: detail) }

    static func network(_ reason: NetworkRefusal, _ detail: String) -> Refusal { Refusal(.network(reason), detail: detail) }
    static func badRequest(_ detail: String) -> Refusal { .network(.badRequest, detail) }
    static func methodNotAllowed(_ detail: String) -> Refusal { .network(.methodNotAllowed, detail) }
    static func tooLarge(_ detail: String) -> Refusal { .network(.requestTooLarge, detail) }
    static let headerTimeout = Refusal.network(.headerTimeout, "the request head did not arrive in time")
    static let tunnelLimit = Refusal.network(.connectionLimitReached, "pinproxy is at its max_tunnels limit; retry shortly")
    static let shuttingDown = Refusal.network(.shuttingDown, "pinproxy is shutting down")
    static func loop(_ detail: String) -> Refusal { .network(.proxyLoopDetected, detail) }
    static func dnsError(_ detail: String) -> Refusal { .network(.dnsError, detail) }
    static let dnsTimeout = Refusal.network(.dnsTimeout, "the name did not resolve in time")
    static func connectionRefused(_ detail: String) -> Refusal { .network(.connectionRefused, detail) }
    static func outOfFileDescriptors(_ detail: String) -> Refusal { .network(.outOfFileDescriptors, detail) }
    static func connectionTimeout(_ detail: String) -> Refusal { .network(.connectionTimeout, detail) }
    static func tlsProtocolError(_ detail: String) -> Refusal { .network(.tlsProtocolError, detail) }
    static let probeTimeout = Refusal.network(.probeTimeout, "the upstream did not complete a TLS handshake in time")
    static func internalError(_ detail: String) -> Refusal { .network(.internalError, detail) }

    /// The whole HTTP response: status line, Proxy-Status, a short text body naming the host, close.
    public func response(host: String?) -> [UInt8] {
        if let reply { return reply }
        var body = "pinproxy refused "
        body += host.map { "the tunnel to \($0)" } ?? "the request"
        body += ": \(reason) (\(detail))\n"
        let answer = self.answer
        var head = "HTTP/1.1 \(answer.status) \(answer.phrase)\r\n"
        head += "Proxy-Status: pinproxy; error=\(answer.proxyStatus); details=\(structuredString(reason))"
        if let received = relayed?.received { head += "; received-status=\(received)" }
        head += "\r\n"
        // What the status itself asks for: the methods a 405 allows, when to retry after a 503.
        if answer.status == 405 { head += "Allow: CONNECT, \(PlainRequest.methods.sorted().joined(separator: ", "))\r\n" }
        if answer.status == 503 { head += "Retry-After: 1\r\n" }
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
