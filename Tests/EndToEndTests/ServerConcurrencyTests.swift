import Foundation
import Testing
import TestSupport

/// `pinproxy pin` and `check --probe` make two handshakes, the second while the first is held open,
/// and say when a server answers one connection at a time (`openssl s_server -www`, a Python
/// HTTPServer whose listening socket is wrapped in TLS): pinproxy's mirror check opens a second
/// connection beside each TLS 1.3 client's, which such a server never answers, so its rule needs
/// `mirror_checks: 0`. What they say is what the proxy then does: refused `mirror_lost` without it,
/// `200` with it. A server that answers side by side gets no such line.
@Suite(.serialized) struct ServerConcurrencyTests {
    static let chain = Paths.fixture("leaf-ec256.chain.pem"), key = Paths.fixture("leaf-ec256.key.pem")

    /// A server of `kind` on 127.0.0.1 for api.pinproxy.test's chain (leaf-ec256), with its port and
    /// what it answers a GET with; stopped by `stop`.
    final class Server {
        let port: UInt16
        let body: String
        private let openssl: OpenSSLWebServer?
        private let helper: Helper?

        init(_ kind: String) throws {
            switch kind {
            case "s_server":
                let server = try OpenSSLWebServer(certificate: Paths.fixture("leaf-ec256.pem"), issuer: Paths.fixture("good-intermediate.pem"),
                                                  key: ServerConcurrencyTests.key, [])
                (openssl, helper, port, body) = (server, nil, server.port, "")
            case "python":
                let server = try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/single_server.py", "--cert", ServerConcurrencyTests.chain,
                                                         "--key", ServerConcurrencyTests.key])
                (openssl, helper, port, body) = (nil, server, server.port, "hello from one at a time\n")
            default:
                let server = try Upstream("leaf-ec256", name: "side by side")
                (openssl, helper, port, body) = (nil, server.helper, server.port, "hello from side by side\n")
            }
        }

        func stop() {
            openssl?.stop()
            helper?.stop()
        }
    }

    /// The rule, with `mirror_checks` when given.
    static func rule(mirrorChecks: Int? = nil) -> String {
        apiRule("    pins:\n      - { pin: \"\(Pins.leafEC)\", at: leaf }\n      - { pin: \"\(Pins.intermediate)\", at: ca, backup: true }"
                + (mirrorChecks.map { "\n    mirror_checks: \($0)" } ?? ""))
    }

    static let oneAtATime = """
        # pinproxy's mirror check opens a second connection beside each TLS 1.3 client's, so every TLS 1.3 tunnel to it without a key log
        # would be refused mirror_lost; with mirror_checks: 0 those tunnels rest on pinproxy's own probe (verify=probe-only).
        """

    @Test(arguments: ["s_server", "python"])
    func aServerThatAnswersOneConnectionAtATimeIsSaidSo(kind: String) throws {
        let server = try Server(kind)
        defer { server.stop() }
        let withRule = try temporaryFile(policy(ports: [server.port], rules: Self.rule()))

        // pin: the lines, the line for the policy's rule, and the rule to paste with mirror_checks: 0.
        let pin = try run(Paths.pinproxy, ["pin", "api.pinproxy.test:\(server.port)", "--config", withRule], timeout: 60)
        #expect(pin.status == 0, "\(pin.stderr)")
        #expect(pin.stdout.contains("""

            # MATCHES rule at line 15 (pin \(Pins.leafEC) at position 0).
            # 127.0.0.1:\(server.port) serves one connection at a time: a second TLS connection made while a first was open got no answer until the first closed.
            \(Self.oneAtATime)
            # Add to the rule at line 15: mirror_checks: 0
            # Ready-to-paste rule (under rules:). Confirm these pins from a network you trust.
            - host: "api.pinproxy.test"
              mirror_checks: 0                  # it serves one connection at a time
              pins:

            """), "\(pin.stdout)")

        // check --probe: the same, as a refusal the rule's tunnels would get.
        let probe = try run(Paths.pinproxy, ["check", "--config", withRule, "--probe"], timeout: 60)
        #expect(probe.status == 1, "\(probe.stdout)\(probe.stderr)")
        #expect(probe.stdout.hasSuffix("""

            line 15 api.pinproxy.test:\(server.port): matches (\(Pins.leafEC) at position 0) via 127.0.0.1 TLSv1.3
            line 15 api.pinproxy.test:\(server.port): serves one connection at a time (a second TLS connection got no answer until the first closed): every TLS 1.3 tunnel without a key log would be REFUSED: mirror_lost (the mirror check's connection waits behind the client's); add to the rule at line 15: mirror_checks: 0

            """), "\(probe.stdout)")

        // run: what check said.
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: Self.rule()))
        #expect(try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port).status != 200)
        let refused = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        #expect(refused["stage"] == "mirror" && refused["reason"] == "mirror_lost", "\(refused)")
        #expect(proxy.stop() == 0)

        // With mirror_checks: 0, check --probe passes and the tunnel opens.
        let fixed = policy(ports: [server.port], rules: Self.rule(mirrorChecks: 0))
        let passes = try run(Paths.pinproxy, ["check", "--config", try temporaryFile(fixed), "--probe"], timeout: 60)
        #expect(passes.status == 0 && !passes.stdout.contains("one connection at a time"), "\(passes.stdout)")
        let working = try ProxyProcess(config: fixed)
        let through = try curl(proxy: working.port, host: "api.pinproxy.test", port: server.port)
        #expect(through.status == 200, "\(through.stderr) \(working.log)")
        if !server.body.isEmpty { #expect(through.body == server.body) }
        #expect(working.waitFor("tunnel_closed")?["verify"] == "probe-only", "\(working.log)")
        #expect(working.stop() == 0)
    }

    /// A server that serves each connection on its own thread: no line, no mirror_checks, a
    /// check that passes.
    @Test func aServerThatAnswersSideBySideIsNotSaidToServeOneAtATime() throws {
        let server = try Server("threads")
        defer { server.stop() }
        let config = try temporaryFile(policy(ports: [server.port], rules: Self.rule()))
        let pin = try run(Paths.pinproxy, ["pin", "api.pinproxy.test:\(server.port)", "--config", config], timeout: 60)
        #expect(pin.status == 0, "\(pin.stderr)")
        #expect(pin.stdout.contains("\n# MATCHES rule at line 15 (pin \(Pins.leafEC) at position 0).\n# Ready-to-paste rule (under rules:)."), "\(pin.stdout)")
        #expect(!pin.stdout.contains("one connection at a time") && !pin.stdout.contains("mirror_checks"), "\(pin.stdout)")
        let probe = try run(Paths.pinproxy, ["check", "--config", config, "--probe"], timeout: 60)
        #expect(probe.status == 0, "\(probe.stdout)")
        #expect(probe.stdout.hasSuffix("""

            line 15 api.pinproxy.test:\(server.port): matches (\(Pins.leafEC) at position 0) via 127.0.0.1 TLSv1.3

            """), "\(probe.stdout)")
    }
}
