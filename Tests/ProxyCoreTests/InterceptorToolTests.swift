import Foundation
import Testing
import TestSupport

/// The test tools of issue 18's mirror check, tested on their own (no pinproxy): real curl (TLS 1.3)
/// and a Go net/http client go straight through scripts/interceptor.py to a genuine and a rogue
/// server (both trusted by the clients, as after a CA compromise), and each strategy intercepts
/// exactly the connections it says; scripts/lb_server.py answers with both keys; scripts/
/// resumption_cut.py cuts exactly the resumed handshakes.
@Suite(.serialized) struct InterceptorToolTests {
    static let host = "api.pinproxy.test"
    static let cafile = Paths.fixture("both-roots.pem")

    /// scripts/resume_go.go, built once into a temporary directory with its own build cache.
    static let goClient: Result<String, HelperError> = {
        do {
            let directory = try temporaryDirectory()
            let environment = ["PATH": "/usr/bin:/bin", "HOME": directory, "GOCACHE": directory + "/gocache",
                               "GOPATH": directory + "/gopath", "GO111MODULE": "off", "CGO_ENABLED": "0"]
            let r = try run("/usr/bin/go", ["build", "-o", directory + "/resume_go", "\(Paths.scripts)/resume_go.go"], environment: environment, timeout: 300)
            guard r.status == 0 else { return .failure(HelperError(message: "go build failed: \(r.stderr)")) }
            return .success(directory + "/resume_go")
        } catch {
            return .failure(HelperError(message: "\(error)"))
        }
    }()

    /// A genuine and a rogue TLS 1.3 server for the same name, and an interceptor in front of them.
    struct Path {
        let genuine: Upstream
        let rogue: Upstream
        let interceptor: Interceptor

        init(_ strategy: Interceptor.Strategy, invert: Bool = false, windowMilliseconds: Double = 100, helloTimeout: Double = 5) throws {
            genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
            rogue = try Upstream("rogue-leaf", name: "rogue", tls: "1.3")
            interceptor = try Interceptor(genuine: genuine.port, rogue: rogue.port, strategy: strategy, invert: invert,
                                          windowMilliseconds: windowMilliseconds, helloTimeout: helloTimeout)
        }

        var url: String { "https://\(InterceptorToolTests.host):\(interceptor.port)/" }

        /// curl with TLS 1.3 and no proxy, `requests` URLs in one invocation (a new connection each:
        /// the server closes); the bodies, in order (`nil` for a request that failed).
        func curl(_ requests: Int = 1, extra: [String] = []) throws -> [String] {
            let r = try run("/usr/bin/curl", curlArguments(requests, extra: extra), environment: ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()])
            return r.stdout.split(separator: "\n").map(String.init)
        }

        func curlArguments(_ requests: Int, extra: [String] = []) -> [String] {
            ["-sS", "--max-time", "20", "--tlsv1.3", "--cacert", InterceptorToolTests.cafile, "--noproxy", "*",
             "--resolve", "\(InterceptorToolTests.host):\(interceptor.port):127.0.0.1"] + extra + Array(repeating: url, count: requests)
        }

        /// The Go client: `requests` GETs, each on a new connection; the bodies, in order.
        func go(_ requests: Int = 1) throws -> [String] {
            let binary = try InterceptorToolTests.goClient.get()
            let r = try run(binary, [url, InterceptorToolTests.cafile, String(requests), "default", "127.0.0.1:\(interceptor.port)"],
                            environment: ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()])
            // `OK 200 resumed=false hello from genuine`
            return r.stdout.split(separator: "\n").map { $0.split(separator: " ", maxSplits: 3).dropFirst(3).joined() }
        }

        func stop() {
            interceptor.stop()
            genuine.stop()
            rogue.stop()
        }
    }

    static func bodies(_ decisions: [Interceptor.Entry.Decision]) -> [String] { decisions.map { "hello from \($0.rawValue)" } }

    @Test func noneAndAllInterceptNothingAndEverything() throws {
        for (strategy, decision) in [(Interceptor.Strategy.none, Interceptor.Entry.Decision.genuine), (.all, .rogue)] {
            let path = try Path(strategy)
            defer { path.stop() }
            #expect(try path.curl(2) == Self.bodies([decision, decision]))
            #expect(try path.go(2) == Self.bodies([decision, decision]))
            let entries = path.interceptor.waitForEntries(4)
            #expect(entries.map(\.decision) == [decision, decision, decision, decision])
            #expect(entries.allSatisfy { $0.serverName == Self.host })
        }
    }

    /// Three clients at once form one group; the strategy picks exactly the one at its position.
    @Test(arguments: [(Interceptor.Strategy.OrderPick.first, 1), (.nth(2), 2), (.last, 3)])
    func orderInterceptsOnlyThePickedConnectionOfAGroup(pick: Interceptor.Strategy.OrderPick, position: Int) throws {
        // A window long enough that three curls started together on a loaded machine fall in one group.
        let path = try Path(.order(pick), windowMilliseconds: 3000)
        defer { path.stop() }
        let clients = try (0..<3).map { _ in try BackgroundRun("/usr/bin/curl", path.curlArguments(1)) }
        let bodies = clients.map { $0.output(timeout: 60).trimmingCharacters(in: .whitespacesAndNewlines) }
        let entries = path.interceptor.waitForEntries(3)
        #expect(entries.map(\.group) == [1, 1, 1])
        #expect(entries.map(\.position) == [1, 2, 3])
        #expect(entries.map(\.decision) == (1...3).map { $0 == position ? .rogue : .genuine })
        #expect(bodies.sorted() == Self.bodies([.genuine, .genuine, .rogue]))
    }

    /// Learned from a capture of curl's hello: curl's connections are intercepted, Go's are not;
    /// inverted (intercept what does not look like the capture), the reverse.
    @Test(arguments: [false, true])
    func fingerprintInterceptsByTheHellosShape(invert: Bool) throws {
        let capture = try Path(.none)
        _ = try capture.curl(1)
        let learned = capture.interceptor.waitForEntries(1)
        capture.stop()
        let curlShape = try #require(learned.first?.shape)

        let path = try Path(.fingerprint(learnedFrom: capture.interceptor.logPath), invert: invert)
        defer { path.stop() }
        let (curlPick, goPick): (Interceptor.Entry.Decision, Interceptor.Entry.Decision) = invert ? (.genuine, .rogue) : (.rogue, .genuine)
        // Two curl runs, not two URLs in one: a second connection of the same run would offer the
        // first one's ticket, and the pre_shared_key extension makes another shape.
        #expect(try path.curl(1) == Self.bodies([curlPick]))
        #expect(try path.curl(1) == Self.bodies([curlPick]))
        #expect(try path.go(2) == Self.bodies([goPick, goPick]))
        let entries = path.interceptor.waitForEntries(4)
        #expect(entries.map(\.decision) == [curlPick, curlPick, goPick, goPick])
        #expect(entries.map(\.shape) == [curlShape, curlShape, entries[2].shape, entries[2].shape])
        #expect(entries[2].shape != curlShape)
    }

    /// The interceptor that lets only pinproxy's probe (today's, ProbeTLS's settings, played by
    /// `openssl s_client`) through and takes every other hello: curl's and Go's.
    @Test func fingerprintInvertedTakesAllButTheProbesShape() throws {
        let capture = try Path(.none)
        let probe = try probeLikeClient(port: capture.interceptor.port)
        #expect(probe.stdout.contains("CN = pinproxy good intermediate"))
        let probeShape = try #require(capture.interceptor.waitForEntries(1).first?.shape)
        capture.stop()

        let path = try Path(.fingerprint(learnedFrom: capture.interceptor.logPath), invert: true)
        defer { path.stop() }
        let again = try probeLikeClient(port: path.interceptor.port)
        #expect(again.stdout.contains("CN = pinproxy good intermediate") && !again.stdout.contains("rogue root"))
        #expect(try path.curl(1) == Self.bodies([.rogue]))
        #expect(try path.go(1) == Self.bodies([.rogue]))
        let entries = path.interceptor.waitForEntries(3)
        #expect(entries.map(\.decision) == [.genuine, .rogue, .rogue])
        #expect(entries[0].shape == probeShape && entries[1].shape != probeShape && entries[2].shape != probeShape)
    }

    /// A ClientHello shaped like pinproxy's probe (Sources/TLSInspection/ProbeTLS.swift): OpenSSL's
    /// defaults, ALPN h2,http/1.1, groups X25519, P-256, P-384, TLS 1.2 to 1.3.
    func probeLikeClient(port: UInt16) throws -> Run {
        try run("/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(port)", "-servername", Self.host, "-alpn", "h2,http/1.1",
                                     "-groups", "X25519:P-256:P-384", "-min_protocol", "TLSv1.2"], timeout: 20)
    }

    @Test(arguments: [false, true])
    func alpnInterceptsHellosWithOrWithoutALPN(invert: Bool) throws {
        let path = try Path(.alpn, invert: invert)
        defer { path.stop() }
        let (withALPN, without): (Interceptor.Entry.Decision, Interceptor.Entry.Decision) = invert ? (.genuine, .rogue) : (.rogue, .genuine)
        #expect(try path.curl(1) == Self.bodies([withALPN]))
        #expect(try path.curl(1, extra: ["--no-alpn"]) == Self.bodies([without]))
        #expect(try path.go(1) == Self.bodies([without]))
        let entries = path.interceptor.waitForEntries(3)
        #expect(entries.map(\.decision) == [withALPN, without, without])
        #expect(entries.map(\.alpn) == [["h2", "http/1.1"], [], []])
    }

    /// curl sends its hello at once; a client that waits longer than the threshold is intercepted.
    /// The threshold is 3 s, a thousand times curl's milliseconds, so that a loaded machine's
    /// scheduling cannot make curl look late.
    @Test func delayInterceptsLateHellos() throws {
        let path = try Path(.delay(milliseconds: 3000))
        defer { path.stop() }
        #expect(try path.curl(2) == Self.bodies([.genuine, .genuine]))
        let late = try connectedSocket(port: path.interceptor.port)
        defer { close(late) }
        usleep(3_500_000)  // the distinguisher itself: the hello comes 3.5 s after the connect
        let record = [22, 3, 1, UInt8(RFC8448Vectors.clientHello.count >> 8), UInt8(RFC8448Vectors.clientHello.count & 0xff)] + RFC8448Vectors.clientHello
        _ = record.withUnsafeBytes { send(late, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        let entries = path.interceptor.waitForEntries(3)
        #expect(entries.map(\.decision) == [.genuine, .genuine, .rogue])
        #expect(entries[2].serverName == "server")  // RFC 8448's hello
        #expect((entries[2].helloDelayMilliseconds ?? 0) > 3000)
        #expect(entries[0..<2].allSatisfy { ($0.helloDelayMilliseconds ?? .infinity) < 3000 })
    }

    /// With a seed the draws are Python's `random.Random(seed)`: the decisions follow them exactly.
    @Test func randomInterceptsByTheSeededDraws() throws {
        let draws = try run("/usr/bin/env", ["python3", "-c", "import random; r = random.Random(7); print(' '.join('rogue' if r.random() < 0.5 else 'genuine' for _ in range(8)))"])
        let expected = draws.stdout.split(whereSeparator: \.isWhitespace).compactMap { Interceptor.Entry.Decision(rawValue: String($0)) }
        try #require(expected.count == 8 && expected.contains(.rogue) && expected.contains(.genuine))
        let path = try Path(.random(probability: 0.5, seed: 7))
        defer { path.stop() }
        #expect(try path.curl(8) == Self.bodies(expected))
        #expect(path.interceptor.waitForEntries(8).map(\.decision) == expected)
    }

    /// Clients that send nothing, garbage, half a hello or a reset are dropped with the reason, and
    /// the next client is served.
    @Test func survivesClientsThatMisbehave() throws {
        let path = try Path(.all, helloTimeout: 1)
        defer { path.stop() }
        let port = path.interceptor.port
        func send(_ fd: Int32, _ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
        let empty = try connectedSocket(port: port)
        close(empty)
        #expect(path.interceptor.waitForEntries(1).last?.reason == "empty")
        let silent = try connectedSocket(port: port)
        #expect(closedByPeer(silent, within: 10))  // dropped after --hello-timeout
        close(silent)
        #expect(path.interceptor.waitForEntries(2).last?.reason == "timeout")
        let garbage = try connectedSocket(port: port)
        send(garbage, Array("GET / HTTP/1.1\r\n\r\n".utf8))
        #expect(closedByPeer(garbage, within: 10))
        close(garbage)
        #expect(path.interceptor.waitForEntries(3).last?.reason == "garbage")
        let half = try connectedSocket(port: port)
        send(half, [22, 3, 1, 0, 200, 1, 0, 0, 196])
        close(half)
        #expect(path.interceptor.waitForEntries(4).last?.reason == "closed")
        let reset = try connectedSocket(port: port)
        send(reset, [22, 3, 1, 0, 200, 1, 0, 0, 196])
        var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
        setsockopt(reset, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        close(reset)
        let entries = path.interceptor.waitForEntries(5)
        #expect(["reset", "closed"].contains(entries.last?.reason ?? ""))  // the data may be read before the reset arrives
        #expect(entries.map(\.decision) == Array(repeating: .dropped, count: 5))
        #expect(try path.curl(1) == Self.bodies([.rogue]))
        #expect(path.interceptor.waitForEntries(6).last?.decision == .rogue)
    }

    /// Both keys answer, over TLS 1.3 and 1.2, and every handshake is whole.
    @Test(arguments: ["1.3", "1.2"])
    func loadBalancedServerAnswersWithBothKeys(version: String) throws {
        let server = try LoadBalancedUpstream(seed: 5)
        defer { server.stop() }
        let url = "https://\(Self.host):\(server.port)/"
        let versionArguments = version == "1.2" ? ["--tlsv1.2", "--tls-max", "1.2"] : ["--tlsv1.3"]
        let r = try run("/usr/bin/curl", ["-sS", "--max-time", "20", "--cacert", Paths.fixture("good-root.pem"), "--noproxy", "*",
                                          "--resolve", "\(Self.host):\(server.port):127.0.0.1"] + versionArguments + Array(repeating: url, count: 12),
                        environment: ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()])
        let bodies = r.stdout.split(separator: "\n").map(String.init)
        #expect(r.status == 0)
        #expect(bodies.count == 12)
        #expect(Set(bodies) == ["key=a", "key=b"])
    }

    /// curl resumes within one invocation; the cutter cuts exactly the resumed handshakes (here:
    /// every one after the first), and with `none` relays them.
    @Test(arguments: [ResumptionCutter.Cut.reset, .close, .none])
    func resumptionCutterCutsOnlyResumedHandshakes(cut: ResumptionCutter.Cut) throws {
        let server = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        defer { server.stop() }
        let cutter = try ResumptionCutter(server: server.port, cut: cut)
        defer { cutter.stop() }
        let url = "https://\(Self.host):\(cutter.port)/"
        let r = try run("/usr/bin/curl", ["-sS", "--max-time", "20", "--tlsv1.3", "--cacert", Self.cafile, "--noproxy", "*",
                                          "--resolve", "\(Self.host):\(cutter.port):127.0.0.1", url, url, url],
                        environment: ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()])
        let cutOff = cut != .none
        #expect(r.stdout.split(separator: "\n").count == (cutOff ? 1 : 3))
        #expect(r.status == (cutOff ? 35 : 0))  // CURLE_SSL_CONNECT_ERROR: curl does not retry without the ticket
        let deadline = Date().addingTimeInterval(10)
        while cutter.entries.count < 3 && Date() < deadline { usleep(20_000) }
        let entries = cutter.entries
        #expect(entries.map(\.offeredPSK) == [false, true, true])
        #expect(entries.map(\.acceptedPSK) == [false, true, true])
        #expect(entries.map(\.action) == ["relayed"] + Array(repeating: cutOff ? "cut" : "relayed", count: 2))
    }

    /// Go with a ClientSessionCache (go1.19 measured): a cut resumption fails that request (no retry);
    /// Go drops the ticket, so the next request is a full handshake and works, and the one after
    /// resumes its ticket and is cut again.
    @Test func goWithASessionCacheFailsTheCutRequestAndRecoversOnTheNext() throws {
        let server = try Upstream("leaf-ip", name: "genuine", tls: "1.3")
        defer { server.stop() }
        let cutter = try ResumptionCutter(server: server.port, cut: .reset)
        defer { cutter.stop() }
        let binary = try Self.goClient.get()
        let r = try run(binary, ["https://127.0.0.1:\(cutter.port)/", Self.cafile, "4", "cache"],
                        environment: ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()])
        let lines = r.stdout.split(separator: "\n").map { String($0.prefix(5)) }
        #expect(lines == ["OK 20", "ERROR", "OK 20", "ERROR"])
        #expect(r.stdout.split(separator: "\n").filter { $0.hasPrefix("OK") }.allSatisfy { $0.contains("resumed=false hello from genuine") })
        #expect(cutter.entries.map(\.action) == ["relayed", "cut", "relayed", "cut"])
    }
}
