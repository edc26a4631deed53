import Foundation
import PinPolicy

/// One plain-HTTP request and its response in flight: what its `http_forwarded` line reports and
/// what decides whether the connections outlive it.
struct PlainExchange {
    /// Where the response stands; the status and the body's framing exist only once its head came.
    enum Response {
        /// 1xx responses seen before the final one (bounded: a server cannot send them forever).
        case awaitingHead(interim: Int)
        /// `dechunk`: a chunked response to an HTTP/1.0 client, passed on without its chunk framing,
        /// the end of the body marked by closing the connection (RFC 9112 §6.1).
        case body(status: Int, meter: BodyMeter, dechunk: Bool)
    }

    let request: PlainRequest
    let address: SocketAddress
    let startedAt: ContinuousClock.Instant
    /// Sent on a connection kept from an earlier exchange (which the server may have closed meanwhile).
    let reused: Bool
    var requestBody: BodyMeter
    var response = Response.awaitingHead(interim: 0)
    var bytesUp = 0
    var bytesDown = 0
    /// The client connection ends after this exchange.
    var closeClient: Bool
    /// The server connection can carry the next request.
    var serverReusable = true

    init(request: PlainRequest, address: SocketAddress, reused: Bool, at now: ContinuousClock.Instant) {
        self.request = request
        self.address = address
        self.reused = reused
        startedAt = now
        requestBody = BodyMeter(request.body)
        closeClient = request.clientCloses
    }

    /// The response's status, 0 before its final head.
    var status: Int {
        if case .body(let status, _, _) = response { return status }
        return 0
    }

    /// Whether the client has been sent the final response head (after it, a failure can only cut the body).
    var responseStarted: Bool {
        if case .body = response { return true }
        return false
    }
}
