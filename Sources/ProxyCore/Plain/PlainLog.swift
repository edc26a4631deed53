import Foundation
import PinPolicy

/// The log lines of plain-HTTP forwarding.
enum PlainLog {
    static func forwarded(_ exchange: PlainExchange, outcome: PlainOutcome, conn: Int, client: SocketAddress, duration: Duration) -> LogRecord {
        let request = exchange.request
        return LogRecord(outcome.code.level, "http_forwarded", [
            ("conn", .int(conn)), ("client", .string(client.description)), ("method", .string(request.method)),
            ("host", .string(request.authority.target.description)), ("port", .int(Int(request.authority.port))),
            ("address", .string(exchange.address.description)), ("status", .int(exchange.status)), ("bytes_up", .int(exchange.bytesUp)),
            ("bytes_down", .int(exchange.bytesDown)), ("duration_ms", .int(Int(duration.seconds * 1000))), ("outcome", .string(outcome.code.rawValue)),
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

    /// The refusal's hint for a plain-HTTP request: its own where it differs from a CONNECT's.
    static func hint(for refusal: Refusal, conn: Int, client: SocketAddress) -> String {
        let entry = refusal.code.entry
        return entry.plainHint ?? entry.hint(DecisionRecord(conn: conn, client: client))
    }
}
