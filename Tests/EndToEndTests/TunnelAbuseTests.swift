import Foundation
import Testing
import TestSupport

/// A local client with no special rights against pinned tunnels (issue 30): CONNECTs that never
/// send a hello, a replayed hello, a server that answers no look, a client that leaves mid-hold.
@Suite(.serialized) struct TunnelAbuseTests {
    static let target = "api.pinproxy.test"

    static func abuse(_ arguments: [String], timeout: Double = 90) throws -> String {
        try run("/usr/bin/env", ["python3", "\(Paths.scripts)/tunnel_abuse.py"] + arguments, timeout: timeout).stdout
    }

    /// Waits (bounded) until the proxy holds no more descriptors than `before`.
    static func descriptorsReturn(to before: Int, _ proxy: ProxyProcess) -> Int {
        let deadline = Date().addingTimeInterval(15)
        while proxy.openFileDescriptors > before && Date() < deadline { usleep(100_000) }
        return proxy.openFileDescriptors
    }

    /// Twenty CONNECTs that never send a ClientHello, under `mirror_checks: 4`: each held the
    /// client's descriptor, the tunnel's upstream connection and four mirror connections until
    /// `idle_timeout` (300 s). Now each is closed with all of them at `client_hello_timeout`, said
    /// in one info line each and counted; the server saw each of its 100 connections closed
    /// without a hello, and the proxy's descriptors are back where they were.
    @Test func idleConnectsAreClosedWithTheirMirrorsAtTheHelloBound() throws {
        let server = try Upstream("leaf-ec256", name: "good")
        // Logs each upstream connection once decided: a hello, or its close (a hello wait far past the bound).
        let front = try Interceptor(genuine: server.port, rogue: server.port, strategy: .none, helloTimeout: 60)
        let proxy = try ProxyProcess(config: policy(ports: [front.port], rules: apiRule(pinsLine(Pins.leafEC) + "\n    mirror_checks: 4"),
                                                    proxy: "client_hello_timeout: 1s\nworkers: 1"))  // one worker: one probe, one cache
        try proxy.limitDescriptors(soft: 4096, hard: nil)  // room for the 20 × 6 whatever the runner's limit
        let before = proxy.openFileDescriptors
        let out = try Self.abuse(["idle", String(proxy.port), "\(Self.target):\(front.port)", "20", "30"])
        #expect(out.contains("ANSWERED 20 STATUS 200:20"), "\(out)")
        #expect(out.contains("CLOSED 20 OF 20 "), "the proxy closed every idle tunnel within 30 s: \(out)")
        let closes = proxy.events("tunnel_closed", count: 20)
        #expect(closes.count == 20)
        for close in closes {
            #expect(close["level"] == "info" && close["close_reason"] == "client_hello_timeout" && close["verdict"] == "allowed"
                    && close["bytes_up"] == "0" && close["bytes_down"] == "0", "\(close)")
        }
        #expect(proxy.events("tunnel_refused").isEmpty)
        // The probe's connection brought a hello; the 20 × 5 others were closed without one.
        let entries = front.waitForEntries(101, timeout: 30)
        #expect(entries.count == 101)
        #expect(entries.filter { $0.decision == .genuine }.count == 1)
        #expect(entries.filter { $0.decision == .dropped }.count == 100, "\(entries.map { "\($0.decision) \($0.reason ?? "")" })")
        #expect(Self.descriptorsReturn(to: before, proxy) <= before)
        _ = proxy.stop()
        let stopped = try #require(proxy.events("stopped").last)
        #expect(stopped["no_client_hello"] == "20", "\(stopped)")
    }

    /// One process floods CONNECTs to a pinned host as fast as it can, each left without a hello,
    /// under a descriptor limit of 1,024 and `max_tunnels: 48`: before, its tunnels took every slot
    /// and descriptor for `idle_timeout`, and everyone else got 503s. Now a tunnel still without its
    /// client's hello is silent again, counted by the descriptors it holds and shed oldest first
    /// (`close_reason=reclaimed`); and at `max_tunnels` the oldest such tunnel gives up its slot.
    /// A real client, which sends its hello within milliseconds of the 200, is served every time.
    /// (Every loopback address is one client: the flood and the real client share one share, and
    /// what spares the real client is that its tunnel is the newest while the flood's are older. The
    /// limits leave it a few hundred milliseconds between its 200 and its hello, however loaded the
    /// machine.)
    @Test func aFloodOfIdleConnectsDoesNotTakeAnotherClientsTunnel() throws {
        let server = try Upstream("leaf-ec256", name: "good")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC) + "\n    mirror_checks: 4"),
                                                    proxy: "max_tunnels: 120"))
        try proxy.limitDescriptors(soft: 8192, hard: nil)
        let before = proxy.openFileDescriptors
        let warm = try curl(proxy: proxy.port, host: Self.target, port: server.port)
        #expect(warm.connectStatus == 200 && warm.body == "hello from good\n", "\(warm)")
        let flooder = try BackgroundRun("/usr/bin/env", ["python3", "\(Paths.scripts)/tunnel_abuse.py", "flood", String(proxy.port),
                                                         "\(Self.target):\(server.port)", "600", "500"])
        defer { if flooder.isRunning { _ = flooder.stop(timeout: 5) } }
        let flooding = Date().addingTimeInterval(60)
        while !flooder.outputSoFar.contains("FLOODING") && flooder.isRunning && Date() < flooding { usleep(50_000) }
        #expect(flooder.outputSoFar.contains("FLOODING"), "\(flooder.outputSoFar)")
        var failures: [String] = []
        for _ in 0..<10 {
            let result = try curl(proxy: proxy.port, host: Self.target, port: server.port)
            if result.connectStatus != 200 || result.body != "hello from good\n" {
                failures.append("curl \(result.exitCode) \(result.connectStatus): \(result.stderr.prefix(200))")
            }
        }
        let flood = flooder.stop()
        #expect(failures.isEmpty, "\(failures)")
        // The flood went on throughout, and its own CONNECTs were answered too (by taking the room of its older ones).
        let end = flood.split(separator: "\n").last.map(String.init) ?? ""
        let made = end.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
        #expect(end.hasPrefix("CONNECTS ") && made > 100, "\(flood)")
        let reclaimed = proxy.events("tunnel_closed").filter { $0["close_reason"] == "reclaimed" }
        #expect(!reclaimed.isEmpty && reclaimed.allSatisfy { $0["level"] == "info" })
        #expect(proxy.events("accept_failed").isEmpty)
        #expect(Self.descriptorsReturn(to: before, proxy) <= before)
    }

    /// Tunnels whose servers do not answer hold their mirror connections until `probe_timeout`. A
    /// client that makes CONNECTs faster than its servers answer gets its share of the worker's
    /// mirror connections (a quarter of the descriptor limit, half of it per client: 8 here, two
    /// tunnels with `mirror_checks: 4`) and then a 503 that says why — not every descriptor.
    @Test func aClientPastItsShareOfMirrorsIsRefused503() throws {
        let server = try Upstream("leaf-ec256", name: "good")
        let stalling = try Replayer(genuine: server.port, abort: "none", stall: true)
        let proxy = try ProxyProcess(config: policy(ports: [stalling.port], rules: apiRule(pinsLine(Pins.leafEC) + "\n    mirror_checks: 4"),
                                                    proxy: "probe_timeout: 6s\nclient_hello_timeout: 1s\nworkers: 1"))
        try proxy.limitDescriptors(soft: 64, hard: nil)
        let before = proxy.openFileDescriptors
        // One after the other, each with its hello sent before the next opens (two tunnels both still
        // without a hello would be more than this tiny limit lets one client keep silent).
        var held: [BackgroundRun] = []
        defer { for run in held { _ = run.stop(timeout: 5) } }
        for count in 1...2 {
            held.append(try BackgroundRun("/usr/bin/curl", ["-sS", "--max-time", "30", "--proxy", "http://127.0.0.1:\(proxy.port)", "--cacert",
                                                            Paths.fixture("both-roots.pem"), "https://\(Self.target):\(stalling.port)/"]))
            #expect(proxy.events("tunnel_allowed", count: count, timeout: 20).count == count)
            usleep(1_000_000)  // its hello sent, its mirrors waiting for the stalled server
        }
        let response = try connectResponse(proxy: proxy.port, target: "\(Self.target):\(stalling.port)")
        #expect(statusLine(response) == "HTTP/1.1 503 Too Many Mirror Checks", "\(response)")
        #expect(header("Proxy-Status", in: response) == "pinproxy; error=connection_limit_reached; details=\"mirror_limit_reached\"")
        #expect(header("Retry-After", in: response) == "1")
        let refused = try #require(proxy.waitFor("tunnel_refused") { $0["reason"] == "mirror_limit_reached" })
        #expect(refused["status"] == "503" && refused["detail"] == "127.0.0.1 holds 8 of the 8 mirror connections one client may hold on a worker, and this CONNECT needs 4 more; its other tunnels' servers have not answered yet",
                "\(refused)")
        // The two held tunnels end at probe_timeout, and every mirror connection with them.
        let ends = proxy.events("tunnel_refused", count: 3, timeout: 20).filter { $0["reason"] == "probe_timeout" }
        #expect(ends.count == 2 && ends.allSatisfy { $0["stage"] == "stream" })
        #expect(Self.descriptorsReturn(to: before, proxy) <= before)
    }

    /// A client whose hello makes the server ask for another key share (a HelloRetryRequest) and
    /// that never sends its second hello: the tunnel and its mirror each heard the server, so no
    /// look is silent, and it was held to `idle_timeout`. The handshake has `probe_timeout` from the
    /// client's hello to reach the server's ServerHello, whoever stalls it.
    @Test func aHandshakeStalledAfterAHelloRetryEndsAtTheProbeTimeout() throws {
        let server = try Upstream("leaf-ec256", name: "good", extra: ["--groups", "secp384r1"])
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC) + "\n    mirror_checks: 1"),
                                                    proxy: "probe_timeout: 2s"))
        let out = try Self.abuse(["silent-after-hello", String(proxy.port), "\(Self.target):\(server.port)", Self.target, "30"])
        #expect(out.hasPrefix("READ ") && out.hasSuffix(" closed\n") && out != "READ 0 closed\n", "the retry reached the client, then the close: \(out)")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["reason"] == "probe_timeout" && refused["stage"] == "stream", "\(refused)")
        #expect(refused["detail"] == "the handshake did not reach the server's ServerHello within probe_timeout (2000 ms) of the client's hello: after the server's HelloRetryRequest, the client's second ClientHello or the server's answer to it did not come")
    }

    /// At `max_tunnels`, a tunnel still without its client's hello gives up its slot to a CONNECT
    /// the policy admits — and only to one: a CONNECT the policy refuses is answered without
    /// closing anybody's tunnel.
    @Test func onlyAnAdmittedConnectTakesTheSlotOfATunnelWithoutItsHello() throws {
        let server = try Upstream("leaf-ec256", name: "good")
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC)), proxy: "max_tunnels: 1\nworkers: 1"))
        let held = try OpenConnection(port: proxy.port, send: "CONNECT \(Self.target):\(server.port) HTTP/1.1\r\n\r\n")
        defer { held.close() }
        #expect(proxy.waitFor("tunnel_allowed") != nil)
        #expect(statusLine(try connectResponse(proxy: proxy.port, target: "\(Self.target):1")) == "HTTP/1.1 403 Forbidden by Pin Policy")
        #expect(proxy.events("tunnel_closed").isEmpty)
        let taken = try Self.abuse(["idle", String(proxy.port), "\(Self.target):\(server.port)", "1", "0"])
        #expect(taken.hasPrefix("ANSWERED 1 STATUS 200:1"), "\(taken)")
        let reclaimed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(reclaimed["close_reason"] == "reclaimed" && reclaimed["conn"] == "1" && reclaimed["level"] == "info", "\(reclaimed)")
    }

    /// A ClientHello sent again in a second tunnel — no cryptography needed on the client's side,
    /// a handshake per look on the server's — is refused before any mirror is sent: the server
    /// sees the second tunnel's connections closed without a hello.
    @Test func aReplayedHelloIsRefusedWithNoMirrorSent() throws {
        let server = try Upstream("leaf-ec256", name: "good")
        let front = try Interceptor(genuine: server.port, rogue: server.port, strategy: .none, helloTimeout: 60)
        let proxy = try ProxyProcess(config: policy(ports: [front.port], rules: apiRule(pinsLine(Pins.leafEC) + "\n    mirror_checks: 1"),
                                                    proxy: "workers: 1"))  // one worker: one probe, one cache
        let out = try Self.abuse(["replay", String(proxy.port), "\(Self.target):\(front.port)", Self.target])
        let lines = out.split(separator: "\n").map(String.init)
        #expect(lines.count == 2 && lines[0].hasPrefix("FIRST ") && lines[0] != "FIRST 0", "\(out)")
        #expect(lines.last == "SECOND 0 closed", "\(out)")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["reason"] == "hello_replayed" && refused["stage"] == "stream" && refused["level"] == "warning", "\(refused)")
        #expect(refused["detail"] == "the client's ClientHello carries the random of a hello an earlier tunnel carried; a client makes a fresh one for each connection")
        #expect(refused["hint"]?.contains("pinproxy sent no mirror for it") == true)
        #expect(refused["status"] == nil)  // the 200 went out before the hello
        // The first tunnel: the probe, the tunnel and its mirror each brought a hello. The second
        // (the probe's chain cached): its tunnel and mirror connections closed with none.
        let entries = front.waitForEntries(5, timeout: 30)
        #expect(entries.filter { $0.decision == .genuine }.count == 3, "\(entries.map { "\($0.decision) \($0.reason ?? "")" })")
        #expect(entries.filter { $0.decision == .dropped }.count == 2)
        usleep(500_000)
        #expect(front.entries.count == 5)
    }

    /// A server that answers the probe and then neither the tunnel nor its mirror: refused at
    /// `probe_timeout` of the client's hello (2 s here) instead of being held to `idle_timeout`.
    /// A client that offers only TLS 1.2 has no mirror, and the same deadline.
    @Test(arguments: ["1.3", "1.2"])
    func aServerThatAnswersNoLookIsRefusedAtTheProbeTimeout(tls: String) throws {
        let server = try Upstream("leaf-ec256", name: "good")
        let stalling = try Replayer(genuine: server.port, abort: "none", stall: true)
        let proxy = try ProxyProcess(config: policy(ports: [stalling.port], rules: apiRule(pinsLine(Pins.leafEC) + "\n    mirror_checks: 1"),
                                                    proxy: "probe_timeout: 2s"))
        let extra = tls == "1.2" ? ["--tls-max", "1.2", "--max-time", "60"] : ["--tlsv1.3", "--max-time", "60"]
        let result = try curl(proxy: proxy.port, host: Self.target, port: stalling.port, extra: extra)
        #expect(result.connectStatus == 200 && result.exitCode != 0 && result.exitCode != 28, "\(result)")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        let looks = tls == "1.2" ? "" : " nor on pinproxy's mirror check"
        #expect(refused["reason"] == "probe_timeout" && refused["stage"] == "stream" && refused["level"] == "warning", "\(refused)")
        #expect(refused["detail"] == "the server sent no byte in the tunnel\(looks) within probe_timeout (2000 ms) of the client's hello")
        #expect(refused["hint"]?.hasPrefix("the server accepted the connections but did not answer the client's ClientHello") == true)
        #expect(proxy.events("tunnel_closed").isEmpty)
    }

    /// A client that leaves while the check holds its tunnel is the client's doing: an info line
    /// `close_reason=client_closed` with the stage, not `tls_protocol_error` "a broken peer or an
    /// attack" (1,735 such lines a minute under ordinary churn). That alarm stays for a server that
    /// hangs up in the middle of its flight while its client waits.
    @Test func aClientThatLeavesDuringTheHoldIsClientClosed() throws {
        let server = try Upstream("leaf-ec256", name: "good")
        // Every connection after the probe's gets 50 bytes of the server's answer, then a FIN.
        let cutting = try Replayer(genuine: server.port, abort: "none", truncate: 50)
        // With a mirror, the probe's chain is cached: the tunnels after the first are not probed (and cut) again.
        let proxy = try ProxyProcess(config: policy(ports: [cutting.port], rules: apiRule(pinsLine(Pins.leafEC) + "\n    mirror_checks: 1"),
                                                    proxy: "workers: 1"))
        let address = "\(Self.target):\(cutting.port)"

        _ = try Self.abuse(["hangup", String(proxy.port), address, Self.target, "mid-hello"])
        let midHello = try #require(proxy.waitFor("tunnel_closed"))
        #expect(midHello["close_reason"] == "client_closed" && midHello["stage"] == "client_hello" && midHello["level"] == "info", "\(midHello)")

        _ = try Self.abuse(["hangup", String(proxy.port), address, Self.target, "after-hello"])
        let afterHello = try #require(proxy.waitFor("tunnel_closed") { $0["conn"] != midHello["conn"] })
        #expect(afterHello["close_reason"] == "client_closed" && afterHello["stage"] == "server_hello" && afterHello["level"] == "info",
                "\(afterHello)")
        // A client that leaves before any byte: the server answers the close passed on with an alert.
        _ = try Self.abuse(["idle", String(proxy.port), address, "1", "0"])
        let beforeHello = try #require(proxy.waitFor("tunnel_closed") { $0["conn"] != midHello["conn"] && $0["conn"] != afterHello["conn"] })
        #expect(beforeHello["close_reason"] == "client_closed" && beforeHello["stage"] == "client_hello" && beforeHello["level"] == "info",
                "\(beforeHello)")
        #expect(proxy.events("tunnel_refused").isEmpty, "\(proxy.events("tunnel_refused"))")

        // The same cut flight while the client waits for it: the server's doing.
        let waiting = try curl(proxy: proxy.port, host: Self.target, port: cutting.port)
        #expect(waiting.connectStatus == 200 && waiting.exitCode != 0)
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["reason"] == "tls_protocol_error" && refused["detail"] == "the upstream closed before its first flight was complete", "\(refused)")
        #expect(refused["hint"] == "the TLS handshake in the tunnel does not parse; a broken peer or an attack")
    }
}
