import PinPolicy

/// What the client is told when its plain-HTTP request head is not one pinproxy forwards. Apart from
/// `PlainHTTP.swift`, which stays free of the proxy's other types so that the fuzz target
/// (`Fuzz/PlainHTTPFuzz.swift`) compiles it on its own.
extension PlainRequest.Problem {
    var refusal: Refusal {
        switch self {
        case .originForm(let target):
            return .badRequest("'\(target)' is not a proxy request: pinproxy is a proxy, so a plain-HTTP request must name its URL (http://host/…) and HTTPS must use CONNECT")
        case .methodNotAllowed(let method):
            return .methodNotAllowed("method \(method) is not forwarded; pinproxy forwards \(PlainRequest.methods.sorted().joined(separator: ", ")) over plain HTTP and tunnels HTTPS with CONNECT")
        case .notHTTP(let target):
            return .badRequest("'\(target)' is not an http:// URL; HTTPS goes through CONNECT (set https_proxy)")
        case .malformed(let why):
            return .badRequest(why)
        case .tooManyFields(let count):
            return .tooLarge("the request would go on with \(count) header fields, over \(ConnectRequest.maxHeaders): pinproxy adds Host, Via and the framing field to those it forwards")
        }
    }
}
