import Foundation
import Testing
import TestSupport

/// Every bad request gets a clean status, a Proxy-Status and a log line, and the proxy keeps serving.
@Suite(.serialized) struct BadRequestTests {
    static let badRequests: [(request: String, status: String, reason: String)] = [
        // Plain HTTP is forwarded (PlainHTTPTests), but never to a pinned host, and never a method it does not know.
        ("TRACE http://api.pinproxy.test/ HTTP/1.1\r\nHost: api.pinproxy.test\r\n\r\n", "405 Method Not Allowed", "method_not_allowed"),
        ("GET http://api.pinproxy.test/ HTTP/1.1\r\nHost: api.pinproxy.test\r\n\r\n", "403 Pinned Host Requires HTTPS", "plain_http_to_pinned_host"),
        ("POST / HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT api.pinproxy.test HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT 127.1:443 HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT 0x7f.0.0.1:443 HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT user@api.pinproxy.test:443 HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT api%2epinproxy.test:443 HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT [fe80::1%25eth0]:443 HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT api.pinproxy.test:0443 HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT api.pinproxy.test:65536 HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT b\u{fc}cher.test:443 HTTP/1.1\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT api.pinproxy.test:443 HTTP/2.0\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT api.pinproxy.test:443 HTTP/1.1\r\nHost: api.pinproxy.test\r\nHost: evil.test:443\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT api.pinproxy.test:443 HTTP/1.1\r\n folded: header\r\n\r\n", "400 Bad Request", "bad_request"),
        ("garbage\r\n\r\n", "400 Bad Request", "bad_request"),
        ("CONNECT api.pinproxy.test:443 HTTP/1.1\r\nX: \(String(repeating: "a", count: 9000))\r\n\r\n", "431 Request Header Fields Too Large", "request_too_large"),
        ("CONNECT api.pinproxy.test:443 HTTP/1.1\r\n" + String(repeating: "X-A: b\r\n", count: 101) + "\r\n", "431 Request Header Fields Too Large", "request_too_large"),
    ]

    @Test func everyBadRequestGetsACleanErrorAndTheProxyKeepsServing() throws {
        let server = try Upstream("leaf-ec256", name: "still here")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC))))
        for (index, bad) in Self.badRequests.enumerated() {
            let response = try rawExchange(port: proxy.port, send: Array(bad.request.utf8))
            #expect(statusLine(response) == "HTTP/1.1 \(bad.status)", "request \(index): \(bad.request.prefix(60))")
            #expect(header("Connection", in: response) == "close")
            #expect(header("Proxy-Status", in: response)?.contains("details=\"\(bad.reason)\"") == true)
        }
        let methodResponse = try rawExchange(port: proxy.port, send: Array(Self.badRequests[0].request.utf8))
        #expect(header("Allow", in: methodResponse) == "CONNECT, DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT")
        #expect(methodResponse.contains("method TRACE is not forwarded"))
        #expect(proxy.waitFor("request_rejected", matching: { _ in proxy.events("request_rejected").count >= Self.badRequests.count + 1 }) != nil)
        #expect(proxy.events("request_rejected").map { $0["reason"]! }.prefix(Self.badRequests.count) == Self.badRequests.map(\.reason)[...])
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from still here\n")
    }

    @Test func http10WithoutHostIsAccepted() throws {
        let server = try Upstream("leaf-ec256", name: "python")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC))))
        let response = try rawResponseHead(port: proxy.port, send: Array("CONNECT api.pinproxy.test:\(server.port) HTTP/1.0\r\n\r\n".utf8))
        #expect(response == "HTTP/1.1 200 Connection established\r\n\r\n")
    }

    @Test func headerTimeoutAnswers408() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: "header_timeout: 300ms"))
        let response = try rawExchange(port: proxy.port, send: Array("CONNECT api.pinproxy.test:443 HTTP/1.1\r\n".utf8), timeout: 5)
        #expect(statusLine(response) == "HTTP/1.1 408 Request Timeout")
        #expect(proxy.waitFor("request_rejected")?.refusal == .network(.headerTimeout))
    }

    @Test func refusalsBeforeAnyCertificateIsSeen() throws {
        let server = try Upstream("leaf-ec256", name: "x")
        let silent = try Upstream("leaf-ec256", name: "silent", mode: "silent")
        let plain = try Upstream("leaf-ec256", name: "plain", mode: "plain")
        let closedPort = try freePort()
        let ports = [server.port, silent.port, plain.port, closedPort]
        let resolve = "  api.pinproxy.test: 127.0.0.1\n  denied.pinproxy.test: 169.254.1.1\n  mixed.pinproxy.test: [169.254.1.1, 127.0.0.1]"
        let rules = apiRule(pinsLine(Pins.leafEC)) + "\n  - host: \"*.pinproxy.test\"\n" + pinsLine(Pins.leafEC)
        let proxy = try ProxyProcess(config: policy(ports: ports, rules: rules, resolve: resolve, proxy: "probe_timeout: 3s"))
        let cases: [(String, String, String, String)] = [
            ("api.pinproxy.test:22", "403 Forbidden by Pin Policy", "http_request_denied", "port_not_allowed"),
            ("169.254.1.1:\(server.port)", "403 Destination Forbidden", "destination_ip_prohibited", "destination_ip_prohibited"),
            ("[::ffff:169.254.1.1]:\(server.port)", "403 Destination Forbidden", "destination_ip_prohibited", "destination_ip_prohibited"),
            ("denied.pinproxy.test:\(server.port)", "403 Destination Forbidden", "destination_ip_prohibited", "destination_ip_prohibited"),
            ("nowhere.pinproxy.test:\(server.port)", "502 DNS Error", "dns_error", "dns_error"),
            ("api.pinproxy.test:\(closedPort)", "502 Connection Failed", "connection_refused", "connection_refused"),
            ("api.pinproxy.test:\(silent.port)", "504 TLS Handshake Timeout", "connection_read_timeout", "probe_timeout"),
            ("api.pinproxy.test:\(plain.port)", "502 TLS Handshake Failed", "tls_protocol_error", "tls_protocol_error"),
        ]
        for (target, status, proxyStatus, reason) in cases {
            let response = try connectResponse(proxy: proxy.port, target: target)
            #expect(statusLine(response) == "HTTP/1.1 \(status)", "\(target)")
            #expect(header("Proxy-Status", in: response) == "pinproxy; error=\(proxyStatus); details=\"\(reason)\"", "\(target)")
        }
        let refused = proxy.events("tunnel_refused", count: cases.count)
        #expect(refused.map { $0["reason"] ?? "" } == cases.map(\.3))
        #expect(refused[3]["detail"] == "denied.pinproxy.test resolved only to denied destinations: 169.254.1.1 (link-local)")
        // A denied address among allowed ones is dropped, the rest is used.
        #expect(try curl(proxy: proxy.port, host: "mixed.pinproxy.test", port: server.port).connectStatus == 502)  // cert is for api.*
        #expect(proxy.waitFor("tunnel_refused") { $0["host"] == "mixed.pinproxy.test" }?["address"] == "127.0.0.1")
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from x\n")
    }

    /// A client outside allow_clients is closed at accept: no response, no session, and its bytes
    /// never reach the request parser (garbage would otherwise be a 400 `bad_request`).
    @Test func clientsOutsideAllowClientsAreClosedAtAccept() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443], proxy: "allow_clients: [\"10.0.0.0/8\"]\nstats_interval: 100ms"))
        #expect(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:443") == "")
        #expect(try rawExchange(port: proxy.port, send: Array("GARBAGE\r\n\r\n".utf8), timeout: 2) == "")
        let line = try #require(proxy.waitFor("request_rejected"))
        #expect(line.refusal == .policy(.clientNotAllowed))
        #expect(line["detail"] == "client 127.0.0.1 is not in allow_clients; closed at accept")
        #expect(proxy.waitFor("stats") { $0["rejected"] == "2" && $0["active_sessions"] == "0" } != nil)
        #expect(proxy.events("request_rejected").allSatisfy { $0.refusal == .policy(.clientNotAllowed) })
        #expect(proxy.events("tunnel_refused").isEmpty)
    }

    /// The policy decides before the tunnel cap: a CONNECT the policy refuses is a 403 even when
    /// every tunnel is taken, not a 503 that invites a retry. (The tunnel holding the one slot is
    /// unpinned: a pinned one still without its client's hello would give its slot up.)
    @Test func thePolicyIsCheckedBeforeTheTunnelCap() throws {
        let server = try Upstream("leaf-ec256", name: "held")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "max_tunnels: 1"))
        let held = try OpenConnection(port: proxy.port, send: "CONNECT 127.0.0.1:\(server.port) HTTP/1.1\r\n\r\n")
        defer { held.close() }
        #expect(proxy.waitFor("tunnel_unpinned") != nil)
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:1")) == "HTTP/1.1 403 Forbidden by Pin Policy")
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "169.254.1.1:\(server.port)")) == "HTTP/1.1 403 Destination Forbidden")
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(server.port)")) == "HTTP/1.1 503 Too Many Tunnels")
        let reasons = proxy.events("tunnel_refused", count: 3).map { $0["reason"] ?? "?" }
        #expect(reasons == ["port_not_allowed", "destination_ip_prohibited", "connection_limit_reached"])
    }

    /// SIGTERM closes the listening sockets at once: while open tunnels drain, a new client is
    /// refused by the kernel (ECONNREFUSED) instead of waiting in the backlog for a reset.
    @Test func draining() throws {
        let server = try Upstream("leaf-ec256", name: "draining")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "drain_timeout: 20s"))
        let held = try OpenConnection(port: proxy.port, send: "CONNECT api.pinproxy.test:\(server.port) HTTP/1.1\r\n\r\n")
        #expect(proxy.waitFor("tunnel_allowed") != nil)
        proxy.signal(SIGTERM)
        #expect(proxy.waitFor("stopping") != nil)
        #expect(connectOutcome(port: proxy.port) == ECONNREFUSED)
        #expect(proxy.process.isRunning)  // still draining the held tunnel
        held.close()  // the last tunnel ends, and with it the drain
        #expect(proxy.waitForExit() == 0)
        #expect(proxy.events("tunnel_closed").count == 1)
        #expect(proxy.waitFor("stopped") != nil)
    }

    @Test func listeningBeyondLoopbackWithoutAllowClientsRefusesToStart() throws {
        let path = try temporaryFile(policy(ports: [443]))
        let r = try run(Paths.pinproxy, ["run", "--config", path, "--listen", "0.0.0.0:0"], timeout: 20)
        #expect(r.status == 1)
        #expect(r.stderr.contains("event=start_failed"))
        #expect(r.stderr.contains("without an explicit proxy.allow_clients list"))
    }

    @Test func aConnectToPinproxyItselfIsALoop() throws {
        let port = try freePort()
        let proxy = try ProxyProcess(config: policy(ports: [port], resolve: "  self.pinproxy.test: 127.0.0.1"), listen: ["127.0.0.1:\(port)"])
        let response = try connectResponse(proxy: proxy.port, target: "self.pinproxy.test:\(port)")
        #expect(statusLine(response) == "HTTP/1.1 403 Proxy Loop Detected")
        #expect(header("Proxy-Status", in: response) == "pinproxy; error=proxy_loop_detected; details=\"proxy_loop_detected\"")
    }

    /// NAT64 (RFC 6052, RFC 8215) and IPv4-compatible addresses reach the IPv4 address they embed:
    /// a denied IPv4 address is denied in every spelling, as a literal and as a resolved address
    /// (what DNS64 would answer), while `::1` stays IPv6 loopback.
    @Test func everyIPv6SpellingOfADeniedIPv4AddressIsRefused() throws {
        let server = try Upstream("leaf-ec256", name: "x")
        let config = policy(ports: [server.port], resolve: "  dns64.pinproxy.test: \"64:ff9b::7f00:1\"")
            .replacingOccurrences(of: "deny_destinations: [link-local, unspecified, multicast]", with: "deny_destinations: [loopback]")
        let proxy = try ProxyProcess(config: config)
        let targets = ["[64:ff9b::7f00:1]", "[64:ff9b:1::7f00:1]", "[::127.0.0.1]", "[::ffff:127.0.0.1]", "127.0.0.1", "[::1]", "dns64.pinproxy.test"]
        for target in targets {
            let response = try connectResponse(proxy: proxy.port, target: "\(target):\(server.port)")
            #expect(statusLine(response) == "HTTP/1.1 403 Destination Forbidden", "\(target)")
            #expect(header("Proxy-Status", in: response) == "pinproxy; error=destination_ip_prohibited; details=\"destination_ip_prohibited\"", "\(target)")
        }
        let refused = proxy.events("tunnel_refused", count: targets.count)  // logging is asynchronous: wait for all
        #expect(refused.map { $0["reason"] ?? "" } == Array(repeating: "destination_ip_prohibited", count: targets.count))
        #expect(refused.first?["detail"] == "64:ff9b::7f00:1 is in deny_destinations (loopback)")
        #expect(refused.last?["detail"] == "dns64.pinproxy.test resolved only to denied destinations: 64:ff9b::7f00:1 (loopback)")
    }

    /// Loop detection sees through the same embeddings: a NAT64 or IPv4-compatible spelling of
    /// pinproxy's own address would come back to it (here loopback is not denied).
    @Test(arguments: ["[64:ff9b::7f00:1]", "[::127.0.0.1]", "[::ffff:127.0.0.1]"])
    func aConnectToAnEmbeddedFormOfPinproxysOwnAddressIsALoop(target: String) throws {
        let port = try freePort()
        let proxy = try ProxyProcess(config: policy(ports: [port]), listen: ["127.0.0.1:\(port)"])
        let response = try connectResponse(proxy: proxy.port, target: "\(target):\(port)")
        #expect(statusLine(response) == "HTTP/1.1 403 Proxy Loop Detected")
        #expect(header("Proxy-Status", in: response) == "pinproxy; error=proxy_loop_detected; details=\"proxy_loop_detected\"")
    }

    @Test func tooManyTunnelsGets503WithRetryAfter() throws {
        let silent = try Upstream("leaf-ec256", name: "slow", mode: "silent")
        let proxy = try ProxyProcess(config: policy(ports: [silent.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "max_tunnels: 1\nprobe_timeout: 10s\nstats_interval: 100ms"))
        let first = try OpenConnection(port: proxy.port, send: "CONNECT api.pinproxy.test:\(silent.port) HTTP/1.1\r\n\r\n")
        // The first CONNECT holds the one slot (it waits on its probe) before the second arrives.
        #expect(proxy.waitFor("stats") { $0["tunnels"] == "1" } != nil)
        let response = try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(silent.port)")
        #expect(statusLine(response) == "HTTP/1.1 503 Too Many Tunnels")
        #expect(header("Retry-After", in: response) == "1")
        #expect(header("Proxy-Status", in: response) == "pinproxy; error=connection_limit_reached; details=\"connection_limit_reached\"")
        first.close()
    }

    /// A client that hangs up while its CONNECT waits for a probe is cleaned up at once.
    @Test func aClientHangUpDuringTheProbeFreesTheSession() throws {
        let silent = try Upstream("leaf-ec256", name: "slow", mode: "silent")
        let proxy = try ProxyProcess(config: policy(ports: [silent.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "probe_timeout: 20s\nstats_interval: 200ms"))
        let client = try OpenConnection(port: proxy.port, send: "CONNECT api.pinproxy.test:\(silent.port) HTTP/1.1\r\n\r\n")
        #expect(proxy.waitFor("stats") { $0["tunnels"] == "1" } != nil)  // its probe is under way
        client.close()
        let closed = try #require(proxy.waitFor("tunnel_closed", timeout: 5))
        #expect(closed["close_reason"] == "client_closed_before_decision")
        #expect(proxy.waitFor("stats", timeout: 5) { $0["active_sessions"] == "0" && $0["live_session_objects"] == "0" && $0["tunnels"] == "0" } != nil)
    }

    /// A CONNECT to a server that never answers the probe's hello, followed at once by 80 KiB of
    /// early tunnel bytes, past the 64 KiB pinproxy holds; returned once its probe is under way.
    static func earlyBytesPastTheCap(probeTimeout: String) throws -> (silent: Upstream, proxy: ProxyProcess, client: OpenConnection) {
        let silent = try Upstream("leaf-ec256", name: "slow", mode: "silent")
        let proxy = try ProxyProcess(config: policy(ports: [silent.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "probe_timeout: \(probeTimeout)\nstats_interval: 200ms"))
        let client = try OpenConnection(port: proxy.port, send: "CONNECT api.pinproxy.test:\(silent.port) HTTP/1.1\r\n\r\n" + String(repeating: "A", count: 80 * 1024))
        #expect(proxy.waitFor("stats") { $0["tunnels"] == "1" } != nil)  // its probe is under way
        return (silent, proxy, client)
    }

    /// A client that sends more than the 64 KiB of early tunnel bytes pinproxy holds while its
    /// CONNECT waits for a probe does not make the worker spin: libevent called the session's read
    /// callback again every loop turn while the held bytes sat at the read watermark, a core at
    /// full use until the probe gave up (2 s of CPU in 2 s; any local process could do it to every
    /// worker). The wait costs next to nothing now, and the CONNECT gets its answer as before.
    @Test func earlyBytesPastTheCapDoNotSpinTheWorker() throws {
        let (silent, proxy, client) = try Self.earlyBytesPastTheCap(probeTimeout: "6s")
        defer { _ = silent }  // the server that never answers lives as long as the test
        let used = proxy.cpuSeconds(whileWaiting: 2)
        #expect(used < 0.5, "the proxy used \(used) s of CPU in 2 s while a CONNECT waited for its probe")
        let response = client.receive(timeout: 15, until: "\r\n\r\n")
        #expect(statusLine(response) == "HTTP/1.1 504 TLS Handshake Timeout")
        #expect(proxy.waitFor("tunnel_refused")?["reason"] == "probe_timeout")
        client.close()
    }

    /// The same client hanging up once reading has stopped: pinproxy cannot see it go (its EOF
    /// waits behind the unread bytes), so the session ends when its probe does, and nothing stays.
    @Test func aClientThatHangsUpPastTheCapIsCleanedUpWhenItsProbeEnds() throws {
        let (silent, proxy, client) = try Self.earlyBytesPastTheCap(probeTimeout: "2s")
        defer { _ = silent }  // the server that never answers lives as long as the test
        client.close()
        #expect(proxy.waitFor("tunnel_refused", timeout: 10)?["reason"] == "probe_timeout")
        #expect(proxy.waitFor("stats", timeout: 10) { $0["active_sessions"] == "0" && $0["live_session_objects"] == "0" && $0["tunnels"] == "0" } != nil)
    }
}

@Suite(.serialized) struct GarbageTests {
    /// 200 connections of random bytes, half-heads and early hang-ups: each gets a clean answer or
    /// a close, the proxy keeps serving, and every session object is freed.
    @Test func aGarbageStormLeavesNothingBehind() throws {
        let server = try Upstream("leaf-ec256", name: "after the storm")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)),
                                                    proxy: "header_timeout: 100ms\nstats_interval: 200ms"))
        var generator = SystemRandomNumberGenerator()
        var answered = 0
        for round in 0..<200 {
            var bytes: [UInt8]
            switch round % 4 {
            case 0: bytes = (0..<Int.random(in: 1...2048, using: &generator)).map { _ in UInt8.random(in: 0...255, using: &generator) }
            case 1: bytes = Array("CONNECT api.pinproxy.test:\(server.port) HTTP/1.1\r\nX: ".utf8)        // never finishes: 408
            case 2: bytes = Array("CONNECT \(String(repeating: "a.", count: 200))test:443 HTTP/1.1\r\n\r\n".utf8)  // too long a name
            default: bytes = []                                                                                  // connect and leave
            }
            if round < 12 && round % 4 == 0 { bytes[0] = [0x16, 0x05, 0x04][round / 4] }  // surely some that look like TLS or SOCKS
            let response = try rawExchangeBytes(port: proxy.port, send: bytes, timeout: round % 4 == 3 ? 0.01 : 3)
            // Random bytes that start like TLS or SOCKS get that protocol's failure reply instead.
            let otherProtocol: [UInt8: [UInt8]] = [0x16: [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28], 0x05: [0x05, 0xff], 0x04: [0x00, 0x5b, 0, 0, 0, 0, 0, 0]]
            if let first = bytes.first, let reply = otherProtocol[first] {
                if response == reply { answered += 1 }
            } else if response.starts(with: Array("HTTP/1.1 4".utf8)) {
                answered += 1
            }
        }
        #expect(answered == 150)  // every round but the silent ones gets a 4xx (random bytes may lack a line end: 408)
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from after the storm\n")
        #expect(proxy.waitFor("stats", timeout: 10) { $0["accepted"] == "201" && $0["active_sessions"] == "0" && $0["live_session_objects"] == "0" } != nil,
                "\(proxy.events("stats").last ?? [:])")
    }
}
