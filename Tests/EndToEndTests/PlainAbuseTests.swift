import Foundation
import Testing
import TestSupport

/// Plain HTTP under abuse (issue 16): exchanges the client abandons at every stage release
/// everything within seconds, a client that leaves while the server is silent is noticed, an
/// HTTP/1.0 client never gets chunk framing, framing is read strictly, and a client or server that
/// never reads costs what the README says.
@Suite(.serialized) struct PlainAbuseTests {
    static func url(_ server: Helper, _ path: String) -> String { "http://plain.pinproxy.test:\(server.port)\(path)" }

    /// Waits (bounded) until the proxy holds `descriptors` descriptors and no session at all.
    static func settled(_ proxy: ProxyProcess, descriptors: Int, within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        repeat {
            if proxy.openFileDescriptors == descriptors,
               proxy.lines.last(where: { $0["event"] == "stats" }).map({ $0["active_sessions"] == "0" && $0["live_session_objects"] == "0" }) == true {
                return true
            }
            usleep(100_000)
        } while Date() < deadline
        return false
    }

    /// Waits (bounded) until the proxy holds at least `descriptors` descriptors.
    static func reaches(_ proxy: ProxyProcess, descriptors: Int, within seconds: Double) -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while proxy.openFileDescriptors < descriptors && Date() < deadline { usleep(50_000) }
        return proxy.openFileDescriptors >= descriptors
    }

    /// A few hundred exchanges cut by the client — half reset, half closed — at each stage, all in
    /// flight at once, then cut: the proxy is back to its descriptors and sessions within seconds
    /// (`idle_timeout` is the default 300 s). Before issue 16 a cut while the server was silent
    /// kept both descriptors until the answer or `idle_timeout`.
    @Test func exchangesCutAtEveryStageLeaveNothingBehind() throws {
        let server = try PlainHTTPTests.server()
        let proxy = try ProxyProcess(config: PlainHTTPTests.plainPolicy(port: server.port, proxy: "stats_interval: 100ms"))
        let warm = try rawExchange(port: proxy.port, send: Array("GET \(Self.url(server, "/hello")) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        #expect(warm.hasSuffix("hello plain\n"))
        let upload = "POST \(Self.url(server, "/upload")) HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
        // (stage, what each client sends, descriptors each holds in the proxy once there, whether it reads the answer's start)
        let stages: [(String, String, Int, Bool)] = [
            ("in the head", "GET \(Self.url(server, "/hello")) HTTP/1.1\r\nHost: x\r\n", 1, false),
            ("after the head", upload, 2, false),
            ("in the body", upload + String(repeating: "b", count: 5000), 2, false),
            ("waiting for the answer", "GET \(Self.url(server, "/silent")) HTTP/1.1\r\nHost: x\r\n\r\n", 2, false),
            ("in the answer", "GET \(Self.url(server, "/bytes/\(1 << 40)")) HTTP/1.1\r\nHost: x\r\n\r\n", 2, true),
        ]
        #expect(Self.settled(proxy, descriptors: proxy.openFileDescriptors, within: 30))
        let baseline = proxy.openFileDescriptors
        let perStage = 200
        for (stage, request, held, reads) in stages {
            let linesBefore = proxy.events("http_forwarded").count
            let clients = try (0..<perStage).map { _ in try PlainClient(port: proxy.port) }
            for client in clients { client.send(request) }
            #expect(Self.reaches(proxy, descriptors: baseline + held * perStage, within: 30), "\(stage): \(proxy.openFileDescriptors) descriptors, \(baseline) at rest")
            if reads { for client in clients { #expect(client.receive(atLeast: 1, timeout: 10).hasPrefix("HTTP/1.1 200 OK"), "\(stage)") } }
            for (i, client) in clients.enumerated() { client.cut(reset: i % 2 == 0) }
            #expect(Self.settled(proxy, descriptors: baseline, within: 30),
                    "\(stage): \(proxy.openFileDescriptors) descriptors 30 s after the cuts, \(baseline) before; \(proxy.lines.last { $0["event"] == "stats" } ?? [:])")
            if stage == "waiting for the answer" {
                // Each ended as its client did — a close or a reset — not at a timeout.
                let ended = proxy.events("http_forwarded").dropFirst(linesBefore)
                #expect(ended.count == perStage && ended.allSatisfy { $0["status"] == "0" && $0["bytes_down"] == "0" })
                #expect(ended.filter { $0["outcome"] == "client_closed" }.count == perStage / 2 && ended.filter { $0["outcome"] == "client_error" }.count == perStage / 2,
                        "\(ended.map { $0["outcome"] ?? "?" })")
            }
        }
        #expect(proxy.events("http_forwarded").allSatisfy { $0["outcome"] != "idle_timeout" && $0["outcome"] != "upstream_timeout" })
        // And the proxy still serves.
        #expect(try PlainHTTPTests.curl(proxy: proxy.port, [Self.url(server, "/hello")]).out == "hello plain\n")
    }

    /// Issue 16's item 3: a client whose request waits on a silent server and then leaves is
    /// noticed at once — its reset or its close — while one that is still there (sending its
    /// next request early, pipelined) is not taken for gone. A half-close counts as leaving
    /// (README "Plain HTTP"): the client gets no answer.
    @Test func aClientThatLeavesWhileTheServerIsSilentIsNoticed() throws {
        let server = try PlainHTTPTests.server()
        let proxy = try ProxyProcess(config: PlainHTTPTests.plainPolicy(port: server.port))
        let silent = "GET \(Self.url(server, "/silent")) HTTP/1.1\r\nHost: x\r\n\r\n"
        let before = proxy.openFileDescriptors
        for (reset, outcome) in [(false, "client_closed"), (true, "client_error")] {
            // The previous cut's two descriptors may close just after its line: counted from the
            // same baseline once they have (bounded wait).
            let settling = Date().addingTimeInterval(10)
            while proxy.openFileDescriptors > before && Date() < settling { usleep(50_000) }
            let client = try PlainClient(port: proxy.port)
            client.send(silent)
            #expect(Self.reaches(proxy, descriptors: before + 2, within: 30))  // the client's and the server's connection
            client.cut(reset: reset)
            // Noticed, not timed out: the outcome says which (idle_timeout is the default 300 s,
            // and the silent server never answers).
            let line = try #require(proxy.waitFor("http_forwarded", timeout: 30) { $0["outcome"] == outcome })
            #expect(line["method"] == "GET" && line["host"] == "plain.pinproxy.test" && line["status"] == "0" && line["bytes_down"] == "0", "\(line)")
        }

        let pipelined = try rawExchange(port: proxy.port, send: Array(("GET \(Self.url(server, "/delay/1500")) HTTP/1.1\r\nHost: x\r\n\r\n"
            + "GET \(Self.url(server, "/hello")) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").utf8))
        #expect(pipelined.components(separatedBy: "hello plain\n").count == 3, "\(pipelined)")

        let halfClosed = try PlainClient(port: proxy.port)
        halfClosed.send("GET \(Self.url(server, "/delay/1500")) HTTP/1.1\r\nHost: x\r\n\r\n")
        halfClosed.shutdownWrite()
        #expect(halfClosed.receive(atLeast: 1, timeout: 10) == "")  // closed without an answer
        halfClosed.cut(reset: false)
        let closed = proxy.events("http_forwarded", count: 5).filter { $0["outcome"] == "client_closed" }
        #expect(closed.count == 2 && closed.last?["status"] == "0", "\(proxy.events("http_forwarded"))")
    }

    /// RFC 9112 §6.1: an HTTP/1.0 client cannot read chunk framing. A chunked answer (with an
    /// extension and a trailer) reaches it de-chunked, close-delimited, byte for byte; an HTTP/1.1
    /// client gets the framing as the server sent it.
    @Test func anHTTP10ClientGetsAChunkedAnswerDeChunked() throws {
        let server = try PlainHTTPTests.server()
        let proxy = try ProxyProcess(config: PlainHTTPTests.plainPolicy(port: server.port))
        let old = try rawExchange(port: proxy.port, send: Array("GET \(Self.url(server, "/raw/chunked")) HTTP/1.0\r\n\r\n".utf8))
        #expect(old == "HTTP/1.0 200 OK\r\nX-Test: 1\r\nVia: 1.1 pinproxy\r\nConnection: close\r\n\r\nhello world")
        let line = try #require(proxy.waitFor("http_forwarded"))
        #expect(line["status"] == "200" && line["bytes_down"] == "11" && line["outcome"] == "complete", "\(line)")

        // A HEAD has no body to undo: only the field goes.
        let head = try rawExchange(port: proxy.port, send: Array("HEAD \(Self.url(server, "/raw/chunked")) HTTP/1.0\r\n\r\n".utf8))
        #expect(head == "HTTP/1.0 200 OK\r\nX-Test: 1\r\nVia: 1.1 pinproxy\r\nConnection: close\r\n\r\n")

        let current = try rawExchange(port: proxy.port, send: Array("GET \(Self.url(server, "/raw/chunked")) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        #expect(current == "HTTP/1.1 200 OK\r\nX-Test: 1\r\nTransfer-Encoding: chunked\r\nVia: 1.1 pinproxy\r\nConnection: close\r\n\r\n"
                + "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n")
    }

    /// Framing read strictly (RFC 9112): a `+200` status line, a head over 64 KiB, or one that
    /// would reach the client with more than 100 fields is refused before anything reaches the
    /// client (502), and a body whose chunk-size line is `5 6`, or whose chunk size is 2^41, is
    /// cut where it stops being HTTP, nothing of it forwarded; a client's `5 6` is refused 400.
    @Test func laxFramingFromAServerIsRefused() throws {
        let server = try PlainHTTPTests.server()
        let proxy = try ProxyProcess(config: PlainHTTPTests.plainPolicy(port: server.port))
        let plus = try rawExchange(port: proxy.port, send: Array("GET \(Self.url(server, "/raw/plus-status")) HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(statusLine(plus) == "HTTP/1.1 502 Bad Upstream Response", "\(plus)")
        #expect(header("Proxy-Status", in: plus) == "pinproxy; error=http_response_incomplete; details=\"bad_upstream_response\"")
        let rejected = try #require(proxy.waitFor("request_rejected"))
        #expect(rejected.refusal == .network(.badUpstreamResponse) && rejected["status"] == "502")
        #expect(rejected["detail"] == "the server's answer is not an HTTP/1.x response pinproxy forwards")
        #expect(proxy.waitFor("http_forwarded")?["outcome"] == "bad_response")

        // A head over 64 KiB is refused as soon as 64 KiB of it is in (the server is read 64 KiB ahead at most).
        let long = try rawExchange(port: proxy.port, send: Array("GET \(Self.url(server, "/raw/long-head")) HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(statusLine(long) == "HTTP/1.1 502 Bad Upstream Response" && long.contains("the response head is over 65536 bytes"), "\(long)")

        // The 100-field limit holds for what pinproxy writes: 100 fields plus Via and Connection is too many.
        let many = try rawExchange(port: proxy.port, send: Array("GET \(Self.url(server, "/raw/many-fields")) HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(statusLine(many) == "HTTP/1.1 502 Bad Upstream Response" && many.contains("more than 100 fields, Via and Connection included"), "\(many)")

        // The same strictness for a client's body: `5 6` is refused 400, and the server gets no more of it.
        let upload = try rawExchange(port: proxy.port, send: Array("POST \(Self.url(server, "/upload")) HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5 6\r\nhello\r\n0\r\n\r\n".utf8))
        #expect(statusLine(upload) == "HTTP/1.1 400 Bad Request", "\(upload)")
        #expect(proxy.waitFor("request_rejected") { $0["detail"] == "the request body: a chunk size followed by something other than a chunk extension" }?.refusal == .network(.badRequest))
        #expect(proxy.waitFor("http_forwarded") { $0["method"] == "POST" }?["outcome"] == "bad_request_body")

        for (path, count) in [("/raw/bad-chunk", 5), ("/raw/huge-chunk", 6)] {
            let cut = try rawExchange(port: proxy.port, send: Array("GET \(Self.url(server, path)) HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            #expect(cut == "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nVia: 1.1 pinproxy\r\nConnection: keep-alive\r\n\r\n", "\(path): \(cut)")
            let lines = proxy.events("http_forwarded", count: count)
            #expect(lines.count == count && lines.last?["outcome"] == "bad_response" && lines.last?["status"] == "200" && lines.last?["bytes_down"] == "0",
                    "\(path): \(lines)")
        }
    }

    /// Issue 16's item 10: 100 clients that never read an endless answer, then 100 uploads to a
    /// server that never reads, each cost at most what the README says (256 KiB queued toward
    /// the side that does not read, 64 KiB read ahead from the other): 320 KiB of RSS per client.
    /// They cost 527 and 521 KiB before issue 16 (libevent's half-empty 8 KiB read chains were
    /// moved, not packed, and the server was read 256 KiB ahead).
    @Test func neverReadingClientsAndStalledUploadsCostWhatTheREADMESays() throws {
        let server = try PlainHTTPTests.server()
        // One worker, as in ResourceTests: the bound is per exchange, not per thread's allocator caches.
        let proxy = try ProxyProcess(config: PlainHTTPTests.plainPolicy(port: server.port, proxy: "workers: 1\nidle_timeout: 120s\nstats_interval: 100ms"))
        let clients = 100
        let bound = AddressSanitizer.isActive ? 600 : 320
        for _ in 0..<2 { _ = try rawExchange(port: proxy.port, send: Array("GET \(Self.url(server, "/hello")) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)) }
        #expect(Self.settled(proxy, descriptors: proxy.openFileDescriptors, within: 30))
        let descriptors = proxy.openFileDescriptors

        let baseline = proxy.rssKiB
        let readers = try (0..<clients).map { _ in try PlainClient(port: proxy.port, buffers: 4096) }
        for reader in readers { reader.send("GET \(Self.url(server, "/bytes/\(1 << 40)")) HTTP/1.1\r\nHost: x\r\n\r\n") }
        let downloads = Self.steadyRSS(proxy, above: baseline, floorKiB: clients * 192)
        print("plain HTTP, \(clients) clients that never read: RSS \(baseline) KiB before, \(downloads) KiB held, \((downloads - baseline) / clients) KiB each")
        #expect((downloads - baseline) / clients <= bound, "\((downloads - baseline) / clients) KiB per never-reading client (\(downloads) KiB, \(baseline) KiB before)")
        for reader in readers { reader.cut(reset: true) }
        #expect(Self.settled(proxy, descriptors: descriptors, within: 30))

        let before = proxy.rssKiB
        let uploaders = try (0..<clients).map { _ in try PlainClient(port: proxy.port, buffers: 4096) }
        for uploader in uploaders { uploader.send("POST \(Self.url(server, "/sink")) HTTP/1.1\r\nHost: x\r\nContent-Length: \(1 << 40)\r\n\r\n") }
        PlainClient.pushUntilStalled(uploaders, within: 60)
        let uploads = Self.steadyRSS(proxy, above: before, floorKiB: clients * 192)
        print("plain HTTP, \(clients) uploads to a server that never reads: RSS \(before) KiB before, \(uploads) KiB held, \((uploads - before) / clients) KiB each")
        #expect((uploads - before) / clients <= bound, "\((uploads - before) / clients) KiB per stalled upload (\(uploads) KiB, \(before) KiB before)")
        for uploader in uploaders { uploader.cut(reset: true) }
        #expect(Self.settled(proxy, descriptors: descriptors, within: 30))
    }

    /// The proxy's RSS once the stalled exchanges have filled their buffers: grown by at least
    /// `floorKiB` (each comes to hold `highWater`, 256 KiB, once the side that sends has filled it), then
    /// four samples 250 ms apart within 256 KiB of each other; or the largest seen within 30 s.
    static func steadyRSS(_ proxy: ProxyProcess, above baseline: Int, floorKiB: Int) -> Int {
        var samples: [Int] = []
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            samples.append(proxy.rssKiB)
            if let last = samples.last, last - baseline >= floorKiB, samples.count >= 4,
               let low = samples.suffix(4).min(), let high = samples.suffix(4).max(), high - low < 256 {
                break
            }
            usleep(250_000)
        }
        return samples.max() ?? 0
    }
}

/// A raw client socket to the proxy: sends what a test says, reads, and leaves the ways a client
/// can (a close, a reset, a half-close).
final class PlainClient {
    let fd: Int32
    private var isOpen = true

    /// `buffers`: the socket's send and receive buffer sizes, set before it connects, so that the
    /// kernel holds little of what the client does not read or cannot send.
    init(port: UInt16, buffers: Int32? = nil) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw HelperError(message: "socket failed") }
        if var size = buffers {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard ok == 0 else {
            Glibc.close(fd)
            throw HelperError(message: "connect failed")
        }
    }

    deinit { cut(reset: false) }

    func send(_ text: String) {
        _ = Array(text.utf8).withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Leaves: a reset (SO_LINGER 0), or a close (which the kernel turns into a reset itself when
    /// bytes the client never read are waiting).
    func cut(reset: Bool) {
        guard isOpen else { return }
        if reset {
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }
        Glibc.close(fd)
        isOpen = false
    }

    /// What arrives until at least `count` bytes are in, the proxy closes, or `timeout` passes.
    func receive(atLeast count: Int, timeout: Double) -> String {
        var tv = timeval(tv_sec: 0, tv_usec: 200_000)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = Date().addingTimeInterval(timeout)
        while received.count < count && Date() < deadline {
            let n = recv(fd, &buffer, buffer.count, 0)
            if n == 0 { break }
            if n > 0 { received += buffer[0..<n] }
        }
        return String(decoding: received, as: UTF8.self)
    }

    /// Sends from every client, without blocking, until none of them can send more for a second
    /// (their uploads have filled every buffer on the way), or `within` seconds pass.
    static func pushUntilStalled(_ clients: [PlainClient], within seconds: Double) {
        let block = [UInt8](repeating: 0x75, count: 16 * 1024)
        let deadline = Date().addingTimeInterval(seconds)
        var lastProgress = Date()
        while Date() < deadline && Date().timeIntervalSince(lastProgress) < 1 {
            var progressed = false
            for client in clients {
                let n = block.withUnsafeBytes { Glibc.send(client.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
                if n > 0 { progressed = true }
            }
            if progressed { lastProgress = Date() } else { usleep(50_000) }
        }
    }
}
