import Foundation

/// A server's response head as pinproxy passes it on: checked, without its hop-by-hop fields,
/// with `Via` and `Connection`, in the client's HTTP version.
struct ResponseHead {
    enum Reading {
        /// A 1xx response to pass on (nil: not to an HTTP/1.0 client, RFC 9110 §15.2); the final one follows.
        case interim([UInt8]?)
        case final(ResponseHead)
        /// Not forwardable: the refusal's detail.
        case unusable(String)
    }

    /// 1xx responses forwarded before a final one, at most (a server cannot send them forever).
    static let maxInterimResponses = 8

    /// The head the client gets.
    let bytes: [UInt8]
    let status: Int
    let body: BodyLength
    /// A chunked body to an HTTP/1.0 client, passed on without its chunk framing (RFC 9112 §6.1).
    let dechunk: Bool
    /// The client connection ends after this response (its `Connection: close`).
    let closesClient: Bool
    /// The server said it closes after this response.
    let serverCloses: Bool

    /// Reads `raw`, the response to `request` after `interimSeen` 1xx responses. `clientCloses`:
    /// the client asked to close after this exchange; `stopping`: a shutdown is under way, so this
    /// is the connection's last exchange.
    static func read(_ raw: [UInt8], for request: PlainRequest, interimSeen: Int, clientCloses: Bool, stopping: Bool) -> Reading {
        guard case .success(var head) = HTTPHead.parse(raw), head.start.0 == "HTTP/1.1" || head.start.0 == "HTTP/1.0",
              let status = head.statusCode, (100...599).contains(status), status != 101 else {
            return .unusable("the server's answer is not an HTTP/1.x response pinproxy forwards")
        }
        let body: BodyLength
        switch head.bodyLength(isResponse: true, requestMethod: request.method) {
        case .success(let length): body = length
        case .failure(let why): return .unusable("the response: \(why)")
        }
        let serverCloses = head.tokens("Connection").contains("close") || head.start.0 == "HTTP/1.0" && !head.tokens("Connection").contains("keep-alive")
        head.removeHopByHop()
        head.fields.append(("Via", "\(head.start.0 == "HTTP/1.0" ? "1.0" : "1.1") pinproxy"))
        let tooManyFields = "the response head would go on with more than \(ConnectRequest.maxHeaders) fields, Via and Connection included"
        let clientVersion = request.head.start.2
        if (100..<200).contains(status) {
            guard interimSeen < maxInterimResponses else {
                return .unusable("the server sent more than \(maxInterimResponses) interim (1xx) responses")
            }
            guard clientVersion == "HTTP/1.1" else { return .interim(nil) }
            guard let bytes = clientHead(head, version: clientVersion) else { return .unusable(tooManyFields) }
            return .interim(bytes)
        }
        var dechunk = false
        if clientVersion == "HTTP/1.0" && !head.tokens("Transfer-Encoding").isEmpty {
            // HTTP/1.0 has no transfer codings: chunked is undone here, any other cannot be.
            switch body {
            case .none: break  // HEAD, 204, 304: only the field goes
            case .chunked where head.tokens("Transfer-Encoding") == ["chunked"]: dechunk = true
            default: return .unusable("the response has a transfer coding other than chunked, which an HTTP/1.0 client cannot read")
            }
            head.fields.removeAll { $0.name.caseInsensitiveCompare("Transfer-Encoding") == .orderedSame }
        }
        let closesClient = clientCloses || body == .untilClose || dechunk || stopping
        head.fields.append(("Connection", closesClient ? "close" : "keep-alive"))
        guard let bytes = clientHead(head, version: clientVersion) else { return .unusable(tooManyFields) }
        return .final(ResponseHead(bytes: bytes, status: status, body: body, dechunk: dechunk, closesClient: closesClient, serverCloses: serverCloses))
    }

    /// The head in the client's HTTP version, or nil when it would have more fields than pinproxy
    /// reads: the limit holds for what pinproxy writes, as for requests.
    private static func clientHead(_ head: HTTPHead, version: String) -> [UInt8]? {
        guard head.fields.count <= ConnectRequest.maxHeaders else { return nil }
        return HTTPHead(start: (version, head.start.1, head.start.2), fields: head.fields).bytes
    }
}
