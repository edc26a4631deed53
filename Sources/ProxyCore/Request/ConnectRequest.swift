import PinPolicy

/// A parsed CONNECT request head (RFC 9110 §9.3.6), or why it is not one. A pure function over the
/// bytes up to and including the blank line, so it can be fuzzed without a socket.
public struct ConnectRequest: Hashable, Sendable {
    public let authority: Authority
    /// `HTTP/1.1` or `HTTP/1.0`.
    public let version: String
    public let headerCount: Int

    public enum Problem: Error, Hashable, Sendable {
        /// A method other than CONNECT (405).
        case methodNotAllowed(String)
        /// The head is not HTTP/1.x (400).
        case malformed(String)
        /// A target pinproxy will not parse (400).
        case badTarget(Authority.Problem)
        /// More than `maxHeaders` header lines (431).
        case tooManyHeaders

        public var detail: String {
            switch self {
            case .methodNotAllowed(let m): return "method \(m) is not allowed; pinproxy only tunnels HTTPS with CONNECT"
            case .malformed(let why): return why
            case .badTarget(let p): return p.description
            case .tooManyHeaders: return "more than \(ConnectRequest.maxHeaders) header lines"
            }
        }
    }

    public static let maxHeaders = 100

    /// Parses the head. Lines end in CRLF or a bare LF (as many clients and `evbuffer_readln` accept).
    public static func parse(head: [UInt8]) -> Result<ConnectRequest, Problem> {
        var lines = split(head)
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let requestLine = lines.first else { return .failure(.malformed("empty request")) }
        guard requestLine.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else {
            return .failure(.malformed("the request line has control or non-ASCII bytes"))
        }
        let parts = requestLine.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return .failure(.malformed("the request line must be 'CONNECT host:port HTTP/1.1'")) }
        let method = String(decoding: parts[0], as: UTF8.self)
        let target = String(decoding: parts[1], as: UTF8.self)
        let version = String(decoding: parts[2], as: UTF8.self)
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return .failure(.malformed("unsupported protocol version '\(version)'; pinproxy speaks HTTP/1.1 and HTTP/1.0"))
        }
        guard method == "CONNECT" else {
            guard !method.isEmpty, method.utf8.allSatisfy(isTokenByte) else { return .failure(.malformed("bad method")) }
            return .failure(.methodNotAllowed(method))
        }
        let authority: Authority
        switch Authority.parse(target) {
        case .success(let a): authority = a
        case .failure(let p): return .failure(.badTarget(p))
        }

        let headers = lines.dropFirst()
        guard headers.count <= maxHeaders else { return .failure(.tooManyHeaders) }
        var hostHeaders = 0
        for line in headers {
            if line.first == 0x20 || line.first == 0x09 { return .failure(.malformed("obsolete header line folding is not accepted")) }
            guard let colon = line.firstIndex(of: 0x3a), colon > line.startIndex,
                  line[..<colon].allSatisfy(isTokenByte) else {
                return .failure(.malformed("a header line is not 'Name: value'"))
            }
            let value = line[line.index(after: colon)...]
            guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7f) }) else {
                return .failure(.malformed("a header value has control bytes"))
            }
            if String(decoding: line[..<colon], as: UTF8.self).lowercased() == "host" { hostHeaders += 1 }
        }
        // The request-target alone names the tunnel (RFC 9110 §9.3.6); the Host header decides
        // nothing. Node's documented CONNECT pattern sends `Host: <the proxy's address>`, and Squid
        // and tinyproxy accept it, so its value is ignored. Two Host headers are still a 400 (RFC
        // 9112 §3.2): a request that says two things at once is not one we half-understand.
        if hostHeaders > 1 { return .failure(.malformed("more than one Host header")) }
        return .success(ConnectRequest(authority: authority, version: version, headerCount: headers.count))
    }

    static func split(_ bytes: [UInt8]) -> [ArraySlice<UInt8>] {
        var lines: [ArraySlice<UInt8>] = []
        var start = bytes.startIndex
        for i in bytes.indices where bytes[i] == 0x0a {
            var end = i
            if end > start && bytes[end - 1] == 0x0d { end -= 1 }
            lines.append(bytes[start..<end])
            start = i + 1
        }
        if start < bytes.endIndex { lines.append(bytes[start...]) }
        return lines
    }

    /// Where the head ends: the index just past the first empty line (CRLF CRLF or LF LF), or nil.
    public static func headLength(in bytes: UnsafeRawBufferPointer) -> Int? {
        var previousLineEnd = -1
        for i in 0..<bytes.count where bytes[i] == 0x0a {
            let lineStart = previousLineEnd + 1
            let lineLength = i - lineStart
            if lineLength == 0 || (lineLength == 1 && bytes[lineStart] == 0x0d) { return i + 1 }
            previousLineEnd = i
        }
        return nil
    }
}

/// RFC 9110 token characters.
func isTokenByte(_ b: UInt8) -> Bool {
    switch b {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
        return true
    default:
        return "!#$%&'*+-.^_`|~".utf8.contains(b)
    }
}
