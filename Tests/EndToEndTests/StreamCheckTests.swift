import Foundation
import Testing
import TestSupport

/// The stream check: pinproxy verifies the connection the client really uses, not only its own
/// probe. The attacker here lets the probe reach the genuine server and serves every later
/// connection from a rogue one (trusted by the client's CA bundle, so only the pins stand between).
@Suite(.serialized) struct StreamCheckTests {
    static let apiPinned = apiRule(pinsLine(Pins.leafEC))

    /// TLS 1.2: the Certificate crosses the tunnel in clear; pinproxy holds the server's bytes,
    /// judges that chain like the probe's, and the client gets a bad_certificate alert instead.
    @Test func theSelectiveAttackerIsRefusedInTheStreamOnTLS12() throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.2")
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.2")
        let attacker = try Replayer(genuine: genuine.port, abort: "none", then: rogue.port)
        let proxy = try ProxyProcess(config: policy(ports: [attacker.port], rules: Self.apiPinned))

        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: attacker.port)
        #expect(result.connectStatus == 200)  // the probe passed
        #expect(result.exitCode == 35, "curl must fail its handshake: \(result.stderr)")
        #expect(!result.body.contains("rogue"))
        let line = try #require(proxy.waitFor("tunnel_refused"))
        #expect(line["stage"] == "stream" && line.refusal == .stream(.policy(.pinMismatch)) && line["tls"] == "TLSv1.2")
        #expect(line["chain.0.spki"] == Pins.rogueLeaf && line["expected.0.pin"] == Pins.leafEC)
        #expect(line["bytes_down"] == "0")  // nothing of the server's reached the client
        #expect(proxy.events("tunnel_allowed").count == 1 && proxy.events("tunnel_closed").isEmpty)

        // Python (urllib through HTTPS_PROXY) fails the same way, and never reads the rogue body.
        let second = try Replayer(genuine: genuine.port, abort: "none", then: rogue.port)
        let proxy2 = try ProxyProcess(config: policy(ports: [second.port], rules: Self.apiPinned))
        let out = try urllib(proxy: proxy2.port, host: "api.pinproxy.test", port: second.port)
        #expect(out.hasPrefix("ERROR") && out.contains("BAD_CERTIFICATE"), "\(out)")
        #expect(proxy2.waitFor("tunnel_refused")?["stage"] == "stream")
    }

    /// The probe negotiated TLS 1.3, the tunnel TLS 1.2 (a downgrade, or another server): the chain
    /// is the genuine one, so the tunnel stands, verified in the stream, and the change is logged.
    @Test func aTLSVersionOtherThanTheProbesIsLogged() throws {
        let probeSide = try Upstream("leaf-ec256", name: "genuine 1.3", tls: "1.3")
        let tunnelSide = try Upstream("leaf-ec256", name: "genuine 1.2", tls: "1.2")
        let selective = try Replayer(genuine: probeSide.port, abort: "none", then: tunnelSide.port)
        let proxy = try ProxyProcess(config: policy(ports: [selective.port], rules: Self.apiPinned))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: selective.port).body == "hello from genuine 1.2\n")
        let warning = try #require(proxy.waitFor("tunnel_warning") { $0["reason"] == "tls_version_changed" })
        #expect(warning["tls"] == "TLSv1.2" && warning["probe_tls"] == "TLSv1.3" && warning["stage"] == "stream")
        #expect(warning["level"] == "warning")  // the client offered TLS 1.3: a downgrade, or another server
        #expect(warning["detail"] == "the client offered TLS 1.3 and the server answered the probe with TLS 1.3, but the tunnel with TLSv1.2: a downgrade or a different server")
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(closed["tls"] == "TLSv1.2" && closed["probe_tls"] == "TLSv1.3" && closed["verify"] == "probe+stream")
    }

    /// Report mode applies to stream refusals as to probe refusals: the tunnel stands, a warning
    /// says what would have been refused.
    @Test func reportModeWarnsAboutAStreamRefusalAndKeepsTheTunnel() throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.2")
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.2")
        let attacker = try Replayer(genuine: genuine.port, abort: "none", then: rogue.port)
        let proxy = try ProxyProcess(config: policy(ports: [attacker.port], rules: apiRule("    mode: report\n" + pinsLine(Pins.leafEC))))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: attacker.port).body == "hello from rogue\n")
        let warning = try #require(proxy.waitFor("tunnel_warning") { $0["stage"] == "stream" })
        #expect(warning.refusal == .stream(.policy(.pinMismatch)) && warning["would_refuse"] == "true" && warning["bypass"] == "report_mode")
        #expect(proxy.waitFor("tunnel_closed")?["verify"] == "bypass")
    }

    /// A server that accepts only P-384 answers every client that sends an X25519 key share first
    /// (curl, Python) with a HelloRetryRequest; the stream check must pass it on, not hold it.
    @Test func aHelloRetryRequestPassesThrough() throws {
        let server = try Upstream("leaf-ec256", name: "p384 only", tls: "1.3", extra: ["--groups", "secp384r1"])
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.apiPinned))
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port)
        #expect(result.exitCode == 0 && result.body == "hello from p384 only\n", "\(result.stderr)")
        #expect(try urllib(proxy: proxy.port, host: "api.pinproxy.test", port: server.port) == "OK 200 hello from p384 only")
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(closed["verify"] == "probe+mirror" && closed["tls"] == "TLSv1.3", "\(closed)")
    }

    /// A server that hangs up in the middle of its first flight: what was held (a ServerHello and
    /// part of a Certificate) never reaches the client.
    @Test func aFlightCutShortIsNeverReleased() throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.2")
        let cutter = try Replayer(genuine: genuine.port, abort: "none", truncate: 300)
        let proxy = try ProxyProcess(config: policy(ports: [cutter.port], rules: Self.apiPinned))
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: cutter.port)
        #expect(result.connectStatus == 200 && result.exitCode != 0)
        let line = try #require(proxy.waitFor("tunnel_refused"))
        #expect(line["stage"] == "stream" && line.refusal == .stream(.malformedTLS) && line["bytes_down"] == "0", "\(line)")
        #expect(line["detail"] == "the upstream closed before its first flight was complete")
    }

    /// A TLS 1.2 server that hangs up right after a whole Certificate: its chain is judged at the
    /// next message (a CertificateStatus may bring SCTs), which never comes; nothing held, the
    /// ServerHello and Certificate included, reaches the client.
    @Test func aServerThatHangsUpRightAfterItsCertificateGivesTheClientNothing() throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.2")
        let cutter = try Replayer(genuine: genuine.port, abort: "none", cutAfterCertificate: true)
        let proxy = try ProxyProcess(config: policy(ports: [cutter.port], rules: Self.apiPinned))
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: cutter.port, extra: ["--tls-max", "1.2"])
        #expect(result.connectStatus == 200 && result.exitCode != 0)
        let line = try #require(proxy.waitFor("tunnel_refused"))
        #expect(line["stage"] == "stream" && line.refusal == .stream(.malformedTLS) && line["bytes_down"] == "0", "\(line)")
        #expect(line["detail"] == "the upstream closed before its first flight was complete", "\(line)")
    }

    /// The good path through the stream check, byte for byte, with how it was verified.
    @Test(arguments: [("1.2", "probe+stream", "TLSv1.2"), ("1.3", "probe+mirror", "TLSv1.3")])
    func goodTunnelsStillWork(tls: String, verify: String, version: String) throws {
        let server = try Upstream("leaf-ec256", name: "good", tls: tls)
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.apiPinned))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).body == "hello from good\n")
        #expect(try urllib(proxy: proxy.port, host: "api.pinproxy.test", port: server.port) == "OK 200 hello from good")
        let closed = try #require(proxy.waitFor("tunnel_closed"))
        #expect(closed["verify"] == verify && closed["tls"] == version)
    }

    func sni(_ proxy: ProxyProcess, _ target: String, _ name: String, send: String = "tls") throws -> String {
        try run("/usr/bin/env", ["python3", "\(Paths.scripts)/clients.py", "sni", String(proxy.port), target, name,
                                 Paths.fixture("both-roots.pem"), send]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// A ClientHello for another name than the CONNECT's, or for a pinned name inside a tunnel
    /// to an IP literal or an unpinned name, is closed before a byte of it reaches the server.
    @Test func sniGamesAreClosed() throws {
        let server = try Upstream("leaf-ec256", name: "good", tls: "1.2")
        let resolve = "  api.pinproxy.test: 127.0.0.1\n  free.pinproxy.test: 127.0.0.1\n  other.pinproxy.test: 127.0.0.1"
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.apiPinned, resolve: resolve))
        #expect(try sni(proxy, "api.pinproxy.test:\(server.port)", "api.pinproxy.test") == "OK hello from good")
        for (target, name) in [("api.pinproxy.test", "other.pinproxy.test"), ("127.0.0.1", "api.pinproxy.test"), ("free.pinproxy.test", "api.pinproxy.test")] {
            let out = try sni(proxy, "\(target):\(server.port)", name)
            #expect(out == "CLOSED" || out.hasPrefix("ERROR"), "\(target) with SNI \(name): \(out)")
        }
        let refused = proxy.events("tunnel_refused", count: 3)
        #expect(refused.map { $0["reason"] ?? "?" } == ["sni_mismatch", "sni_mismatch", "sni_mismatch"])
        #expect(refused.map { $0["host"] ?? "?" } == ["api.pinproxy.test", "127.0.0.1", "free.pinproxy.test"])
        #expect(refused.allSatisfy { $0["stage"] == "stream" && $0["bytes_up"] == "0" })
    }

    /// Report mode and the debug bypass are scoped to the CONNECT's host. The attack: a CONNECT to
    /// `x.api.pinproxy.test` (report mode, or bypassed) whose ClientHello names `api.pinproxy.test`,
    /// which an enforced rule pins, and a server with a trusted rogue chain. The tunnel is closed at
    /// the ClientHello, before a byte reaches the server, on TLS 1.2 and 1.3.
    @Test(arguments: ["1.2", "1.3"], ["report", "bypass"])
    func reportModeAndTheBypassNeverLendTheirScopeToAnEnforcedSNI(tls: String, scope: String) throws {
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: tls)
        let rules = """
            rules:
              - host: api.pinproxy.test
            \(pinsLine(Pins.leafEC))
              - host: x.api.pinproxy.test
                mode: \(scope == "report" ? "report" : "enforce")
            \(pinsLine(Pins.leafEC))
            """
        let debug = scope == "bypass" ? "debug:\n  until: \"\(RFC3339Text.inSeconds(3600))\"\n  hosts: [x.api.pinproxy.test]" : ""
        let resolve = "  api.pinproxy.test: 127.0.0.1\n  x.api.pinproxy.test: 127.0.0.1"
        let proxy = try ProxyProcess(config: policy(ports: [rogue.port], rules: rules, resolve: resolve, extra: debug),
                                     arguments: scope == "bypass" ? ["--debug-bypass"] : [])
        let out = try sni(proxy, "x.api.pinproxy.test:\(rogue.port)", "api.pinproxy.test")
        #expect(out == "CLOSED" || out.hasPrefix("ERROR"), "the rogue server was reached: \(out)")
        #expect(!out.contains("rogue"))
        let line = try #require(proxy.waitFor("tunnel_refused") { $0["stage"] == "stream" })
        #expect(line.refusal == .stream(.sniMismatch) && line["host"] == "x.api.pinproxy.test" && line["bytes_up"] == "0" && line["bytes_down"] == "0")
        #expect(line["detail"]?.hasPrefix("the ClientHello names api.pinproxy.test, which the rule at line") == true, "\(line)")
        // The CONNECT's own host is still under its report mode or bypass: with its own name it is let through, with a warning.
        #expect(try sni(proxy, "x.api.pinproxy.test:\(rogue.port)", "x.api.pinproxy.test") == "OK hello from rogue")
        let bypassed = proxy.waitFor("tunnel_bypassed") { $0["host"] == "x.api.pinproxy.test" }
        #expect(bypassed?["would_refuse"] == "true" && bypassed?["bypass"] == (scope == "report" ? "report_mode" : "debug_bypass"))
    }

    /// Cleartext inside a pinned tunnel is closed unread: the server (plain HTTP once the probe has
    /// passed) never answers it.
    @Test func cleartextInAPinnedTunnelIsClosed() throws {
        let genuine = try Upstream("leaf-ec256", name: "genuine")
        let plain = try Upstream(mode: "plain")
        let attacker = try Replayer(genuine: genuine.port, abort: "none", then: plain.port)
        let proxy = try ProxyProcess(config: policy(ports: [attacker.port], rules: Self.apiPinned))
        #expect(try sni(proxy, "api.pinproxy.test:\(attacker.port)", "api.pinproxy.test", send: "plain") == "CLOSED")
        let line = try #require(proxy.waitFor("tunnel_refused"))
        #expect(line["stage"] == "stream" && line.refusal == .stream(.notTLS) && line["bytes_up"] == "0")
    }

    /// `openssl s_client` (through pinproxy with `proxy`) saving or resuming a TLS 1.2 session. It
    /// makes a request and waits for the server's close: a server drops a session from its cache
    /// when the connection ends without a close_notify.
    func sClient(proxy: UInt16?, port: UInt16, session: String, resume: Bool, tickets: Bool) throws -> String {
        var args = ["s_client", "-connect", proxy == nil ? "127.0.0.1:\(port)" : "api.pinproxy.test:\(port)", "-servername", "api.pinproxy.test",
                    "-tls1_2", "-CAfile", Paths.fixture("both-roots.pem"), "-ign_eof", resume ? "-sess_in" : "-sess_out", session]
        if let proxy { args += ["-proxy", "127.0.0.1:\(proxy)"] }
        if !tickets { args.append("-no_ticket") }
        let command = "printf 'GET / HTTP/1.1\\r\\nHost: api.pinproxy.test\\r\\n\\r\\n' | openssl " + args.map { "'\($0)'" }.joined(separator: " ")
        let r = try run("/bin/sh", ["-c", command], timeout: 15)
        return r.stdout + r.stderr
    }

    /// A TLS 1.2 session made through pinproxy (verified in the stream) resumes through it; one
    /// made directly with a rogue server does not — by session id and by ticket.
    @Test(arguments: [false, true])
    func resumptionIsAllowedOnlyForVerifiedSessions(tickets: Bool) throws {
        let directory = try temporaryDirectory()
        let good = try Upstream("leaf-ec256", name: "good", tls: "1.2")
        let proxy = try ProxyProcess(config: policy(ports: [good.port], rules: Self.apiPinned))
        let first = try sClient(proxy: proxy.port, port: good.port, session: "\(directory)/good.pem", resume: false, tickets: tickets)
        #expect(first.contains("New, TLSv1.2") && first.contains("hello from good"), "\(first)")
        let again = try sClient(proxy: proxy.port, port: good.port, session: "\(directory)/good.pem", resume: true, tickets: tickets)
        #expect(again.contains("Reused, TLSv1.2"), "\(again)")
        let closed = proxy.events("tunnel_closed", count: 2)
        #expect(closed.count == 2 && closed.allSatisfy { $0["verify"] == "probe+stream" })

        // The attacker: the session was made directly with the rogue server, and the tunnel is
        // routed to it once the probe has passed.
        let rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.2")
        let attacker = try Replayer(genuine: good.port, abort: "none", then: rogue.port)
        let proxy2 = try ProxyProcess(config: policy(ports: [attacker.port], rules: Self.apiPinned))
        #expect(try sClient(proxy: nil, port: rogue.port, session: "\(directory)/rogue.pem", resume: false, tickets: tickets).contains("hello from rogue"))
        let resumed = try sClient(proxy: proxy2.port, port: attacker.port, session: "\(directory)/rogue.pem", resume: true, tickets: tickets)
        #expect(!resumed.contains("Reused, TLSv1.2"), "\(resumed)")
        let line = try #require(proxy2.waitFor("tunnel_refused"))
        #expect(line["stage"] == "stream" && line.refusal == .stream(.unverifiedResumption), "\(line)")
    }
}
