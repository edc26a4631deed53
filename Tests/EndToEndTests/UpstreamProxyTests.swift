import Foundation
import Testing
import TestSupport

/// pinproxy behind a parent proxy (`proxy.upstream_proxy`): the probe and the tunnel are CONNECTs on
/// the parent, the pins are checked on what arrives through it, and its refusals reach the client.
@Suite(.serialized) struct UpstreamProxyTests {
    /// A parent proxy (scripts/parent.py) and the file it logs each CONNECT to.
    final class Parent {
        let helper: Helper
        let log: String
        var port: UInt16 { helper.port }

        init(_ arguments: [String]) throws {
            log = try temporaryDirectory() + "/parent.log"
            helper = try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/parent.py", "--log", log] + arguments)
        }

        var requests: [String] {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        }

        deinit { helper.stop() }
    }

    /// pinproxy with no resolver of its own for the pinned name: only the parent can resolve it.
    func pinproxy(parent: UInt16, ports: [UInt16], credentials: String? = nil, rules: String = apiRule(pinsLine(Pins.leafEC)),
                  settings extra: String? = nil) throws -> ProxyProcess {
        var settings = "upstream_proxy: http://127.0.0.1:\(parent)"
        if let extra { settings += "\n" + extra }
        if let credentials { settings += "\nupstream_proxy_credentials_file: \(credentials)" }
        return try ProxyProcess(config: policy(ports: ports, rules: rules, resolve: "  other.pinproxy.test: 127.0.0.1", proxy: settings))
    }

    @Test func theProbeAndTheTunnelGoThroughTheParentWithItsCredentials() throws {
        let server = try Upstream("leaf-ec256", name: "behind the parent")
        let parent = try Parent(["--mode", "tunnel", "--map", "api.pinproxy.test=127.0.0.1", "--auth", "pinproxy:s3cret"])
        let credentials = try temporaryFile("pinproxy:s3cret\n", name: "parent-credentials")
        let proxy = try pinproxy(parent: parent.port, ports: [server.port], credentials: credentials)
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port)
        #expect(result.body == "hello from behind the parent\n")
        let allowed = proxy.waitFor("tunnel_allowed")
        #expect(allowed?["address"] == "127.0.0.1")
        #expect(allowed?["pin"] == Pins.leafEC)
        let authorization = "Basic cGlucHJveHk6czNjcmV0"
        // The probe, the tunnel, and the mirror check's connection (made through the parent like the tunnel's).
        #expect(parent.requests == Array(repeating: "CONNECT api.pinproxy.test:\(server.port) auth=\(authorization)", count: 3))
        #expect(proxy.waitFor("tunnel_closed")?["verify"] == "probe+mirror")
        #expect(!proxy.log.contains("s3cret") && !proxy.log.contains("cGlucHJveHk6czNjcmV0"))
    }

    /// A parent that sends its answer head in pieces does not make pinproxy spin while it waits for
    /// the rest: the first piece was only peeked at, so the socket stayed readable and the loop
    /// called back at once, every turn, a core at full use until the parent sent the rest (2.0 s
    /// of CPU in 2 s before). The answer, read in pieces, opens the tunnel as a whole one does.
    @Test func aParentsAnswerInPiecesDoesNotSpinTheWorker() throws {
        let server = try Upstream("leaf-ec256", name: "behind a slow parent")
        let parent = try Parent(["--mode", "tunnel", "--map", "api.pinproxy.test=127.0.0.1", "--split-answer", "3"])
        let proxy = try pinproxy(parent: parent.port, ports: [server.port])
        let client = try OpenConnection(port: proxy.port, send: "CONNECT api.pinproxy.test:\(server.port) HTTP/1.1\r\n\r\n")
        defer { client.close() }
        // The probe's CONNECT reached the parent, which now holds back the end of its answer.
        for _ in 0..<100 where parent.requests.isEmpty { usleep(50_000) }
        #expect(parent.requests.first == "CONNECT api.pinproxy.test:\(server.port) auth=-")
        let used = proxy.cpuSeconds(whileWaiting: 2)
        #expect(used < 0.5, "the proxy used \(used) s of CPU in 2 s while the parent's answer was incomplete")
        let response = client.receive(timeout: 30, until: "\r\n\r\n")
        #expect(statusLine(response) == "HTTP/1.1 200 Connection established", "\(response)")
        #expect(proxy.waitFor("tunnel_allowed")?["pin"] == Pins.leafEC)
    }

    /// A parent that trickles its answer head, a line at a time, does not hold the CONNECT past
    /// `connect_total_timeout`: libevent restarts a persistent event's timeout each time it fires,
    /// so every piece pushed the deadline back (the head would have taken 40 × 0.4 s).
    @Test func aParentTricklingItsAnswerIsHeldToConnectTotalTimeout() throws {
        let server = try Upstream("leaf-ec256", name: "behind a trickling parent")
        let parent = try Parent(["--mode", "tunnel", "--map", "api.pinproxy.test=127.0.0.1", "--trickle-answer", "0.4"])
        let proxy = try pinproxy(parent: parent.port, ports: [server.port], settings: "connect_total_timeout: 2s")
        let response = try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(server.port)")
        #expect(statusLine(response) == "HTTP/1.1 502 Parent Proxy Failed", "\(response)")
        let refused = try #require(proxy.waitFor("tunnel_refused"))
        #expect(refused["reason"] == "upstream_proxy_refused")
        #expect(refused["detail"] == "the parent proxy http://127.0.0.1:\(parent.port) failed CONNECT api.pinproxy.test:\(server.port): no answer within connect_total_timeout")
    }

    @Test func theParentsRefusalReachesTheClientWithItsStatus() throws {
        let parent = try Parent(["--mode", "refuse"])
        let proxy = try pinproxy(parent: parent.port, ports: [443])
        let response = try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:443")
        #expect(statusLine(response) == "HTTP/1.1 403 Forbidden")
        #expect(header("Proxy-Status", in: response) == "pinproxy; error=http_request_denied; details=\"upstream_proxy_refused\"; received-status=403")
        let line = proxy.waitFor("tunnel_refused")
        #expect(line?.refusal == .network(.upstreamProxyRefused))
        #expect(line?["status"] == "403")
        #expect(line?["detail"] == "the parent proxy http://127.0.0.1:\(parent.port) refused CONNECT api.pinproxy.test:443: 403 Forbidden")
        #expect(line?["hint"]?.contains("proxy.upstream_proxy") == true)
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: 443).connectStatus == 403)
    }

    /// A 407 is the parent asking pinproxy for credentials; the client gets a 502, not a prompt.
    @Test func missingCredentialsAreA502NotA407() throws {
        let parent = try Parent(["--mode", "tunnel", "--auth", "pinproxy:s3cret"])
        let proxy = try pinproxy(parent: parent.port, ports: [443])
        let response = try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:443")
        #expect(statusLine(response) == "HTTP/1.1 502 Parent Proxy Authentication Failed")
        #expect(header("Proxy-Status", in: response)?.hasSuffix("received-status=407") == true)
        #expect(proxy.waitFor("tunnel_refused")?.refusal == .network(.upstreamProxyRefused))
        #expect(parent.requests == ["CONNECT api.pinproxy.test:443 auth=-"])
    }

    /// A corporate proxy that intercepts the pinned host with its own CA is refused like any rogue.
    @Test func anInterceptingParentIsRefusedLikeAnyRogue() throws {
        let rogue = try Upstream("rogue-leaf", name: "interceptor")
        let parent = try Parent(["--mode", "intercept", "--to", String(rogue.port)])
        let proxy = try pinproxy(parent: parent.port, ports: [443])
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: 443)
        #expect(result.connectStatus == 502)
        #expect(result.exitCode == 56)
        let line = proxy.waitFor("tunnel_refused")
        #expect(line?.refusal == .policy(.pinMismatch))
        #expect(line?["chain.0.spki"] == Pins.rogueLeaf)
        #expect(urllibThrough(proxy.port) == "ERROR Tunnel connection failed: 502 Certificate Pin Mismatch")
    }

    /// DNS is the parent's, so deny_destinations can only judge IP-literal targets, before the parent.
    @Test func deniedIPLiteralsNeverReachTheParent() throws {
        let parent = try Parent(["--mode", "tunnel"])
        let proxy = try pinproxy(parent: parent.port, ports: [443])
        let response = try connectResponse(proxy: proxy.port, target: "169.254.1.1:443")
        #expect(statusLine(response) == "HTTP/1.1 403 Destination Forbidden")
        #expect(proxy.waitFor("tunnel_refused")?.refusal == .policy(.destinationProhibited))
        #expect(parent.requests.isEmpty)
    }

    @Test func aParentThatIsNotListeningIsAConnectionFailure() throws {
        let port = try freePort()
        let proxy = try pinproxy(parent: port, ports: [443])
        let response = try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:443")
        #expect(statusLine(response) == "HTTP/1.1 502 Connection Failed")
        #expect(proxy.waitFor("tunnel_refused")?["detail"]?.hasPrefix("127.0.0.1:\(port): ") == true)
    }

    /// `pinproxy pin` with the policy probes as the proxy does: through the parent, which resolves;
    /// and so are its two handshakes that ask whether the server answers a second connection while
    /// a first is open (a mirror goes through the parent too).
    @Test func pinProbesThroughTheParent() throws {
        let server = try Upstream("leaf-ec256", name: "pin")
        let parent = try Parent(["--mode", "tunnel", "--map", "api.pinproxy.test=127.0.0.1"])
        let config = try temporaryFile(policy(ports: [server.port], resolve: "  other.pinproxy.test: 127.0.0.1",
                                              proxy: "upstream_proxy: http://127.0.0.1:\(parent.port)"))
        let r = try run(Paths.pinproxy, ["pin", "api.pinproxy.test:\(server.port)", "--config", config], timeout: 30)
        #expect(r.status == 0, "\(r.stderr)")
        #expect(r.stdout.contains("spki pin:  \(Pins.leafEC)\n"))
        #expect(parent.requests == Array(repeating: "CONNECT api.pinproxy.test:\(server.port) auth=-", count: 3))
        #expect(!r.stdout.contains("one connection at a time"), "\(r.stdout)")
    }

    func urllibThrough(_ port: UInt16) -> String {
        (try? urllib(proxy: port, host: "api.pinproxy.test", port: 443)) ?? "urllib did not run"
    }
}
