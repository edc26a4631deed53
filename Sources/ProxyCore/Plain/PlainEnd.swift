import Foundation
import PinPolicy

/// How one plain-HTTP request ended, as the worker counts and logs it: from this value, counted
/// first, then logged (`Worker.log(_:conn:client:)`).
enum PlainEnd {
    /// An exchange ended with this outcome: its `http_forwarded` line. `answered`: the refusal the
    /// client gets because no response head reached it (its `request_rejected` line follows).
    case exchange(PlainExchange, PlainOutcome, answered: Refusal?)
    /// Refused before an exchange began (nil request: its head did not parse): `request_rejected`.
    case refused(Refusal, PlainRequest?)
}

extension Counters {
    mutating func count(_ end: PlainEnd) {
        switch end {
        case .exchange(let exchange, _, let answered):
            bytesUp += exchange.bytesUp
            bytesDown += exchange.bytesDown
            if answered != nil { rejected += 1 }
        case .refused:
            rejected += 1
        }
    }
}

extension Worker {
    /// Counts a plain-HTTP request's end, then logs it.
    func log(_ end: PlainEnd, conn: Int, client: SocketAddress, original: SocketAddress? = nil) {
        tally.withLock { $0.counters.count(end) }
        // Transparent mode: where the redirected connection was going.
        let emit = { [logger] (record: LogRecord) in
            var record = record
            if let original {
                record["via"] = .string("transparent")
                record["original_dst"] = .string(original.description)
            }
            logger.emit(record)
        }
        switch end {
        case .exchange(let exchange, let outcome, let answered):
            emit(PlainLog.forwarded(exchange, outcome: outcome, conn: conn, client: client, duration: ContinuousClock.now - exchange.startedAt))
            if let answered { emit(PlainLog.rejected(answered, conn: conn, client: client, request: exchange.request)) }
        case .refused(let refusal, let request):
            emit(PlainLog.rejected(refusal, conn: conn, client: client, request: request))
        }
    }
}
