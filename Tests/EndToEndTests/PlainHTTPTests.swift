import Foundation
import Testing
import TestSupport

/// Plain HTTP through pinproxy (`proxy.plain_http`, issue 10 item 3): absolute-form requests are
/// forwarded like an HTTP/1.1 proxy does, with bounded memory whatever the body size, and a host a
/// rule pins is never reached over plain HTTP.
@Suite(.serialized) struct PlainHTTPTests {
    /// scripts/plainhttp.py on 127.0.0.1.
    static func server() throws -> Helper { try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/plainhttp.py"]) }

    /// A policy that lets plain HTTP reach `port` (by name, plain.pinproxy.test, and by address) and
    /// pins api.pinproxy.test.
    static func plainPolicy(port: UInt16, proxy: String = "", unpinned: String = "allow") -> String {
        policy(ports: [443], rules: apiRule(pinsLine(Pins.leafEC)), unpinned: unpinned,
               resolve: "  api.pinproxy.test: 127.0.0.1\n  plain.pinproxy.test: 127.0.0.1",
               proxy: "allowed_plain_ports: [\(port)]" + (proxy.isEmpty ? "" : "\n" + proxy))
    }

    /// curl with `http_proxy` pointing at pinproxy: the body, and per URL `<status> <connects>`.
    static func curl(proxy: UInt16, _ arguments: [String], timeout: Double = 60) throws -> (status: Int32, out: String, err: String) {
        var environment = ProcessInfo.processInfo.environment
        environment["http_proxy"] = "http://127.0.0.1:\(proxy)"
        environment["no_proxy"] = ""
        environment["NO_PROXY"] = ""
        let r = try run("/usr/bin/curl", ["-sS", "--max-time", String(Int(timeout))] + arguments, environment: environment, timeout: timeout + 10)
        return (r.status, r.stdout, r.stderr)
    }

    @Test func aGetThroughCurlWithHttpProxyIsForwardedAndLogged() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        let r = try Self.curl(proxy: proxy.port, ["http://plain.pinproxy.test:\(server.port)/hello"])
        #expect(r.status == 0 && r.out == "hello plain\n", "\(r)")
        let line = try #require(proxy.waitFor("http_forwarded"))
        #expect(line["method"] == "GET" && line["host"] == "plain.pinproxy.test" && line["port"] == String(server.port))
        #expect(line["status"] == "200" && line["bytes_down"] == "12" && line["bytes_up"] == "0" && line["outcome"] == "complete")
        #expect(line["address"] == "127.0.0.1:\(server.port)" && line["duration_ms"] != nil)

        // What the server saw: origin-form, its own Host, a Via, and no hop-by-hop fields.
        let seen = try Self.curl(proxy: proxy.port, ["-H", "Connection: X-Secret", "-H", "X-Secret: no", "-H", "Keep-Alive: 5",
                                                     "http://plain.pinproxy.test:\(server.port)/headers"]).out
        #expect(seen.hasPrefix("GET /headers HTTP/1.1\n"), "\(seen)")
        #expect(seen.contains("Host: plain.pinproxy.test:\(server.port)\n") && seen.contains("Via: 1.1 pinproxy\n"), "\(seen)")
        #expect(!seen.lowercased().contains("proxy-connection") && !seen.contains("X-Secret") && !seen.contains("Keep-Alive"), "\(seen)")
    }

    @Test func twoRequestsShareOneClientConnectionAndOneServerConnection() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        let url = "http://plain.pinproxy.test:\(server.port)/hello"
        let r = try Self.curl(proxy: proxy.port, ["-w", "[%{http_code} %{num_connects}]", url, url])
        #expect(r.out == "hello plain\n[200 1]hello plain\n[200 0]", "\(r)")
        let lines = proxy.events("http_forwarded", count: 2)
        #expect(lines.count == 2 && lines[0]["conn"] == lines[1]["conn"])
        // The server answered both on the connection pinproxy kept: the same upstream connection.
        #expect(Set(lines.map { $0["outcome"] }) == ["complete"])
    }

    @Test func chunkedDownloadAndChunkedUploadStreamThrough() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        let down = try Self.curl(proxy: proxy.port, ["http://plain.pinproxy.test:\(server.port)/chunked"])
        #expect(down.out == (0..<100).map { "chunk \($0)\n" }.joined(), "\(down)")
        let upload = try temporaryFile(String(repeating: "0123456789abcdef", count: 100_000), name: "upload.bin")
        let up = try Self.curl(proxy: proxy.port, ["-H", "Transfer-Encoding: chunked", "--data-binary", "@\(upload)",
                                                   "http://plain.pinproxy.test:\(server.port)/upload"])
        let expected = try run("/usr/bin/sha256sum", [upload]).stdout.split(separator: " ").first.map(String.init) ?? "?"
        #expect(up.out == "received 1600000 sha256 \(expected)\n", "\(up)")
        let lines = proxy.events("http_forwarded", count: 2)
        #expect(lines.last?["method"] == "POST" && (Int(lines.last?["bytes_up"] ?? "") ?? 0) > 1_600_000)  // with the chunk framing
    }

    @Test func headHasNoBodyAndPostWithContentLengthArrivesWhole() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        let head = try Self.curl(proxy: proxy.port, ["-I", "http://plain.pinproxy.test:\(server.port)/hello"])
        #expect(head.out.hasPrefix("HTTP/1.1 200 OK\r\n") && head.out.contains("Content-Length: 12\r\n") && head.out.hasSuffix("\r\n\r\n"), "\(head)")
        let line = try #require(proxy.waitFor("http_forwarded"))
        #expect(line["method"] == "HEAD" && line["bytes_down"] == "0" && line["outcome"] == "complete")

        let post = try Self.curl(proxy: proxy.port, ["--data-binary", "hello server", "http://plain.pinproxy.test:\(server.port)/upload"])
        #expect(post.out == "received 12 sha256 \(sha256("hello server"))\n", "\(post)")
        #expect(proxy.events("http_forwarded", count: 2).last?["bytes_up"] == "12")
    }

    /// 1 GiB each way through one proxy: its memory stays within a few MiB of where it started,
    /// because each direction holds at most `PlainForwarder.highWater` bytes.
    @Test func aGiBEachWayKeepsTheProxysMemoryBounded() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        _ = try Self.curl(proxy: proxy.port, ["-o", "/dev/null", "http://plain.pinproxy.test:\(server.port)/hello"])
        let baseline = proxy.rssKiB
        let gib = 1 << 30
        let bound = baseline + (16 * 1024 + AddressSanitizer.memorySlackKiB)
        var peak = baseline
        let download = try BackgroundRun("/usr/bin/env", ["http_proxy=http://127.0.0.1:\(proxy.port)", "no_proxy=", "/usr/bin/curl", "-sS", "--max-time", "240",
                                                          "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                                                          "http://plain.pinproxy.test:\(server.port)/bytes/\(gib)"])
        let deadline = Date().addingTimeInterval(250)
        while proxy.events("http_forwarded").count < 2 && Date() < deadline {
            peak = max(peak, proxy.rssKiB)
            usleep(100_000)
        }
        #expect(download.output(timeout: 10) == "200 \(gib)")
        let sparse = try temporaryDirectory() + "/gib"
        #expect(FileManager.default.createFile(atPath: sparse, contents: nil))
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: sparse))
        try handle.truncate(atOffset: UInt64(gib))
        try handle.close()
        let upload = try BackgroundRun("/usr/bin/env", ["http_proxy=http://127.0.0.1:\(proxy.port)", "no_proxy=", "/usr/bin/curl", "-sS", "--max-time", "240",
                                                        "-T", sparse, "http://plain.pinproxy.test:\(server.port)/upload"])
        while proxy.events("http_forwarded").count < 3 && Date() < deadline {
            peak = max(peak, proxy.rssKiB)
            usleep(100_000)
        }
        let uploaded = upload.output(timeout: 10)
        #expect(uploaded.hasPrefix("received \(gib) sha256 "), "\(uploaded)")
        let lines = proxy.events("http_forwarded")
        #expect(lines.count == 3 && lines[1]["bytes_down"] == String(gib) && lines[2]["bytes_up"] == String(gib), "\(lines)")
        #expect(peak <= bound, "RSS peaked at \(peak) KiB, from \(baseline) KiB")
        print("plain HTTP 1 GiB each way: RSS \(baseline) KiB before, \(peak) KiB at the peak")
    }

    @Test func aPinnedHostIsNeverReachedOverPlainHTTP() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        let response = try rawExchange(port: proxy.port, send: Array("GET http://api.pinproxy.test:\(server.port)/hello HTTP/1.1\r\nHost: api.pinproxy.test\r\n\r\n".utf8))
        #expect(statusLine(response) == "HTTP/1.1 403 Pinned Host Requires HTTPS")
        #expect(header("Proxy-Status", in: response) == "pinproxy; error=http_request_denied; details=\"plain_http_to_pinned_host\"")
        #expect(header("Connection", in: response) == "close")
        let line = try #require(proxy.waitFor("request_rejected"))
        #expect(line.refusal == .network(.plainHTTPToPinnedHost) && line["status"] == "403" && line["method"] == "GET")
        #expect(line["host"] == "api.pinproxy.test" && line["port"] == String(server.port))
        #expect(line["hint"] == "use https:// for this host: pinproxy never reaches a pinned host over plain HTTP")
        #expect(line["detail"]?.contains("pinned by the rule api.pinproxy.test") == true)

        // Not on a kept-alive connection after an allowed request either, and the server never saw it.
        let r = try Self.curl(proxy: proxy.port, ["-w", "[%{http_code}]", "http://plain.pinproxy.test:\(server.port)/hello",
                                                  "http://api.pinproxy.test:\(server.port)/count"])
        #expect(r.out.hasPrefix("hello plain\n[200]") && r.out.hasSuffix("[403]"), "\(r)")
        let count = try Self.curl(proxy: proxy.port, ["http://plain.pinproxy.test:\(server.port)/count"]).out
        #expect(count == "2\n")  // /hello and this /count
        #expect(proxy.events("http_forwarded").allSatisfy { $0["host"] == "plain.pinproxy.test" })
    }

    @Test func portsOutsideAllowedPlainPortsAndDeniedDestinationsAreRefused() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        let port = try rawExchange(port: proxy.port, send: Array("GET http://plain.pinproxy.test:81/ HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(statusLine(port) == "HTTP/1.1 403 Forbidden by Pin Policy")
        #expect(header("Proxy-Status", in: port) == "pinproxy; error=http_request_denied; details=\"plain_port_not_allowed\"")
        let line = try #require(proxy.waitFor("request_rejected"))
        #expect(line.refusal == .network(.plainPortNotAllowed) && line["detail"] == "port 81 is not in allowed_plain_ports (\(server.port))")

        let denyLoopback = Self.plainPolicy(port: server.port)
            .replacingOccurrences(of: "deny_destinations: [link-local, unspecified, multicast]", with: "deny_destinations: [loopback]")
        let denied = try ProxyProcess(config: denyLoopback)
        for target in ["127.0.0.1", "plain.pinproxy.test"] {
            let response = try rawExchange(port: denied.port, send: Array("GET http://\(target):\(server.port)/hello HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
            #expect(statusLine(response) == "HTTP/1.1 403 Destination Forbidden", "\(target)")
            #expect(header("Proxy-Status", in: response) == "pinproxy; error=destination_ip_prohibited; details=\"destination_ip_prohibited\"")
        }
        let lines = denied.events("request_rejected", count: 2)
        #expect(lines.map { $0["reason"] } == ["destination_ip_prohibited", "destination_ip_prohibited"] && lines.map { $0["host"] } == ["127.0.0.1", "plain.pinproxy.test"])
        #expect(denied.events("http_forwarded").isEmpty)

        let closed = try ProxyProcess(config: Self.plainPolicy(port: server.port, unpinned: "deny"))
        let unpinned = try rawExchange(port: closed.port, send: Array("GET http://plain.pinproxy.test:\(server.port)/hello HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
        #expect(statusLine(unpinned) == "HTTP/1.1 403 Forbidden by Pin Policy")
        #expect(closed.waitFor("request_rejected")?.refusal == .policy(.unpinnedDenied))
    }

    @Test func plainHTTPRefuseAnswersWithAReasonAndAHint() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port, proxy: "plain_http: refuse"))
        let r = try Self.curl(proxy: proxy.port, ["-i", "http://plain.pinproxy.test:\(server.port)/hello"])
        #expect(statusLine(r.out) == "HTTP/1.1 403 Plain HTTP Refused", "\(r)")
        #expect(header("Proxy-Status", in: r.out) == "pinproxy; error=http_request_denied; details=\"plain_http_refused\"")
        let line = try #require(proxy.waitFor("request_rejected"))
        #expect(line.refusal == .network(.plainHTTPRefused) && line["status"] == "403" && line["host"] == "plain.pinproxy.test")
        #expect(line["hint"] == "proxy.plain_http is refuse: use https:// URLs, or set plain_http: forward")
        // The server never saw a request.
        #expect(try Self.curl(proxy: proxy.port, ["http://plain.pinproxy.test:\(server.port)/count"]).out.contains("plain_http_refused"))
        #expect(proxy.events("http_forwarded").isEmpty)
    }

    @Test(arguments: [
        ("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", "400 Bad Request", "bad_request", "'/' is not a proxy request"),
        ("GET https://plain.pinproxy.test/ HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request", "is not an http:// URL"),
        ("TRACE http://plain.pinproxy.test/ HTTP/1.1\r\n\r\n", "405 Method Not Allowed", "method_not_allowed", "method TRACE is not forwarded"),
        ("POST http://plain.pinproxy.test/ HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "400 Bad Request", "bad_request",
         "both Transfer-Encoding and Content-Length"),
        ("GET http://user@plain.pinproxy.test/ HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request", "userinfo"),
    ])
    func requestsThatAreNotForwardedGetAClearAnswer(request: String, status: String, reason: String, detail: String) throws {
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: 80))
        let response = try rawExchange(port: proxy.port, send: Array(request.utf8))
        #expect(statusLine(response) == "HTTP/1.1 \(status)")
        #expect(header("Proxy-Status", in: response)?.hasSuffix("details=\"\(reason)\"") == true)
        #expect(response.contains(detail), "\(response)")
        let line = try #require(proxy.waitFor("request_rejected"))
        #expect(line["reason"] == reason && line["detail"]?.contains(detail) == true && line["hint"] != nil)
    }

    /// A client that asks for a GiB and never reads: the proxy stops reading from the server once
    /// a bounded amount waits for the client, and ends the exchange at `idle_timeout`.
    @Test func aClientThatNeverReadsCostsABoundedAmountAndIsClosed() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port, proxy: "idle_timeout: 2s"))
        let baseline = proxy.rssKiB
        let stalled = try OpenConnection(port: proxy.port, send: "GET http://plain.pinproxy.test:\(server.port)/bytes/\(1 << 30) HTTP/1.1\r\nHost: x\r\n\r\n")
        defer { stalled.close() }
        var peak = baseline
        let deadline = Date().addingTimeInterval(20)
        while proxy.events("http_forwarded").isEmpty && Date() < deadline {
            peak = max(peak, proxy.rssKiB)
            usleep(50_000)
        }
        let line = try #require(proxy.waitFor("http_forwarded", timeout: 1))
        #expect(line["outcome"] == "idle_timeout")
        #expect((Int(line["bytes_down"] ?? "") ?? .max) < 16 << 20, "\(line)")
        #expect(peak <= baseline + 8 * 1024 + AddressSanitizer.memorySlackKiB, "RSS \(peak) KiB, from \(baseline) KiB")
    }

    @Test func aServerThatResetsMidBodyCutsTheClientsResponse() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        let r = try Self.curl(proxy: proxy.port, ["-o", "/dev/null", "-w", "%{http_code} %{size_download}", "http://plain.pinproxy.test:\(server.port)/reset"])
        #expect(r.status == 18 || r.status == 56, "\(r)")  // partial file, or a receive failure
        let line = try #require(proxy.waitFor("http_forwarded"))
        #expect(line["outcome"] == "upstream_reset" && line["status"] == "200", "\(line)")
        #expect((Int(line["bytes_down"] ?? "") ?? 0) <= 100_000)
        // And the proxy still serves.
        #expect(try Self.curl(proxy: proxy.port, ["http://plain.pinproxy.test:\(server.port)/hello"]).out == "hello plain\n")
    }

    /// Behind `proxy.upstream_proxy`, a plain request goes to the parent in absolute-form with the
    /// parent's credentials, and the parent resolves the name.
    @Test func behindAParentProxyThePlainRequestGoesToTheParent() throws {
        let server = try Self.server()
        let parent = try UpstreamProxyTests.Parent(["--mode", "tunnel", "--map", "far.pinproxy.test=127.0.0.1", "--auth", "pinproxy:s3cret"])
        let credentials = try temporaryFile("pinproxy:s3cret\n", name: "parent-credentials")
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port, proxy: "upstream_proxy: http://127.0.0.1:\(parent.port)\nupstream_proxy_credentials_file: \(credentials)"))
        let r = try Self.curl(proxy: proxy.port, ["http://far.pinproxy.test:\(server.port)/hello"])
        #expect(r.out == "hello plain\n", "\(r)")
        #expect(parent.requests == ["GET http://far.pinproxy.test:\(server.port)/hello auth=Basic cGlucHJveHk6czNjcmV0"])
        #expect(proxy.waitFor("http_forwarded")?["address"] == "127.0.0.1:\(parent.port)")
        // A pinned host is refused before the parent is asked.
        let pinned = try Self.curl(proxy: proxy.port, ["-w", "%{http_code}", "-o", "/dev/null", "http://api.pinproxy.test:\(server.port)/hello"])
        #expect(pinned.out == "403" && parent.requests.count == 1)
    }

    /// Two requests in one write (pipelined) get two responses in order; a client that leaves in
    /// the middle of its request body ends the exchange with `client_closed`.
    @Test func pipelinedRequestsAndAClientThatLeavesMidBody() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        let get = "GET http://plain.pinproxy.test:\(server.port)/hello HTTP/1.1\r\nHost: x\r\n\r\n"
        let last = "GET http://plain.pinproxy.test:\(server.port)/count HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        let both = try rawExchange(port: proxy.port, send: Array((get + last).utf8))
        #expect(both.components(separatedBy: "HTTP/1.1 200 OK\r\n").count == 3 && both.contains("hello plain\n") && both.hasSuffix("2\n"), "\(both)")
        #expect(header("Connection", in: both) == "keep-alive")

        let leaving = try OpenConnection(port: proxy.port, send: "POST http://plain.pinproxy.test:\(server.port)/upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\npartial")
        usleep(300_000)
        leaving.close()
        let line = try #require(proxy.waitFor("http_forwarded") { $0["method"] == "POST" })
        #expect(line["outcome"] == "client_closed" && line["bytes_up"] == "7" && line["status"] == "0", "\(line)")
    }

    /// A kept-alive plain-HTTP connection with nothing in flight does not hold up a shutdown's drain.
    @Test func anIdleKeptAliveConnectionClosesAtShutdown() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port, proxy: "drain_timeout: 60s"))
        let connection = try Self.keptConnection(proxy: proxy, server: server)
        defer { connection.close() }
        proxy.signal(SIGTERM)
        #expect(proxy.waitForExit(timeout: 20) == 0)  // well before drain_timeout
        #expect(proxy.events("http_forwarded").count == 1 && proxy.waitFor("stopped") != nil)
    }

    /// A reload that pins a host: the next request to it, even on a kept-alive connection, is refused.
    @Test func aReloadThatPinsAHostRefusesItsNextPlainRequest() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        let connection = try Self.keptConnection(proxy: proxy, server: server)
        defer { connection.close() }
        let pinned = policy(ports: [443], rules: "rules:\n  - host: plain.pinproxy.test\n\(pinsLine(Pins.leafEC))",
                            resolve: "  plain.pinproxy.test: 127.0.0.1", proxy: "allowed_plain_ports: [\(server.port)]")
        try proxy.reload(pinned)
        #expect(proxy.waitFor("policy_reloaded") != nil)
        connection.sendText("GET http://plain.pinproxy.test:\(server.port)/hello HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(statusLine(connection.receive(timeout: 5, until: "HTTPS)")) == "HTTP/1.1 403 Pinned Host Requires HTTPS")
    }
}

extension PlainHTTPTests {
    /// A reload that denies the address of a kept server connection: the next request does not reuse it.
    @Test func aReloadThatDeniesTheServersAddressStopsTheKeptConnection() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        let get = "GET http://plain.pinproxy.test:\(server.port)/hello HTTP/1.1\r\nHost: x\r\n\r\n"
        let connection = try OpenConnection(port: proxy.port, send: get)
        defer { connection.close() }
        #expect(connection.receive(timeout: 5, until: "hello plain\n").hasSuffix("hello plain\n"))
        let denying = Self.plainPolicy(port: server.port)
            .replacingOccurrences(of: "deny_destinations: [link-local, unspecified, multicast]", with: "deny_destinations: [loopback]")
        try proxy.reload(denying)
        #expect(proxy.waitFor("policy_reloaded") != nil)
        connection.sendText(get)
        #expect(statusLine(connection.receive(timeout: 5, until: "(loopback))\n")) == "HTTP/1.1 403 Destination Forbidden")
        #expect(proxy.waitFor("request_rejected")?.refusal == .policy(.destinationProhibited))
    }
}

extension PlainHTTPTests {
    /// A reload that changes nothing this exchange depends on leaves it running to the last byte.
    @Test func anUnrelatedReloadLeavesAnExchangeInFlight() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port, proxy: "stats_interval: 50ms"))
        let size = 8 << 20
        let download = try BackgroundRun("/usr/bin/env", ["http_proxy=http://127.0.0.1:\(proxy.port)", "no_proxy=", "/usr/bin/curl", "-sS", "--max-time", "60",
                                                          "--limit-rate", "2M", "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                                                          "http://plain.pinproxy.test:\(server.port)/bytes/\(size)"])
        #expect(proxy.waitFor("stats") { $0["active_sessions"] == "1" } != nil)  // the exchange is under way
        try proxy.reload(Self.plainPolicy(port: server.port, proxy: "stats_interval: 50ms\nheader_timeout: 20s"))
        #expect(proxy.waitFor("policy_reloaded") != nil)
        #expect(download.output(timeout: 60) == "200 \(size)")
        #expect(proxy.waitFor("http_forwarded")?["outcome"] == "complete")
    }

    /// A server that closes a kept connection just after answering, while the client's next request
    /// is already on its way (pipelined, so it goes out on that connection): the request is sent
    /// again on a fresh connection instead of failing.
    @Test func aKeptConnectionTheServerClosedDoesNotCostTheNextRequest() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port))
        let first = "GET http://plain.pinproxy.test:\(server.port)/then-close HTTP/1.1\r\nHost: x\r\n\r\n"
        let second = "GET http://plain.pinproxy.test:\(server.port)/hello HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        let both = try rawExchange(port: proxy.port, send: Array((first + second).utf8))
        #expect(both.components(separatedBy: "HTTP/1.1 200 OK\r\n").count == 3 && both.hasSuffix("hello plain\n"), "\(both)")
        let lines = proxy.events("http_forwarded", count: 2)
        #expect(lines.map { $0["outcome"] } == ["complete", "complete"], "\(lines)")
        #expect(proxy.events("request_rejected").isEmpty)
    }
}

extension PlainHTTPTests {
    /// A kept server connection that sends bytes nobody asked for, between requests, is let go at
    /// once. Left holding them (100,000, past the 64 KiB read watermark) with reading on, it made
    /// the worker spin until the client's next request or `header_timeout`: libevent calls a read
    /// callback again every loop turn while the input sits at the watermark (2.0 s of CPU in 2 s
    /// before). The client's next request goes out on a fresh connection.
    @Test func aKeptServerThatSpeaksOutOfTurnIsLetGoWithoutSpinning() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port, proxy: "header_timeout: 30s"))
        let connection = try Self.keptConnection(proxy: proxy, server: server, path: "/then-spam")
        defer { connection.close() }
        let spam = try rawExchange(port: server.port, send: Array("GET /spam HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        #expect(spam.hasSuffix("\r\n\r\nsent\n"), "\(spam)")
        let used = proxy.cpuSeconds(whileWaiting: 2)
        #expect(used < 0.5, "the proxy used \(used) s of CPU in 2 s while a kept server's unasked bytes waited")
        let closed = try rawExchange(port: server.port, send: Array("GET /spam-closed HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        #expect(closed.hasSuffix("\r\n\r\nclosed\n"), "\(closed)")
        connection.sendText("GET http://plain.pinproxy.test:\(server.port)/hello HTTP/1.1\r\nHost: x\r\n\r\n")
        let next = connection.receive(timeout: 5, until: "hello plain\n")
        #expect(statusLine(next) == "HTTP/1.1 200 OK" && next.hasSuffix("\r\n\r\nhello plain\n"), "\(next)")
        let lines = proxy.events("http_forwarded", count: 2)
        #expect(lines.map { $0["outcome"] } == ["complete", "complete"] && lines.map { $0["status"] } == ["200", "200"], "\(lines)")
        #expect(lines.map { $0["bytes_down"] } == ["12", "12"] && lines.map { $0["conn"] } == [lines.first?["conn"], lines.first?["conn"]], "\(lines)")
    }
}

extension PlainHTTPTests {
    /// A client connection kept alive after its first request, GET `path` (answered 'hello plain').
    static func keptConnection(proxy: ProxyProcess, server: Helper, path: String = "/hello") throws -> OpenConnection {
        let connection = try OpenConnection(port: proxy.port, send: "GET http://plain.pinproxy.test:\(server.port)\(path) HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(connection.receive(timeout: 5, until: "hello plain\n").hasSuffix("hello plain\n"))
        return connection
    }

    /// 100 KB of a GET /hello head (two fields of 50,000 bytes), all but its end.
    static func longHeadButItsEnd(server: Helper) -> String {
        "GET http://plain.pinproxy.test:\(server.port)/hello HTTP/1.1\r\nHost: x\r\n"
            + "X-A: " + String(repeating: "a", count: 50_000) + "\r\nX-B: " + String(repeating: "b", count: 50_000) + "\r\n"
    }

    /// After a reload that raises `max_request_bytes`, a kept-alive connection's next head may be
    /// as long as the new limit allows, and waiting for its end costs nothing. The connection read
    /// ahead only as far as the limit it started under (64 KiB), so a head longer than that sat at
    /// the read watermark with reading on, and libevent called the read callback again every loop
    /// turn until `header_timeout` (2.0 s of CPU in 2 s before; and, reading stopped there, the
    /// head's end was never read).
    @Test func aLongHeadAfterAReloadRaisedTheLimitDoesNotSpinTheWorker() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port, proxy: "header_timeout: 30s"))
        let connection = try Self.keptConnection(proxy: proxy, server: server)
        defer { connection.close() }
        try proxy.reload(Self.plainPolicy(port: server.port, proxy: "header_timeout: 30s\nmax_request_bytes: 262144"))
        #expect(proxy.waitFor("policy_reloaded") != nil)
        connection.sendText(Self.longHeadButItsEnd(server: server))
        let used = proxy.cpuSeconds(whileWaiting: 2)
        #expect(used < 0.5, "the proxy used \(used) s of CPU in 2 s while a long head waited for its end")
        connection.sendText("\r\n")
        let next = connection.receive(timeout: 5, until: "hello plain\n")
        #expect(statusLine(next) == "HTTP/1.1 200 OK" && next.hasSuffix("\r\n\r\nhello plain\n"), "\(next)")
        let lines = proxy.events("http_forwarded", count: 2)
        #expect(lines.map { $0["outcome"] } == ["complete", "complete"] && lines.map { $0["status"] } == ["200", "200"], "\(lines)")
        #expect(proxy.events("request_rejected").isEmpty)
    }

    /// The other way: a reload that lowers `max_request_bytes` under a head already waiting on a
    /// kept-alive connection answers it 431 at once. The lower read watermark only paused reading
    /// (libevent calls nothing back for it), so the head waited for `header_timeout` instead.
    @Test func aReloadThatLowersTheLimitAnswersAWaitingLongHeadAtOnce() throws {
        let server = try Self.server()
        let proxy = try ProxyProcess(config: Self.plainPolicy(port: server.port, proxy: "header_timeout: 60s\nmax_request_bytes: 262144"))
        let connection = try Self.keptConnection(proxy: proxy, server: server)
        defer { connection.close() }
        connection.sendText(Self.longHeadButItsEnd(server: server))  // within the first limit: it waits for the rest
        // Let the proxy read it (a waiting head logs nothing to wait for). Were it read only after
        // the reload, the 431 would come from that read, with or without the fix: this pause is
        // what makes the test tell them apart, not what makes it pass.
        usleep(500_000)
        try proxy.reload(Self.plainPolicy(port: server.port, proxy: "header_timeout: 60s"))
        #expect(proxy.waitFor("policy_reloaded") != nil)
        let answer = connection.receive(timeout: 15, until: "\r\n\r\n")
        #expect(statusLine(answer) == "HTTP/1.1 431 Request Header Fields Too Large", "\(answer)")
        let rejected = try #require(proxy.waitFor("request_rejected"))
        #expect(rejected["reason"] == "request_too_large" && rejected["detail"] == "the request head is over max_request_bytes (8192 bytes)")
    }
}

private func sha256(_ text: String) -> String {
    (try? run("/bin/sh", ["-c", "printf %s '\(text)' | sha256sum"]).stdout.split(separator: " ").first.map(String.init)) ?? "?"
}
