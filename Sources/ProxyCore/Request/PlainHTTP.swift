import PinPolicy

/// One HTTP/1.x message head (a request or a response), parsed strictly: the start line's three
/// parts and the header fields in order. Pure functions over bytes, like `ConnectRequest`, so they
/// can be tested and fuzzed without a socket.
struct HTTPHead: Equatable {
    /// Request: method, target, version. Response: version, status, reason phrase.
    let start: (String, String, String)
    var fields: [(name: String, value: String)]

    static func == (a: HTTPHead, b: HTTPHead) -> Bool {
        a.start == b.start && a.fields.elementsEqual(b.fields) { $0.name == $1.name && $0.value == $1.value }
    }

    /// The field values with this (case-insensitive) name, in order.
    func values(_ name: String) -> [String] {
        fields.filter { $0.name.caseInsensitiveCompare(name) == .orderedSame }.map(\.value)
    }

    /// The comma-separated tokens of every field with this name, lowercased (`Connection`, `Transfer-Encoding`).
    func tokens(_ name: String) -> [String] {
        values(name).flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces).lowercased() }.filter { !$0.isEmpty }
    }

    /// Parses a head (the bytes up to and including the blank line). `maxFields` bounds the header count.
    static func parse(_ head: [UInt8], maxFields: Int = ConnectRequest.maxHeaders) -> Result<HTTPHead, MessageProblem> {
        var lines = ConnectRequest.split(head)
        while lines.last?.isEmpty == true { lines.removeLast() }
        guard let first = lines.first else { return .failure("empty message") }
        guard first.allSatisfy({ $0 >= 0x20 && $0 < 0x7f }) else { return .failure("the start line has control or non-ASCII bytes") }
        let parts = first.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false).map { String(decoding: $0, as: UTF8.self) }
        guard parts.count >= 2 else { return .failure("the start line is not 'A B C'") }
        let fieldLines = lines.dropFirst()
        guard fieldLines.count <= maxFields else { return .failure("more than \(maxFields) header lines") }
        var fields: [(name: String, value: String)] = []
        for line in fieldLines {
            if line.first == 0x20 || line.first == 0x09 { return .failure("obsolete header line folding is not accepted") }
            guard let colon = line.firstIndex(of: 0x3a), colon > line.startIndex, line[..<colon].allSatisfy(isTokenByte) else {
                return .failure("a header line is not 'Name: value'")
            }
            let value = line[line.index(after: colon)...]
            guard value.allSatisfy({ $0 == 0x09 || ($0 >= 0x20 && $0 != 0x7f) }) else { return .failure("a header value has control bytes") }
            fields.append((String(decoding: line[..<colon], as: UTF8.self),
                           String(decoding: value, as: UTF8.self).trimmingCharacters(in: .init(charactersIn: " \t"))))
        }
        return .success(HTTPHead(start: (parts[0], parts[1], parts.count > 2 ? parts[2] : ""), fields: fields))
    }

    /// The head as bytes: start line, fields, blank line.
    var bytes: [UInt8] {
        var text = "\(start.0) \(start.1) \(start.2)\r\n"
        for field in fields { text += "\(field.name): \(field.value)\r\n" }
        return Array((text + "\r\n").utf8)
    }

    /// Hop-by-hop fields (RFC 9110 §7.6.1) and those the `Connection` field names, removed; the
    /// framing field `Transfer-Encoding` is kept, because pinproxy passes a chunked body on as it
    /// came when both hops speak HTTP/1.1 (for an HTTP/1.0 client the forwarder de-chunks it and
    /// drops the field).
    mutating func removeHopByHop() {
        let named = Set(tokens("Connection")).subtracting(["transfer-encoding", "content-length"])
        let hop: Set<String> = ["connection", "keep-alive", "proxy-connection", "proxy-authorization", "proxy-authenticate", "te",
                                "trailer", "upgrade"]
        fields.removeAll { hop.contains($0.name.lowercased()) || named.contains($0.name.lowercased()) }
    }

    /// A response's status code: exactly three digits (RFC 9112 §4), so `+200`, ` 200` or `2000`
    /// are not read as a number another parser might read differently.
    var statusCode: Int? {
        let code = start.1.utf8
        guard code.count == 3, code.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
        return Int(start.1)
    }

    /// How the body after this head is delimited (RFC 9112 §6.3), or why it cannot be.
    func bodyLength(isResponse: Bool, requestMethod: String? = nil) -> Result<BodyLength, MessageProblem> {
        if isResponse, let status = statusCode {
            if requestMethod == "HEAD" || (100..<200).contains(status) || status == 204 || status == 304 { return .success(.none) }
        }
        let codings = tokens("Transfer-Encoding")
        let lengths = values("Content-Length")
        if !codings.isEmpty {
            // A message with both is a smuggling attempt (RFC 9112 §6.1): refused, never guessed at.
            guard lengths.isEmpty else { return .failure("both Transfer-Encoding and Content-Length") }
            guard codings.last == "chunked", codings.filter({ $0 == "chunked" }).count == 1 else {
                return isResponse ? .success(.untilClose) : .failure("a request Transfer-Encoding other than chunked")
            }
            return .success(.chunked)
        }
        if !lengths.isEmpty {
            let all = lengths.flatMap { $0.split(separator: ",") }.map { $0.trimmingCharacters(in: .whitespaces) }
            guard let first = all.first, all.allSatisfy({ $0 == first }), first.count <= 18, first.allSatisfy(\.isASCII),
                  first.allSatisfy(\.isNumber), let n = Int(first) else {
                return .failure("a bad Content-Length")
            }
            return .success(n == 0 ? .none : .length(n))
        }
        return .success(isResponse ? .untilClose : .none)
    }
}

/// Why a message head cannot be forwarded, in one sentence.
struct MessageProblem: Error, Equatable, ExpressibleByStringInterpolation, CustomStringConvertible {
    let description: String
    init(stringLiteral value: String) { description = value }
}

/// How a message body ends.
enum BodyLength: Equatable {
    case none
    case length(Int)
    case chunked
    /// A response without a length: it ends when the server closes.
    case untilClose
}

/// Follows a body as its bytes pass, without keeping them: how many of the bytes offered belong to
/// this message, and whether it has ended. For a chunked body it reads the chunk-size lines and the
/// trailer section (each bounded) so that it knows where the message stops on a kept-alive connection.
///
/// Chunk-size lines are read strictly (RFC 9112 §7.1): `1*HEXDIG` (at most `maxChunkSizeDigits`
/// digits, a value of at most `maxChunkSize`), then either CR LF or a chunk extension, which starts
/// with `;` (whitespace only before it). Anything else — `5 6`, `5 `, `+5`, a size past 2^31 — is
/// malformed: a server that reads such a line another way would see another message boundary.
struct BodyMeter: Equatable {
    enum State: Equatable {
        case remaining(Int)
        /// Reading a chunk size: how many hex digits so far, and their value.
        case chunkSize(digits: Int, value: Int)
        /// After the size, before the CR: whitespace (only while `extension` is false, and only
        /// before a `;`), then the extensions, passed on unread. `line`: the line's length so far.
        case chunkExtension(size: Int, line: Int, extension: Bool)
        /// The CR ending a chunk-size line came; its LF is due.
        case chunkSizeLF(Int)
        case chunkData(Int)
        /// The CR LF after a chunk's data (how many of the two bytes are still due).
        case chunkEnd(Int)
        /// The trailer section: the length of the current line.
        case trailer(line: Int, lines: Int)
        /// The CR ending a trailer line (or the blank line, when `line` is 0) came; its LF is due.
        case trailerLF(line: Int, lines: Int)
        case untilClose
        case done
    }

    private(set) var state: State
    static let maxLine = 4096
    static let maxTrailerLines = 64
    /// Leading zeros included: a bound on the digits a server must read.
    static let maxChunkSizeDigits = 16
    /// 2^31 - 1: no server that keeps a chunk size in 32 bits reads a larger one the same way.
    static let maxChunkSize = Int(Int32.max)

    init(_ length: BodyLength) {
        switch length {
        case .none: state = .done
        case .length(let n): state = .remaining(n)
        case .chunked: state = .chunkSize(digits: 0, value: 0)
        case .untilClose: state = .untilClose
        }
    }

    var isDone: Bool { state == .done }

    /// Body bytes that follow now and can be passed on without being looked at: the rest of a
    /// known length, or of the current chunk's data (nil while framing is read, or until close).
    var plainBytesAhead: Int? {
        switch state {
        case .remaining(let n), .chunkData(let n): return n
        default: return nil
        }
    }

    /// Counts bytes of the body (at most `plainBytesAhead`), without looking at them.
    mutating func consume(count n: Int) {
        switch state {
        case .remaining(let r): state = r - n <= 0 ? .done : .remaining(r - n)
        case .chunkData(let r): state = r - n <= 0 ? .chunkEnd(2) : .chunkData(r - n)
        default: break
        }
    }

    enum Step: Equatable {
        /// This many of the bytes belong to the body (the rest, if any, to what follows).
        case consumed(Int)
        case malformed(String)
    }

    /// Reads the bytes as the body's next ones. With `stopAtData`, it stops where chunk data (or
    /// the rest of a known length) begins, so a caller can tell framing from data.
    mutating func consume(_ bytes: UnsafeRawBufferPointer, stopAtData: Bool = false) -> Step {
        var i = 0
        while i < bytes.count {
            switch state {
            case .done:
                return .consumed(i)
            case .untilClose:
                return .consumed(bytes.count)
            case .remaining(let n):
                if stopAtData { return .consumed(i) }
                let take = min(n, bytes.count - i)
                i += take
                state = n - take == 0 ? .done : .remaining(n - take)
            case .chunkData(let n):
                if stopAtData { return .consumed(i) }
                let take = min(n, bytes.count - i)
                i += take
                state = n - take == 0 ? .chunkEnd(2) : .chunkData(n - take)
            case .chunkEnd(let due):
                let b = bytes[i]
                i += 1
                // Strictly CR LF: a server that took a bare LF (or a bare CR) for the end would see
                // another message boundary than pinproxy's (request smuggling).
                if due == 2 && b == 0x0d { state = .chunkEnd(1) }
                else if due == 1 && b == 0x0a { state = .chunkSize(digits: 0, value: 0) }
                else { return .malformed("a chunk's data is not followed by CRLF") }
            case .chunkSize(let digits, let value):
                let b = bytes[i]
                i += 1
                if let digit = hexValue(b) {
                    guard digits < Self.maxChunkSizeDigits else { return .malformed("a chunk size of more than \(Self.maxChunkSizeDigits) digits") }
                    let next = value * 16 + digit
                    guard next <= Self.maxChunkSize else { return .malformed("a chunk size over \(Self.maxChunkSize) bytes") }
                    state = .chunkSize(digits: digits + 1, value: next)
                    continue
                }
                guard digits > 0 else {
                    return .malformed(b == 0x0d ? "an empty chunk-size line" : b == 0x0a ? "a chunk-size line not ended by CRLF" : "a chunk size that is not hexadecimal")
                }
                switch b {
                case 0x0d: state = .chunkSizeLF(value)
                case 0x3b: state = .chunkExtension(size: value, line: digits + 1, extension: true)
                case 0x20, 0x09: state = .chunkExtension(size: value, line: digits + 1, extension: false)
                case 0x0a: return .malformed("a chunk-size line not ended by CRLF")
                default: return .malformed("a chunk size that is not hexadecimal")
                }
            case .chunkExtension(let size, let line, let started):
                let b = bytes[i]
                i += 1
                if b == 0x0d {
                    // Whitespace after the size is allowed only before a `;` (RFC 9112's BWS).
                    guard started else { return .malformed("a chunk size followed by something other than a chunk extension") }
                    state = .chunkSizeLF(size)
                    continue
                }
                guard line < Self.maxLine else { return .malformed("a chunk-size line over \(Self.maxLine) bytes") }
                if !started {
                    guard b == 0x20 || b == 0x09 || b == 0x3b else { return .malformed("a chunk size followed by something other than a chunk extension") }
                    state = .chunkExtension(size: size, line: line + 1, extension: b == 0x3b)
                    continue
                }
                // Extensions are passed on unread: only visible ASCII, space and tab, no control
                // byte another parser could split on.
                guard b == 0x09 || (0x20...0x7e).contains(b) else {
                    return .malformed(b == 0x0a ? "a chunk-size line not ended by CRLF" : "a control byte in a chunk extension")
                }
                state = .chunkExtension(size: size, line: line + 1, extension: true)
            case .chunkSizeLF(let size):
                let b = bytes[i]
                i += 1
                guard b == 0x0a else { return .malformed("a chunk-size line not ended by CRLF") }
                state = size == 0 ? .trailer(line: 0, lines: 0) : .chunkData(size)
            case .trailer(let line, let lines):
                let b = bytes[i]
                i += 1
                if b == 0x0d {
                    state = .trailerLF(line: line, lines: lines)
                } else {
                    guard b == 0x09 || (0x20...0x7e).contains(b) else { return .malformed("a control byte in a trailer line") }
                    guard line < Self.maxLine else { return .malformed("a trailer line over \(Self.maxLine) bytes") }
                    state = .trailer(line: line + 1, lines: lines)
                }
            case .trailerLF(let line, let lines):
                let b = bytes[i]
                i += 1
                guard b == 0x0a else { return .malformed("a trailer line not ended by CRLF") }
                if line == 0 { state = .done; continue }
                guard lines + 1 < Self.maxTrailerLines else { return .malformed("more than \(Self.maxTrailerLines) trailer lines") }
                state = .trailer(line: 0, lines: lines + 1)
            }
        }
        return .consumed(i)
    }

    private func hexValue(_ b: UInt8) -> Int? {
        switch b {
        case 0x30...0x39: return Int(b - 0x30)
        case 0x41...0x46: return Int(b - 0x41 + 10)
        case 0x61...0x66: return Int(b - 0x61 + 10)
        default: return nil
        }
    }
}

/// An absolute-form plain-HTTP proxy request (`GET http://host[:port]/path HTTP/1.1`), or why
/// pinproxy will not forward it.
struct PlainRequest {
    static let methods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"]

    let method: String
    let authority: Authority
    /// The origin-form target sent to the server (`/path?query`).
    let path: String
    let head: HTTPHead
    let body: BodyLength

    /// The client asked to close after this exchange (HTTP/1.0 without keep-alive, or `Connection: close`).
    var clientCloses: Bool {
        let tokens = head.tokens("Connection") + head.tokens("Proxy-Connection")
        if head.start.2 == "HTTP/1.0" { return !tokens.contains("keep-alive") }
        return tokens.contains("close")
    }

    enum Problem: Error, Equatable {
        /// `GET /`: a request for pinproxy itself, not one to forward (400).
        case originForm(String)
        /// A method pinproxy does not forward (405).
        case methodNotAllowed(String)
        /// `GET https://…`: HTTPS goes through CONNECT (400).
        case notHTTP(String)
        case malformed(String)
        /// The head pinproxy would write has more than `ConnectRequest.maxHeaders` fields (431).
        case tooManyFields(Int)
    }

    static func parse(head bytes: [UInt8]) -> Result<PlainRequest, Problem> {
        let head: HTTPHead
        switch HTTPHead.parse(bytes) {
        case .success(let h): head = h
        case .failure(let why): return .failure(.malformed(why.description))
        }
        let (method, target, version) = head.start
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            return .failure(.malformed("unsupported protocol version '\(version)'; pinproxy speaks HTTP/1.1 and HTTP/1.0"))
        }
        guard !method.isEmpty, method.utf8.allSatisfy(isTokenByte) else { return .failure(.malformed("bad method")) }
        if target.hasPrefix("/") || target == "*" { return .failure(.originForm(target)) }
        guard target.lowercased().hasPrefix("http://") else {
            if target.contains("://") { return .failure(.notHTTP(target)) }
            return .failure(.malformed("the request target '\(target)' is not an absolute http:// URL"))
        }
        guard methods.contains(method) else { return .failure(.methodNotAllowed(method)) }
        let rest = target.dropFirst("http://".count)
        let end = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let hostPort = String(rest[..<end])
        if rest[end...].contains("#") { return .failure(.malformed("a fragment ('#') in the request target")) }
        var path = String(rest[end...])
        if path.isEmpty { path = "/" } else if path.hasPrefix("?") { path = "/" + path }
        let hasPort = hostPort.hasPrefix("[") ? hostPort.split(separator: "]", maxSplits: 1).last?.hasPrefix(":") == true && hostPort.last != "]"
            : hostPort.contains(":")
        let authority: Authority
        switch Authority.parse(hasPort ? hostPort : hostPort + ":80") {
        case .success(let a): authority = a
        case .failure(let problem): return .failure(.malformed("bad URL host: \(problem.description)"))
        }
        if head.values("Host").count > 1 { return .failure(.malformed("more than one Host header")) }
        let body: BodyLength
        switch head.bodyLength(isResponse: false) {
        case .success(let b): body = b
        case .failure(let why): return .failure(.malformed(why.description))
        }
        // Framing a server could read otherwise is refused, not normalised (request smuggling): one
        // `Transfer-Encoding: chunked` and nothing else, never on HTTP/1.0 (RFC 9112 §6.1); one
        // `Content-Length` of plain digits.
        let codings = head.values("Transfer-Encoding")
        if !codings.isEmpty {
            guard version == "HTTP/1.1" else { return .failure(.malformed("Transfer-Encoding in an HTTP/1.0 request")) }
            guard codings.count == 1, codings[0].trimmingCharacters(in: .whitespaces).lowercased() == "chunked" else {
                return .failure(.malformed("a request Transfer-Encoding other than one 'chunked'"))
            }
        }
        let lengths = head.values("Content-Length")
        if !lengths.isEmpty {
            guard lengths.count == 1, !lengths[0].isEmpty, lengths[0].utf8.allSatisfy({ (0x30...0x39).contains($0) }) else {
                return .failure(.malformed("a Content-Length other than one number"))
            }
        }
        if !head.tokens("Upgrade").isEmpty || head.tokens("Expect").contains(where: { $0 != "100-continue" }) {
            return .failure(.malformed("Upgrade and Expect (other than 100-continue) are not forwarded"))
        }
        return .success(PlainRequest(method: method, authority: authority, path: path, head: head, body: body))
    }

    /// The head sent upstream: origin-form (absolute-form to a parent proxy), hop-by-hop fields
    /// removed, `Host` set to the URL's authority (RFC 9112 §3.2.2), `Via` added. The limit on
    /// fields holds for what pinproxy writes too, what it adds included (`Host`, the framing field,
    /// `Via`, the parent's `Proxy-Authorization`): servers cap the count as well (Apache and
    /// Python's http.server at 100), and one that stopped reading at its cap could read the rest
    /// as another request.
    func upstreamHead(viaParent parent: UpstreamProxy?) -> Result<HTTPHead, Problem> {
        let hostText: String
        switch authority.target {
        case .ip(let ip) where authority.port == 80: hostText = ip.authorityText
        case .name(let name) where authority.port == 80: hostText = name
        default: hostText = authority.description
        }
        var out = head
        out.removeHopByHop()
        out.fields.removeAll { $0.name.caseInsensitiveCompare("Host") == .orderedSame }
        out.fields.insert(("Host", hostText), at: 0)
        // The framing pinproxy follows, written the one way it reads it: the server cannot see
        // another body length than the one pinproxy meters.
        let hadLength = !head.values("Content-Length").isEmpty
        out.fields.removeAll {
            $0.name.caseInsensitiveCompare("Transfer-Encoding") == .orderedSame || $0.name.caseInsensitiveCompare("Content-Length") == .orderedSame
        }
        switch body {
        case .chunked: out.fields.append(("Transfer-Encoding", "chunked"))
        case .length(let n): out.fields.append(("Content-Length", String(n)))
        case .none where hadLength: out.fields.append(("Content-Length", "0"))
        case .none, .untilClose: break
        }
        out.fields.append(("Via", "\(head.start.2 == "HTTP/1.0" ? "1.0" : "1.1") pinproxy"))
        if let parent, let authorization = parent.authorization { out.fields.append(("Proxy-Authorization", authorization)) }
        guard out.fields.count <= ConnectRequest.maxHeaders else { return .failure(.tooManyFields(out.fields.count)) }
        let target = parent == nil ? path : "http://\(hostText)\(path)"
        // An HTTP/1.0 client's request goes on as HTTP/1.0, so the server should not answer it
        // chunked (one that does is de-chunked for the client, `PlainForwarder`).
        return .success(HTTPHead(start: (method, target, head.start.2), fields: out.fields))
    }
}

import Foundation
