import Foundation
import PinPolicy

/// How one plain-HTTP exchange ended: the `outcome` of its `http_forwarded` line. A case that
/// ends the exchange before the response head owes the client a refusal (`answer`); its line's
/// level is its code's (`ReasonTable`).
enum PlainOutcome: Equatable {
    /// Both bodies went through.
    case complete
    /// pinproxy is stopping and took the connection back mid-exchange.
    case shutdown
    /// A reload's policy no longer admits the request (or its server's address).
    case policyReload(Refusal)
    /// The request body's framing is broken: what is wrong with it.
    case badRequestBody(String)
    /// The server's answer cannot be forwarded: the refusal's detail.
    case badResponse(String)
    /// The server said nothing for `idle_timeout`.
    case upstreamTimeout
    /// The server closed before its response was complete.
    case upstreamClosed
    /// The server reset the connection (ECONNRESET, EPIPE).
    case upstreamReset
    /// Any other error on the server connection.
    case upstreamError
    /// The client said nothing for `idle_timeout`.
    case idleTimeout
    /// The client closed (or half-closed) its side.
    case clientClosed
    /// The client's connection broke.
    case clientError

    /// The `outcome` the line says.
    var code: ForwardOutcome {
        switch self {
        case .complete: return .complete
        case .shutdown: return .shutdown
        case .policyReload: return .policyReload
        case .badRequestBody: return .badRequestBody
        case .badResponse: return .badResponse
        case .upstreamTimeout: return .upstreamTimeout
        case .upstreamClosed: return .upstreamClosed
        case .upstreamReset: return .upstreamReset
        case .upstreamError: return .upstreamError
        case .idleTimeout: return .idleTimeout
        case .clientClosed: return .clientClosed
        case .clientError: return .clientError
        }
    }

    /// The answer the client is owed when the exchange ends before a response head reached it
    /// (nil: the client is gone, or nothing went wrong).
    var refusal: Refusal? {
        switch self {
        case .complete, .shutdown, .idleTimeout, .clientClosed, .clientError: return nil
        case .policyReload(let refusal): return refusal
        case .badRequestBody(let why): return .badRequest("the request body: \(why)")
        case .badResponse(let detail): return .network(.badUpstreamResponse, detail)
        case .upstreamTimeout: return .network(.connectionTimeout, "the server did not answer within idle_timeout")
        case .upstreamClosed: return .network(.badUpstreamResponse, "the server closed the connection before its response was complete")
        case .upstreamReset, .upstreamError:
            return .network(.badUpstreamResponse, "the server reset the connection before its response was complete")
        }
    }
}
