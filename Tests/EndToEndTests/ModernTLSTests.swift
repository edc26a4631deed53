import Foundation
import Testing
import TestSupport

/// The TLS peers of 2026 through pinproxy (issue 28): real clients and servers whose ClientHellos
/// and key exchanges are those of current OpenSSL and browsers, not Debian 12's. OpenSSL ≥ 3.5
/// clients (pyOpenSSL on cryptography's bundled OpenSSL 4.0) send an X25519MLKEM768 share beside
/// X25519; curl_cffi's Chrome, Firefox and Safari add GREASE, ECH GREASE (Chrome, Firefox) and
/// compress_certificate (RFC 8879). The servers: pyOpenSSL picking the hybrid, pyOpenSSL kept to
/// X25519, and tlslite-ng compressing its certificate (with or without the hybrid).
///
/// Each cell: a pinned host resolved to the loopback server, a proxy of its own (so one cell's
/// quarantine is not the next one's), `mirror_checks` at its default (1), `tunnels` CONNECTs in
/// sequence, every one of which gets the body, closes with `verify=probe+mirror`, and none is
/// refused or taken for an interception. The peers are scripts/peers_tls.py (and, for the
/// compressing servers, scripts/tlslite_server.py) run with the peers' venv (`Paths.requirePeers()`).
@Suite(.serialized) struct ModernTLSTests {
    static let rules = apiRule(pinsLine(Pins.leafEC))
    static let host = "api.pinproxy.test"
    static let cafile = Paths.fixture("both-roots.pem")
    static let tunnels = 5

    enum Client: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case pyOpenSSL, chrome, firefox, safari
        var testDescription: String { rawValue }

        /// curl_cffi 0.17.0's impersonation target; nil for the pyOpenSSL client.
        var impersonate: String? {
            switch self {
            case .pyOpenSSL: return nil
            case .chrome: return "chrome152"
            case .firefox: return "firefox155"
            case .safari: return "safari270"
            }
        }
    }

    enum Server: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// pyOpenSSL with `X25519MLKEM768:X25519`: the hybrid whenever the client offers it.
        case pq
        /// pyOpenSSL with `X25519` only: the classical handshake pinproxy's mirror already makes.
        case classical
        /// tlslite-ng compressing its Certificate (zlib, brotli) for clients that offer it, X25519.
        case compressing
        /// tlslite-ng compressing, with the hybrid preferred.
        case pqCompressing
        var testDescription: String { rawValue }

        /// The body each tunnel of `client` gets: peers_tls.py names the backend, the group the
        /// handshake agreed on and the version; tlslite_server.py the group and how it compressed
        /// its certificate (the first algorithm of the client's offer it has: Chrome offers
        /// brotli, Firefox zlib first, Safari zlib; pyOpenSSL's OpenSSL offers none). Every client
        /// here offers an X25519MLKEM768 share.
        func body(for client: Client) -> String {
            let compression = switch client {
            case .pyOpenSSL: "none"
            case .chrome: "brotli"
            case .firefox, .safari: "zlib"
            }
            switch self {
            case .pq: return "peer-ok pq X25519MLKEM768 TLSv1.3"
            case .classical: return "peer-ok classical x25519 TLSv1.3"
            case .compressing: return "hello from tlslite-ng group=x25519 compression=\(compression)"
            case .pqCompressing: return "hello from tlslite-ng group=x25519mlkem768 compression=\(compression)"
            }
        }
    }

    /// A peer server (peers_tls.py or tlslite_server.py) with its per-connection log.
    final class PeerServer {
        let helper: Helper
        let logPath: String
        var port: UInt16 { helper.port }

        init(_ arguments: [String], logPath: String) throws {
            helper = try Helper(try Paths.requirePeers(), arguments)
            self.logPath = logPath
        }

        /// One line per connection (peers_tls.py only): `conn=N backend=NAME group=G result=ok|error:…`.
        var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

        func stop() { helper.stop() }
    }

    static func script(_ name: String) -> String { "\(Paths.scripts)/\(name)" }

    /// peers_tls.py's server: `groups` is OpenSSL's list (nil: OpenSSL 4.0's defaults); each
    /// `backend` (name, fixture leaf) is one chain and key, taken in turn per connection.
    static func peersServer(groups: String?, backends: [(name: String, leaf: String)]) throws -> PeerServer {
        let logPath = try temporaryDirectory() + "/server.log"
        var arguments = [script("peers_tls.py"), "server", "--log", logPath]
        for backend in backends {
            arguments += ["--backend", "\(backend.name):\(Paths.fixture("\(backend.leaf).chain.pem")):\(Paths.fixture("\(backend.leaf).key.pem"))"]
        }
        if let groups { arguments += ["--groups", groups] }
        return try PeerServer(arguments, logPath: logPath)
    }

    static func start(_ server: Server) throws -> PeerServer {
        switch server {
        case .pq: return try peersServer(groups: "X25519MLKEM768:X25519", backends: [("pq", "leaf-ec256")])
        case .classical: return try peersServer(groups: "X25519", backends: [("classical", "leaf-ec256")])
        case .compressing, .pqCompressing:
            // tlslite-ng compressing its certificate with zlib or brotli, classical or hybrid.
            var arguments = [script("tlslite_server.py"), "--cert", Paths.fixture("leaf-ec256.chain.pem"),
                             "--key", Paths.fixture("leaf-ec256.key.pem"), "--compress", "zlib,brotli"]
            arguments += ["--groups", server == .pqCompressing ? "x25519mlkem768,x25519" : "x25519"]
            return try PeerServer(arguments, logPath: "/dev/null")
        }
    }

    /// What a client run printed: one `OK <status line> | <body>` or `ERROR <what>` per tunnel,
    /// then `GOT k/N`.
    struct Fetched: CustomStringConvertible {
        let status: Int32
        let lines: [String]
        let stderr: String

        /// The bodies of the tunnels that got a 200.
        var bodies: [String] { lines.compactMap { $0.hasPrefix("OK HTTP/1.1 200 OK | ") ? String($0.dropFirst(21)) : nil } }
        var description: String { (lines + (stderr.isEmpty ? [] : ["stderr: " + stderr])).joined(separator: "\n") }
    }

    /// `count` tunnels in sequence through the proxy to https://api.pinproxy.test:`port`/.
    static func fetch(_ client: Client, proxy: UInt16, port: UInt16, count: Int = tunnels, keyLog: String? = nil) throws -> Fetched {
        var arguments = [script("peers_tls.py")]
        if let impersonate = client.impersonate { arguments += ["curlcffi", "--impersonate", impersonate] } else { arguments += ["client"] }
        arguments += ["--proxy", "127.0.0.1:\(proxy)", "--host", host, "--port", String(port), "--ca", cafile, "--count", String(count)]
        if let keyLog { arguments += ["--keylog", keyLog] }
        let home = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: home) }
        // No inherited proxy or CA settings: only what the arguments say.
        let r = try run(try Paths.requirePeers(), arguments, environment: ["PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"],
                        timeout: Double(30 + 25 * count))
        return Fetched(status: r.status, lines: r.stdout.split(separator: "\n").map(String.init), stderr: r.stderr)
    }

    /// The proxy's refusals and interception alarms, one line each, for a failure message.
    static func alarms(_ proxy: ProxyProcess) -> [String] {
        proxy.lines.filter { ["tunnel_refused", "interception_suspected"].contains($0["event"] ?? "") }.map { line in
            ["event", "stage", "reason", "detail", "tls"].compactMap { key in line[key].map { "\(key)=\($0)" } }.joined(separator: " ")
        }
    }

    /// `count` tunnels got `body` (or, with nil, one same non-empty body: tlslite_server.py's),
    /// all closed with `verify` over TLS 1.3, and nothing was refused or taken for an interception.
    static func expectAllVerified(_ fetched: Fetched, body: String?, proxy: ProxyProcess, server: PeerServer, count: Int = tunnels,
                                  verify: String = "probe+mirror", sourceLocation: SourceLocation = #_sourceLocation) {
        let context = "client:\n\(fetched)\nproxy alarms:\n\(alarms(proxy).joined(separator: "\n"))\nserver connections:\n\(server.log)"
        #expect(fetched.status == 0 && fetched.lines.last == "GOT \(count)/\(count)", "\(context)", sourceLocation: sourceLocation)
        if let body {
            #expect(fetched.bodies == Array(repeating: body, count: count), "\(context)", sourceLocation: sourceLocation)
        } else {
            #expect(fetched.bodies.count == count && Set(fetched.bodies).count == 1 && fetched.bodies.first?.isEmpty == false,
                    "\(context)", sourceLocation: sourceLocation)
        }
        // A tunnel's close line can trail its body; a refused tunnel has none (waiting for it would
        // only wait out the bound).
        let closed = proxy.events("tunnel_closed", count: fetched.bodies.count)
        #expect(closed.count == count && closed.allSatisfy { $0["verify"] == verify && $0["tls"] == "TLSv1.3" },
                "\(closed.map { "verify=\($0["verify"] ?? "-") tls=\($0["tls"] ?? "-") reason=\($0["reason"] ?? "-")" })\n\(context)",
                sourceLocation: sourceLocation)
        #expect(alarms(proxy).isEmpty, "\(context)", sourceLocation: sourceLocation)
    }

    // MARK: The matrix

    /// Every client × every server: `tunnels` tunnels, each verified by the mirror check.
    @Test(arguments: Server.allCases, Client.allCases)
    func everyTunnelIsVerifiedByTheMirror(server kind: Server, client: Client) throws {
        let server = try Self.start(kind)
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.rules))
        let fetched = try Self.fetch(client, proxy: proxy.port, port: server.port)
        Self.expectAllVerified(fetched, body: kind.body(for: client), proxy: proxy, server: server)
    }

    /// A server that accepts only P-256: the pyOpenSSL client, Chrome and Safari (hybrid and
    /// X25519 shares) get a HelloRetryRequest, and the mirror answers its own one with a P-256
    /// share; Firefox sends a P-256 share at once.
    @Test(arguments: Client.allCases)
    func aServerThatAsksForAnotherShareIsVerifiedToo(client: Client) throws {
        let server = try Self.peersServer(groups: "P-256", backends: [("retry", "leaf-ec256")])
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.rules))
        let fetched = try Self.fetch(client, proxy: proxy.port, port: server.port)
        Self.expectAllVerified(fetched, body: "peer-ok retry secp256r1 TLSv1.3", proxy: proxy, server: server)
    }

    // MARK: A load-balanced pair

    /// Two backends behind one address, each with its own pinned key (leaf-ec256, leaf-rotated),
    /// taken in turn per connection: the probe, the tunnel and its mirror meet different keys,
    /// and all pass. Classical and hybrid key exchange, for the pyOpenSSL client and Chrome.
    @Test(arguments: ["X25519", "X25519MLKEM768:X25519"], [Client.pyOpenSSL, .chrome])
    func aLoadBalancedPairWithTwoPinnedKeysIsVerified(groups: String, client: Client) throws {
        let server = try Self.peersServer(groups: groups, backends: [("a", "leaf-ec256"), ("b", "leaf-rotated")])
        defer { server.stop() }
        let rules = apiRule(pinsLine(Pins.leafEC, Pins.leafRotated))
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: rules))
        let count = 6
        let fetched = try Self.fetch(client, proxy: proxy.port, port: server.port, count: count)
        let group = groups == "X25519" ? "x25519" : "X25519MLKEM768"
        let context = "client:\n\(fetched)\nproxy alarms:\n\(Self.alarms(proxy).joined(separator: "\n"))\nserver connections:\n\(server.log)"
        #expect(fetched.status == 0 && fetched.lines.last == "GOT \(count)/\(count)", "\(context)")
        #expect(fetched.bodies.count == count && fetched.bodies.allSatisfy { ["peer-ok a \(group) TLSv1.3", "peer-ok b \(group) TLSv1.3"].contains($0) },
                "\(context)")
        let closed = proxy.events("tunnel_closed", count: fetched.bodies.count)
        #expect(closed.count == count && closed.allSatisfy { $0["verify"] == "probe+mirror" && $0["tls"] == "TLSv1.3" }, "\(closed)\n\(context)")
        #expect(Self.alarms(proxy).isEmpty, "\(context)")
        // Both keys were shown: the pool's connections alternate a, b, a, … (the probe's is the first).
        let backends = Set(server.log.split(separator: "\n").compactMap { $0.split(separator: " ").first { $0.hasPrefix("backend=") } })
        #expect(backends == ["backend=a", "backend=b"], "\(server.log)")
    }

    // MARK: A guessing interceptor with the 2026 clients

    /// A rogue server the clients trust (rogue-leaf, post-quantum too) behind an interceptor that
    /// takes every second connection, with two mirrors: each tunnel's three copies of the client's
    /// hello (its own and two mirrors, ML-KEM shares all) are answered rogue, genuine, rogue, so a
    /// mirror always sees the rogue chain (no client ever gets the rogue body) and two looks with
    /// one hello disagree (or the confirming look does): caught on the first tunnel, quarantined.
    @Test(arguments: [Client.pyOpenSSL, .chrome])
    func aGuessingInterceptorIsCaughtWithPostQuantumHellos(client: Client) throws {
        let genuine = try Self.peersServer(groups: "X25519MLKEM768:X25519", backends: [("genuine", "leaf-ec256")])
        defer { genuine.stop() }
        let rogue = try Self.peersServer(groups: "X25519MLKEM768:X25519", backends: [("rogue", "rogue-leaf")])
        defer { rogue.stop() }
        let interceptor = try Interceptor(genuine: genuine.port, rogue: rogue.port, strategy: .every(2))
        defer { interceptor.stop() }
        let rules = apiRule(pinsLine(Pins.leafEC) + "\n    mirror_checks: 2")
        let proxy = try ProxyProcess(config: policy(ports: [interceptor.port], rules: rules, proxy: "verify_cache_ttl: 0s"))
        let fetched = try Self.fetch(client, proxy: proxy.port, port: interceptor.port, count: 1)
        #expect(!fetched.lines.contains { $0.contains("peer-ok rogue") }, "\(fetched)")
        let caught = try #require(proxy.waitFor("interception_suspected"), "\(Self.alarms(proxy))")
        #expect(caught["stage"] == "mirror" && caught["chain.0.spki"] == Pins.rogueLeaf && caught["quarantined_until"] != nil, "\(caught)")
        let refused = proxy.events("tunnel_refused")
        #expect(refused.count == 1 && refused.first?["stage"] == "mirror" && refused.first?["chain.0.spki"] == Pins.rogueLeaf, "\(refused)")
    }

    // MARK: With a key log

    /// The pyOpenSSL client writing its key log (SSLKEYLOGFILE lines from its keylog callback) and
    /// curl_cffi as Chrome (libcurl's SSLKEYLOGFILE): pinproxy reads the server's flight with the
    /// client's own secrets, so the check is the stream's (`verify=probe+keylog`), whatever the key
    /// exchange, through compressed certificates too.
    @Test(arguments: Server.allCases, [Client.pyOpenSSL, .chrome])
    func withAKeyLogTheTunnelIsVerifiedInTheStream(server kind: Server, client: Client) throws {
        let keyLog = try memoryDirectory() + "/keylog"
        let server = try Self.start(kind)
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.rules, proxy: "keylog: { path: \(keyLog), wait: 2s }"))
        let fetched = try Self.fetch(client, proxy: proxy.port, port: server.port, keyLog: keyLog)
        Self.expectAllVerified(fetched, body: kind.body(for: client), proxy: proxy, server: server, verify: "probe+keylog")
    }

    // MARK: What the clients offer

    /// The premise of the matrix, checked on the wire: each client's ClientHello (captured by
    /// peers_tls.py's `hello`, named as the client's proxy) carries an X25519MLKEM768 (0x11ec) and
    /// an X25519 (0x001d) share, and the browsers offer compress_certificate and GREASE.
    @Test(arguments: Client.allCases)
    func theClientsOfferTheHybridShare(client: Client) throws {
        let reportPath = try temporaryDirectory() + "/hello.txt"
        let capture = try Helper(try Paths.requirePeers(), [Self.script("peers_tls.py"), "hello", "--log", reportPath])
        defer { capture.stop() }
        let python = try Paths.requirePeers()
        var arguments = [Self.script("peers_tls.py")]
        if let impersonate = client.impersonate { arguments += ["curlcffi", "--impersonate", impersonate] } else { arguments += ["client"] }
        arguments += ["--proxy", "127.0.0.1:\(capture.port)", "--host", Self.host, "--port", "443", "--ca", Self.cafile]
        let r = try run(python, arguments, environment: ["PATH": "/usr/bin:/bin", "HOME": try temporaryDirectory(), "LANG": "C.UTF-8"], timeout: 30)
        #expect(r.status == 1 && r.stdout.hasSuffix("GOT 0/1\n"), "\(r.stdout)")  // the capture hangs up after the hello
        let report = ((try? String(contentsOfFile: reportPath, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        func values(_ label: String) -> [String] {
            (report.first { $0.hasPrefix(label + " ") }?.dropFirst(label.count + 1).split(separator: ",").map(String.init)) ?? []
        }
        let grease: (String) -> Bool = { $0.count == 4 && $0[$0.index($0.startIndex, offsetBy: 1)] == "a" && $0.hasSuffix("a") }
        let shares = values("SHARES")
        let expected: (shares: [String], compress: [String], greaseShare: Bool, ech: String) = switch client {
        case .pyOpenSSL: (["11ec", "001d"], [], false, "no")
        case .chrome: (["11ec", "001d"], ["0002"], true, "yes")
        case .firefox: (["11ec", "001d", "0017"], ["0001", "0002", "0003"], false, "yes")
        case .safari: (["11ec", "001d"], ["0001"], true, "no")
        }
        #expect(shares.filter { !grease($0) } == expected.shares, "\(report)")
        #expect(shares.contains(where: grease) == expected.greaseShare, "\(report)")
        #expect(values("COMPRESS") == expected.compress, "\(report)")
        #expect(report.contains("ECH \(expected.ech)"), "\(report)")
    }
}
