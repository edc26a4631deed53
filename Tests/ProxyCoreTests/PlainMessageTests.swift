import PinPolicy
import Testing
@testable import ProxyCore

/// The plain-HTTP message rules, without a socket: which requests are forwarded and how their
/// heads are rewritten, and where a body ends.
@Suite struct PlainMessageTests {
    static func request(_ text: String) -> Result<PlainRequest, PlainRequest.Problem> { PlainRequest.parse(head: Array(text.utf8)) }

    @Test func anAbsoluteFormRequestIsRewrittenForTheServer() throws {
        let text = "GET http://Example.TEST/a/b?c=d HTTP/1.1\r\nHost: other\r\nConnection: keep-alive, X-Drop\r\nX-Drop: 1\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nTE: trailers\r\nAccept: */*\r\n\r\n"
        let request = try Self.request(text).get()
        #expect(request.method == "GET" && request.authority.description == "example.test:80" && request.path == "/a/b?c=d")
        let head = String(decoding: try request.upstreamHead(viaParent: nil).get().bytes, as: UTF8.self)
        #expect(head == "GET /a/b?c=d HTTP/1.1\r\nHost: example.test\r\nAccept: */*\r\nVia: 1.1 pinproxy\r\n\r\n")
        let viaParent = String(decoding: try request.upstreamHead(viaParent: .init(address: .parse("127.0.0.1:8080")!, authorization: "Basic cDpx")).get().bytes, as: UTF8.self)
        #expect(viaParent.hasPrefix("GET http://example.test/a/b?c=d HTTP/1.1\r\n") && viaParent.contains("\r\nProxy-Authorization: Basic cDpx\r\n"))
        #expect(try Self.request("GET http://[::1]:8080 HTTP/1.0\r\n\r\n").get().upstreamHead(viaParent: nil).get().bytes
                == Array("GET / HTTP/1.0\r\nHost: [::1]:8080\r\nVia: 1.0 pinproxy\r\n\r\n".utf8))
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\n\r\n", PlainRequest.Problem.originForm("/")),
        ("OPTIONS * HTTP/1.1\r\n\r\n", .originForm("*")),
        ("TRACE http://a.test/ HTTP/1.1\r\n\r\n", .methodNotAllowed("TRACE")),
        ("GET https://a.test/ HTTP/1.1\r\n\r\n", .notHTTP("https://a.test/")),
        ("GET ftp://a.test/ HTTP/1.1\r\n\r\n", .notHTTP("ftp://a.test/")),
        ("GET http://a.test/ HTTP/2\r\n\r\n", .malformed("unsupported protocol version 'HTTP/2'; pinproxy speaks HTTP/1.1 and HTTP/1.0")),
        ("POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", .malformed("both Transfer-Encoding and Content-Length")),
        ("POST http://a.test/ HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", .malformed("a bad Content-Length")),
        ("POST http://a.test/ HTTP/1.1\r\nContent-Length: -1\r\n\r\n", .malformed("a bad Content-Length")),
        ("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", .malformed("a request Transfer-Encoding other than chunked")),
        ("GET http://a.test/ HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", .malformed("more than one Host header")),
        ("POST http://a.test/ HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", .malformed("Transfer-Encoding in an HTTP/1.0 request")),
        ("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: ,chunked\r\n\r\n", .malformed("a request Transfer-Encoding other than one 'chunked'")),
        ("POST http://a.test/ HTTP/1.1\r\nContent-Length: 5,5\r\n\r\n", .malformed("a Content-Length other than one number")),
        ("GET http://a.test/#x HTTP/1.1\r\n\r\n", .malformed("a fragment ('#') in the request target")),
        ("GET http://a.test/ HTTP/1.1\r\n folded\r\n\r\n", .malformed("obsolete header line folding is not accepted")),
        ("GET http://a.test/ HTTP/1.1\r\nUpgrade: websocket\r\n\r\n", .malformed("Upgrade and Expect (other than 100-continue) are not forwarded")),
    ])
    func refused(text: String, problem: PlainRequest.Problem) {
        guard case .failure(let got) = Self.request(text) else { Issue.record("accepted: \(text)"); return }
        #expect(got == problem)
    }

    /// The server is told the framing pinproxy meters, in the one spelling it reads.
    @Test func theFramingIsWrittenOneWay() throws {
        let chunked = try Self.request("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n").get()
        #expect(try chunked.upstreamHead(viaParent: nil).get().bytes == Array("POST / HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nVia: 1.1 pinproxy\r\n\r\n".utf8))
        let empty = try Self.request("POST http://a.test/ HTTP/1.1\r\nContent-Length: 00\r\n\r\n").get()
        #expect(try empty.upstreamHead(viaParent: nil).get().bytes == Array("POST / HTTP/1.1\r\nHost: a.test\r\nContent-Length: 0\r\nVia: 1.1 pinproxy\r\n\r\n".utf8))
    }

    @Test func bodyLengths() throws {
        #expect(try Self.request("POST http://a.test/ HTTP/1.1\r\nContent-Length: 5\r\n\r\n").get().body == .length(5))
        #expect(try Self.request("POST http://a.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n").get().body == .chunked)
        #expect(try Self.request("GET http://a.test/ HTTP/1.1\r\n\r\n").get().body == BodyLength.none)
        let response = try HTTPHead.parse(Array("HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n".utf8)).get()
        #expect(response.bodyLength(isResponse: true, requestMethod: "HEAD") == .success(BodyLength.none))
        #expect(response.bodyLength(isResponse: true, requestMethod: "GET") == .success(.length(9)))
        let noLength = try HTTPHead.parse(Array("HTTP/1.1 200 OK\r\n\r\n".utf8)).get()
        #expect(noLength.bodyLength(isResponse: true, requestMethod: "GET") == .success(.untilClose))
        let notModified = try HTTPHead.parse(Array("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n".utf8)).get()
        #expect(notModified.bodyLength(isResponse: true, requestMethod: "GET") == .success(BodyLength.none))
    }

    static func meter(_ length: BodyLength, _ text: String, slice: Int) -> (used: Int, done: Bool, error: String?) {
        var meter = BodyMeter(length)
        let bytes = Array(text.utf8)
        var used = 0
        while used < bytes.count && !meter.isDone {
            let end = min(bytes.count, used + slice)
            let step = bytes[used..<end].withUnsafeBytes { meter.consume($0) }
            switch step {
            case .consumed(let n): used += n
            case .malformed(let why): return (used, false, why)
            }
            if case .consumed(0) = step { break }
        }
        return (used, meter.isDone, nil)
    }

    /// Fed whole or a byte at a time, the meter stops exactly where the message ends.
    @Test(arguments: [1, 3, 1000]) func aChunkedBodyEndsAfterItsTrailers(slice: Int) {
        let body = "5\r\nhello\r\n1;ext=1\r\n!\r\n0\r\nX-Trailer: t\r\n\r\n"
        let r = Self.meter(.chunked, body + "GET http://next/ HTTP/1.1\r\n", slice: slice)
        #expect(r.used == body.utf8.count && r.done && r.error == nil)
        #expect(Self.meter(.chunked, "0\r\n\r\nnext", slice: slice).used == 5)
        #expect(Self.meter(.length(4), "abcdefgh", slice: slice).used == 4)
    }

    @Test(arguments: [
        ("zz\r\n", "a chunk size that is not hexadecimal"),
        ("\r\n", "an empty chunk-size line"),
        ("\n", "a chunk-size line not ended by CRLF"),
        // Strictly CRLF and no control bytes: a server that splits where pinproxy does not would
        // read a second message out of the body (request smuggling).
        ("5\nhello\r\n", "a chunk-size line not ended by CRLF"),
        ("3\r\nabc\n0\r\n\r\n", "a chunk's data is not followed by CRLF"),
        ("1;a\rb\r\n", "a chunk-size line not ended by CRLF"),
        ("1;a\u{1}b\r\n", "a control byte in a chunk extension"),
        ("0\r\nX: 1\n\r\n", "a control byte in a trailer line"),
        ("0\r\n\n", "a control byte in a trailer line"),
        ("3\r\nabcX", "a chunk's data is not followed by CRLF"),
        (String(repeating: "1", count: 30) + "\r\n", "a chunk size over 2147483647 bytes"),
        ("1" + String(repeating: " ", count: 5000) + ";x\r\n", "a chunk-size line over 4096 bytes"),
        // chunk-size = 1*HEXDIG, then CRLF or a chunk extension (whitespace only before its ';'):
        // a server that read `5 6` as 0x56, or stopped at the space, would cut the body elsewhere.
        ("5 6\r\nhello\r\n", "a chunk size followed by something other than a chunk extension"),
        ("5 \r\nhello\r\n", "a chunk size followed by something other than a chunk extension"),
        ("5\t6\r\n", "a chunk size followed by something other than a chunk extension"),
        ("+5\r\nhello\r\n", "a chunk size that is not hexadecimal"),
        ("0x5\r\nhello\r\n", "a chunk size that is not hexadecimal"),
        (" 5\r\nhello\r\n", "a chunk size that is not hexadecimal"),
        ("5g\r\n", "a chunk size that is not hexadecimal"),
        // 2^41, forwarded as it came before; and one past 2^31 - 1.
        ("20000000000\r\n", "a chunk size over 2147483647 bytes"),
        ("80000000\r\n", "a chunk size over 2147483647 bytes"),
        ("00000000000000005\r\nhello\r\n", "a chunk size of more than 16 digits"),
    ])
    func aBadChunkedBodyIsMalformed(text: String, error: String) {
        #expect(Self.meter(.chunked, text, slice: 7).error == error)
        #expect(Self.meter(.chunked, text, slice: 1).error == error)
    }

    /// What the strict reading still accepts: leading zeros (16 digits at most), the largest
    /// size, whitespace before an extension, extensions with values.
    @Test(arguments: ["0000000000000005\r\nhello\r\n0\r\n\r\n", "5 ;a=1\r\nhello\r\n0\r\n\r\n", "5\t; a = \"b c\"\r\nhello\r\n0 ;z\r\n\r\n",
                      "A\r\n0123456789\r\n0\r\n\r\n"])
    func aStrictChunkSizeLineStillReadsWhatRFC9112Allows(text: String) {
        let r = Self.meter(.chunked, text + "next", slice: 2)
        #expect(r.error == nil && r.done && r.used == text.utf8.count, "\(r)")
    }

    @Test func theLargestChunkSizeIsMeteredNotRefused() {
        var meter = BodyMeter(.chunked)
        let step = Array("7fffffff\r\n".utf8).withUnsafeBytes { meter.consume($0) }
        #expect(step == .consumed(10) && meter.state == .chunkData(Int(Int32.max)))
    }

    /// De-chunking reads framing only: the meter stops where data begins.
    @Test func stopAtDataSeparatesFramingFromData() {
        var meter = BodyMeter(.chunked)
        let bytes = Array("5;x\r\nhello\r\n0\r\n\r\n".utf8)
        #expect(bytes.withUnsafeBytes { meter.consume($0, stopAtData: true) } == .consumed(5))
        #expect(meter.plainBytesAhead == 5)
        meter.consume(count: 5)
        #expect(bytes[10...].withUnsafeBytes { meter.consume($0, stopAtData: true) } == .consumed(7) && meter.isDone)
    }

    /// status-code = 3DIGIT (RFC 9112 §4): `+200` or `0200` is no status pinproxy passes on.
    @Test(arguments: [("HTTP/1.1 200 OK", 200), ("HTTP/1.1 404", 404), ("HTTP/1.1 +200 OK", nil), ("HTTP/1.1 0200 OK", nil),
                      ("HTTP/1.1 20 OK", nil), ("HTTP/1.1 2OO OK", nil), ("HTTP/1.1 -200 OK", nil), ("HTTP/1.1 ٢٠٠ OK", nil)])
    func theStatusCodeIsThreeDigits(line: String, status: Int?) {
        let head = try? HTTPHead.parse(Array((line + "\r\n\r\n").utf8)).get()
        #expect(head?.statusCode == status, "\(line)")
    }

    /// The 100-field limit holds for what pinproxy writes: a request with 100 fields and no
    /// `Host` would go on with 102 (Host and Via added), so it is refused (431) instead.
    @Test func theFieldLimitCountsWhatPinproxyAdds() throws {
        let fields = (1...100).map { "X-F\($0): v\r\n" }.joined()
        let full = try Self.request("GET http://a.test/ HTTP/1.1\r\n\(fields)\r\n").get()
        guard case .failure(.tooManyFields(102)) = full.upstreamHead(viaParent: nil) else { Issue.record("accepted"); return }
        #expect(PlainRequest.Problem.tooManyFields(102).refusal.status == 431)
        let fits = (1...98).map { "X-F\($0): v\r\n" }.joined()
        let ok = try Self.request("GET http://a.test/ HTTP/1.1\r\n\(fits)\r\n").get()
        #expect(try ok.upstreamHead(viaParent: nil).get().fields.count == 100)
        // A parent's credentials count too.
        let parent = UpstreamProxy(address: .parse("127.0.0.1:8080")!, authorization: "Basic cDpx")
        guard case .failure(.tooManyFields(101)) = ok.upstreamHead(viaParent: parent) else { Issue.record("accepted through a parent"); return }
    }
}
