import Foundation
import PinPolicy

/// The log lines of plain-HTTP forwarding.
enum PlainLog {
    static let hint = "use https:// for this host: pinproxy never reaches a pinned host over plain HTTP"

    static func forwarded(_ exchange: PlainExchange, outcome: PlainOutcome, conn: Int, client: SocketAddress, duration: Duration) -> LogRecord {
        let request = exchange.request
        return LogRecord(outcome.level, "http_forwarded", [
            ("conn", .int(conn)), ("client", .string(client.description)), ("method", .string(request.method)),
            ("host", .string(request.authority.target.description)), ("port", .int(Int(request.authority.port))),
            ("address", .string(exchange.address.description)), ("status", .int(exchange.status)), ("bytes_up", .int(exchange.bytesUp)),
            ("bytes_down", .int(exchange.bytesDown)), ("duration_ms", .int(Int(duration.seconds * 1000))), ("outcome", .string(outcome.code)),
        ])
    }

    static func rejected(_ refusal: Refusal, conn: Int, client: SocketAddress, request: PlainRequest?) -> LogRecord {
        var r = LogRecord(.warning, "request_rejected", [
            ("conn", .int(conn)), ("client", .string(client.description)), ("status", .int(refusal.status)),
            ("reason", .string(refusal.reason)), ("detail", .string(refusal.detail)),
        ])
        if let request {
            r["method"] = .string(request.method)
            r["host"] = .string(request.authority.target.description)
            r["port"] = .int(Int(request.authority.port))
        }
        r["hint"] = .string(hint(for: refusal, conn: conn, client: client))
        return r
    }

    static func hint(for refusal: Refusal, conn: Int = 0, client: SocketAddress? = nil) -> String {
        switch refusal.code {
        case .network(.plainHTTPToPinnedHost): return hint
        case .network(.plainHTTPRefused): return "proxy.plain_http is refuse: use https:// URLs, or set plain_http: forward"
        case .network(.plainPortNotAllowed): return "add the port to proxy.allowed_plain_ports if plain HTTP to it is intended"
        case .network(.badRequest): return "point http_proxy at pinproxy (http://HOST:PORT) and request http:// URLs through it; HTTPS goes through CONNECT"
        case .network(.methodNotAllowed): return "pinproxy forwards \(PlainRequest.methods.sorted().joined(separator: ", ")) over plain HTTP"
        case .network(.badUpstreamResponse): return "the server's answer could not be forwarded; the detail says why"
        default:
            guard let client else { return "the request was not forwarded: \(refusal.reason)" }
            return SessionLog.hint(refusal.code, DecisionRecord(conn: conn, client: client))
        }
    }
}
