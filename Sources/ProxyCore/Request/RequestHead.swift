import CLibevent

/// A request head as the client's input holds it: not complete yet, refused (another protocol, or
/// over `max_request_bytes`), or complete and taken off the input (a CONNECT or a plain-HTTP
/// request; what follows it stays in the input).
enum RequestHead: Equatable {
    case incomplete
    case refused(Refusal)
    case read([UInt8])

    /// Looks at what the client has sent so far, without reading past `limit` (and the blank
    /// line's four bytes).
    static func take(from input: OpaquePointer, limit: Int) -> RequestHead {
        if let first = evbuffer_pullup(input, 1), let wrong = WrongProtocol.detect(firstByte: first.pointee) {
            return .refused(wrong.refusal)
        }
        let available = evbuffer_get_length(input)
        let window = min(available, limit + 4)
        guard let bytes = evbuffer_pullup(input, window) else { return .incomplete }
        guard let headLength = ConnectRequest.headLength(in: UnsafeRawBufferPointer(start: bytes, count: window)) else {
            return available > limit ? .refused(.tooLarge("the request head is over max_request_bytes (\(limit) bytes)")) : .incomplete
        }
        guard headLength <= limit else {
            return .refused(.tooLarge("the request head is \(headLength) bytes, over max_request_bytes (\(limit))"))
        }
        let head = Array(UnsafeBufferPointer(start: bytes, count: headLength))
        evbuffer_drain(input, headLength)
        return .read(head)
    }
}

extension ConnectRequest.Problem {
    /// What the client is told.
    var refusal: Refusal {
        switch self {
        case .methodNotAllowed: return .methodNotAllowed(detail)
        case .tooManyHeaders: return .tooLarge(detail)
        case .malformed, .badTarget: return .badRequest(detail)
        }
    }
}
