import Foundation
import Testing
import TestSupport

/// Issue 18's attacks, end to end: a selective interceptor (scripts/interceptor.py) sits in front
/// of a pinned host's genuine server (`leaf-ec256`, TLS 1.3) and a rogue one (`rogue-leaf`, TLS 1.3,
/// trusted by the clients' CA bundle as after a CA compromise), and picks the connections it
/// intercepts by one distinguisher: connection order, ClientHello shape, ALPN, the delay before the
/// hello, or at random. Real curl and Go go through the real pinproxy. What must hold: the mirror
/// check is among whatever the interceptor picks, it is caught within a few attempts
/// (`interception_suspected`), and from then on the host:port is quarantined: no client ever gets a
/// rogue body after the catch.
@Suite(.serialized) struct InterceptionTests {
    static let host = "api.pinproxy.test"
    static let attempts = 12
    /// Longer than any test here: a quarantine that ran out would let a later attempt through for
    /// another reason than the one under test.
    static let rules = apiRule("    quarantine: 1h\n" + pinsLine(Pins.leafEC))

    /// What one client run through pinproxy came to.
    struct Attempt: CustomStringConvertible {
        let number: Int
        /// What the client printed (curl: the body; Go: `OK 200 <body>` or `ERROR …`).
        let output: String
        /// The attempt's `tunnel_closed` or `tunnel_refused` line.
        let end: [String: String]
        /// `interception_suspected` was logged before this attempt began.
        let afterCatch: Bool

        var gotRogue: Bool { output.contains("hello from rogue") }
        var refused: Bool { end["event"] == "tunnel_refused" }
        /// Caught by the mirror check in this attempt.
        var caughtByMirror: Bool { refused && end["stage"] == "mirror" && end["reason"] == "pin_mismatch" && end["chain.0.spki"] == Pins.rogueLeaf }
        /// Refused by the probe before the tunnel opened (a `502`).
        var refusedByProbe: Bool { refused && end["stage"] == nil && end["reason"] == "pin_mismatch" && end["chain.0.spki"] == Pins.rogueLeaf }
        var description: String {
            "#\(number)\(afterCatch ? " (after catch)" : ""): \(output.prefix(60).debugDescription) → \(end["event"] ?? "none") stage=\(end["stage"] ?? "-") reason=\(end["reason"] ?? "-") verify=\(end["verify"] ?? "-") chain.0=\(end["chain.0.spki"] == Pins.rogueLeaf ? "rogue" : end["chain.0.spki"] ?? "-")"
        }
    }

    /// A genuine and a rogue server for the pinned host, the interceptor in front of them, and
    /// pinproxy pinning the genuine key for the interceptor's port.
    final class Scene {
        let genuine: Upstream
        let rogue: Upstream
        let interceptor: Interceptor
        let proxy: ProxyProcess
        /// The key log pinproxy follows and the clients write, when the test sets one.
        let keyLog: String?

        init(_ strategy: Interceptor.Strategy, invert: Bool = false, keyLog: Bool = false, upstreamExtra: [String] = [],
             rogue rogueServer: (leaf: String, name: String, tls: String) = ("rogue-leaf", "rogue", "1.3")) throws {
            genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3", extra: upstreamExtra)
            rogue = try Upstream(rogueServer.leaf, name: rogueServer.name, tls: rogueServer.tls, extra: upstreamExtra)
            interceptor = try Interceptor(genuine: genuine.port, rogue: rogue.port, strategy: strategy, invert: invert)
            self.keyLog = keyLog ? try memoryDirectory() + "/keylog" : nil
            let keyLogSetting = self.keyLog.map { "keylog: { path: \($0), wait: 2s }" } ?? ""
            proxy = try ProxyProcess(config: policy(ports: [interceptor.port], rules: InterceptionTests.rules, proxy: keyLogSetting))
        }

        var port: UInt16 { interceptor.port }

        /// curl through pinproxy (no key log unless the scene has one); its body.
        func curl(_ extra: [String] = []) throws -> String {
            let environment = keyLog.map { ["SSLKEYLOGFILE": $0] } ?? [:]
            return try TestSupport.curl(proxy: proxy.port, host: InterceptionTests.host, port: port, extra: extra, environment: environment).body
        }

        /// Go net/http (scripts/goget.go, HTTPS_PROXY): `OK <status> <body>` or `ERROR <error>`.
        func go() throws -> String {
            let binary = try WorksWithTests.goClient.get()
            let home = try temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: home) }
            let r = try run(binary, ["https://\(InterceptionTests.host):\(port)/", Paths.fixture("both-roots.pem")],
                            environment: ["PATH": "/usr/bin:/bin", "HOME": home, "HTTPS_PROXY": "http://127.0.0.1:\(proxy.port)"], timeout: 40)
            return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        }

        /// Every tunnel's last line, in the order written.
        var ends: [[String: String]] { proxy.lines.filter { $0["event"] == "tunnel_closed" || $0["event"] == "tunnel_refused" } }

        /// Runs `client` `count` times, one after another, each after the previous one's end line.
        /// - Parameter pause: between attempts, longer than the interceptor's 100 ms group window, so
        ///   that each attempt's connections (probe, tunnel, mirror) form one group of their own.
        func attack(_ count: Int = InterceptionTests.attempts, pause: Bool = false, _ client: () throws -> String) throws -> [Attempt] {
            var attempts: [Attempt] = []
            for number in 1...count {
                let afterCatch = !proxy.events("interception_suspected").isEmpty
                let confirmedBefore = proxy.events("confirming_look").count
                let output = try client()
                let deadline = Date().addingTimeInterval(20)
                var seen = ends
                while seen.count < number && Date() < deadline {
                    usleep(20_000)
                    seen = ends
                }
                let end = seen.count == number ? seen[number - 1] : [:]
                // The catch's line (or the confirming look's that finds none) may trail its
                // refusal's: the next attempt must know it came after.
                if end["stage"] == "mirror" && end["event"] == "tunnel_refused" {
                    let decided = Date().addingTimeInterval(5)
                    while proxy.events("interception_suspected").isEmpty && proxy.events("confirming_look").count == confirmedBefore && Date() < decided {
                        usleep(20_000)
                    }
                }
                attempts.append(Attempt(number: number, output: output, end: end, afterCatch: afterCatch))
                if pause { usleep(300_000) }
            }
            return attempts
        }

        func stop() {
            interceptor.stop()
            genuine.stop()
            rogue.stop()
        }

        deinit {
            if let keyLog { try? FileManager.default.removeItem(atPath: (keyLog as NSString).deletingLastPathComponent) }
        }
    }

    // MARK: What the attempts must show

    /// The catch and what follows it, whatever the interceptor chose: exactly one
    /// `interception_suspected` (stage mirror or stream, the rogue chain beside the probe's good one,
    /// a quarantine end); it came from an attempt refused by the mirror; no attempt after it got a
    /// rogue body, and every one after it was refused (`quarantined`, or caught again).
    static func expectCaughtAndQuarantined(_ scene: Scene, _ attempts: [Attempt], sourceLocation: SourceLocation = #_sourceLocation) {
        let caught = scene.proxy.events("interception_suspected")
        #expect(caught.count == 1, "\(caught)\n\(attempts)\n\(scene.proxy.events("confirming_look"))", sourceLocation: sourceLocation)
        if let line = caught.first {
            #expect(["mirror", "stream"].contains(line["stage"] ?? "") && line["chain.0.spki"] == Pins.rogueLeaf
                    && line["probe_chain.0.spki"] == Pins.leafEC && line["quarantined_until"] != nil, "\(line)", sourceLocation: sourceLocation)
            #expect(line["host"] == host && line["port"] == String(scene.port), "\(line)", sourceLocation: sourceLocation)
        }
        #expect(attempts.contains { !$0.afterCatch && $0.caughtByMirror }, "\(attempts)", sourceLocation: sourceLocation)
        for attempt in attempts where attempt.afterCatch {
            #expect(!attempt.gotRogue && attempt.refused && ["quarantined", "pin_mismatch"].contains(attempt.end["reason"] ?? ""),
                    "after the catch: \(attempt)\n\(attempts)", sourceLocation: sourceLocation)
        }
    }

    /// An interceptor that takes both the tunnel's connection and the mirror (they look the same to
    /// it) is caught by the first attempt, and no attempt gets a rogue body.
    static func expectCaughtAtOnce(_ scene: Scene, _ attempts: [Attempt], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(attempts.first?.caughtByMirror == true, "\(attempts)", sourceLocation: sourceLocation)
        #expect(attempts.filter(\.gotRogue).isEmpty, "\(attempts)", sourceLocation: sourceLocation)
        expectCaughtAndQuarantined(scene, attempts, sourceLocation: sourceLocation)
    }

    /// An interceptor that takes one of the two look-alike connections at random (order:2)
    /// wins the client's with probability 1/2 per attempt until it takes the mirror: the number of
    /// rogue bodies before the catch is geometric, P(≥ k) = 2^-k. `≤ 2 of 12` would fail one run in 8
    /// with no bug; `≤ 9` fails one in 1024, and the catch itself is missed in one run in 4096.
    static func expectCaughtWithinAFewGuesses(_ scene: Scene, _ attempts: [Attempt], sourceLocation: SourceLocation = #_sourceLocation) {
        let rogue = attempts.filter(\.gotRogue)
        #expect(rogue.count <= 9, "\(attempts)", sourceLocation: sourceLocation)
        #expect(rogue.allSatisfy { !$0.afterCatch }, "\(attempts)", sourceLocation: sourceLocation)
        for attempt in attempts where !attempt.afterCatch {
            // Before the catch: the client got the genuine server, or the rogue one while the mirror
            // saw the genuine one; or the probe or the mirror was taken and the tunnel refused.
            #expect(attempt.gotRogue ? attempt.end["verify"] == "probe+mirror"
                        : (attempt.output.contains("hello from genuine") || attempt.caughtByMirror || attempt.refusedByProbe),
                    "\(attempt)", sourceLocation: sourceLocation)
        }
        expectCaughtAndQuarantined(scene, attempts, sourceLocation: sourceLocation)
    }

    /// The probe is the one connection intercepted: every CONNECT is refused up front (502, the
    /// rogue chain), no refusal is cached, and there is no tunnel to quarantine for.
    static func expectRefusedByTheProbeEveryTime(_ scene: Scene, _ attempts: [Attempt], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(attempts.allSatisfy { $0.refusedByProbe && $0.output.isEmpty }, "\(attempts)", sourceLocation: sourceLocation)
        #expect(scene.proxy.events("interception_suspected").isEmpty, sourceLocation: sourceLocation)
    }

    // MARK: 1. curl, no key log, each distinguisher

    /// The probe comes first, and alone: the tunnel's connection and its mirror are made only after
    /// it passed. An interceptor that takes the first connection of each burst takes the probe; one
    /// that takes the last waits a window for a newcomer, sees none, and takes the probe too.
    @Test(arguments: [Interceptor.Strategy.OrderPick.first, .last])
    func orderFirstOrLastTakesTheProbeAndIsRefusedEveryTime(pick: Interceptor.Strategy.OrderPick) throws {
        let scene = try Scene(.order(pick))
        defer { scene.stop() }
        let attempts = try scene.attack(pause: true) { try scene.curl() }
        Self.expectRefusedByTheProbeEveryTime(scene, attempts)
    }

    /// The tunnel's connection and the mirror's are made in random order: the second of a burst is
    /// the client's half the time.
    @Test func orderSecondIsCaughtWithinAFewGuesses() throws {
        let scene = try Scene(.order(.nth(2)))
        defer { scene.stop() }
        let attempts = try scene.attack(pause: true) { try scene.curl() }
        Self.expectCaughtWithinAFewGuesses(scene, attempts)
    }

    /// The shape of curl's ClientHello, learned from a capture of curl going straight through an
    /// interceptor that takes nothing.
    static func curlShapeCapture() throws -> Interceptor {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        defer { genuine.stop() }
        let capture = try Interceptor(genuine: genuine.port, rogue: genuine.port, strategy: .none)
        let r = try run("/usr/bin/curl", ["-sS", "--max-time", "20", "--cacert", Paths.fixture("both-roots.pem"), "--noproxy", "*",
                                          "--resolve", "\(host):\(capture.port):127.0.0.1", "https://\(host):\(capture.port)/"],
                        environment: ["PATH": "/usr/bin:/bin", "HOME": NSTemporaryDirectory()])
        try #require(r.stdout == "hello from genuine\n" && capture.waitForEntries(1).first?.shape != nil, "\(r)")
        capture.stop()
        return capture
    }

    /// The shape of pinproxy's probe: the first connection a pinned CONNECT makes.
    static func probeShapeCapture() throws -> Interceptor {
        let genuine = try Upstream("leaf-ec256", name: "genuine", tls: "1.3")
        defer { genuine.stop() }
        let capture = try Interceptor(genuine: genuine.port, rogue: genuine.port, strategy: .none)
        let proxy = try ProxyProcess(config: policy(ports: [capture.port], rules: rules))
        #expect(try curl(proxy: proxy.port, host: host, port: capture.port).body == "hello from genuine\n")
        let entries = capture.waitForEntries(3)
        try #require(entries.count == 3, "\(entries)")
        // The probe, then the tunnel's connection and its mirror (curl's shape, both).
        let probeShape = try #require(entries[0].shape)
        try #require(probeShape != entries[1].shape && entries[1].shape == entries[2].shape, "\(entries)")
        capture.stop()
        // Only the probe's kept: --learn reads every shape in the file.
        try (probeShape + "\n").write(toFile: capture.logPath, atomically: true, encoding: .utf8)
        return capture
    }

    /// The mirror is curl's hello byte for byte but for the fresh fields: same shape, so the
    /// interceptor takes it too (and the confirming look): refused by the first attempt and every
    /// one after, never a rogue body; an interceptor that answers a hello the same way every time is
    /// no incident (see alpnInvertedIsRefusedEveryTime).
    @Test func fingerprintLearnedFromCurlIsRefusedEveryTime() throws {
        let capture = try Self.curlShapeCapture()
        let scene = try Scene(.fingerprint(learnedFrom: capture.logPath))
        defer { scene.stop() }
        let attempts = try scene.attack { try scene.curl() }
        Self.expectRefusedEveryTimeByTheMirror(scene, attempts)
    }

    /// Everything that does not look like the probe: the client's connection and the mirror alike.
    @Test func fingerprintInvertedOnTheProbesShapeIsRefusedEveryTime() throws {
        let capture = try Self.probeShapeCapture()
        let scene = try Scene(.fingerprint(learnedFrom: capture.logPath), invert: true)
        defer { scene.stop() }
        let attempts = try scene.attack { try scene.curl() }
        Self.expectRefusedEveryTimeByTheMirror(scene, attempts)
    }

    /// The probe offers ALPN as curl does: an interceptor that takes hellos with ALPN takes the
    /// probe and is refused up front every time.
    @Test func alpnTakesTheProbeToo() throws {
        let scene = try Scene(.alpn)
        defer { scene.stop() }
        let attempts = try scene.attack { try scene.curl() }
        Self.expectRefusedByTheProbeEveryTime(scene, attempts)
    }

    /// Hellos without ALPN (a client that sends none, as Go's net/http with its own TLS config):
    /// the mirror copies the absence, and is taken with the client's connection — and so is the
    /// confirming look of the same hello. An interceptor that takes every hello of a shape answers
    /// that hello the same way, as a server that selects its certificate by the hello does: every
    /// such tunnel is refused (it never wins one), logged with the rogue chain, and no quarantine.
    @Test func alpnInvertedIsRefusedEveryTime() throws {
        let scene = try Scene(.alpn, invert: true)
        defer { scene.stop() }
        let attempts = try scene.attack { try scene.curl(["--no-alpn"]) }
        Self.expectRefusedEveryTimeByTheMirror(scene, attempts)
    }

    /// An interceptor that takes every hello of one shape, the mirror's and the confirming look's
    /// too: every attempt refused at the mirror with the rogue chain, no rogue body, a
    /// `confirming_look outcome=same_chain` line showing the rogue chain, no incident.
    static func expectRefusedEveryTimeByTheMirror(_ scene: Scene, _ attempts: [Attempt], sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(attempts.allSatisfy { $0.caughtByMirror }, "\(attempts)", sourceLocation: sourceLocation)
        #expect(scene.proxy.events("interception_suspected").isEmpty, sourceLocation: sourceLocation)
        let confirmed = scene.proxy.waitFor("confirming_look")
        #expect(confirmed?["outcome"] == "same_chain" && confirmed?["chain.0.spki"] == Pins.rogueLeaf && confirmed?["stage"] == "mirror"
                && confirmed?["reason"] == "pin_mismatch" && confirmed?["level"] == "warning", "\(String(describing: confirmed))", sourceLocation: sourceLocation)
    }

    /// The probe's hello comes at once after its connect; the client's only after the `200` and
    /// curl's own work; the mirror's goes with the client's, from connections made at the same
    /// moment, so both have about the client's delay, and the interceptor takes both: refused, and
    /// the confirming look (its hello sent at once, like the probe's) reaches the genuine server:
    /// caught. On a loaded machine a probe may come late (then it is taken: a 502), one of a pair
    /// early (then the interceptor may win that one tunnel before it takes a mirror), or the
    /// confirming look late too: then the interceptor takes every copy of the client's hello, and
    /// is refused every time without a catch (as alpnInvertedIsRefusedEveryTime), never winning a
    /// tunnel after a refusal it could not explain.
    @Test func delayIsCaughtWithinAFewGuesses() throws {
        let scene = try Scene(.delay(milliseconds: Self.delayThreshold))
        defer { scene.stop() }
        let attempts = try scene.attack { try scene.curl() }
        if scene.proxy.events("interception_suspected").isEmpty {
            let confirmed = scene.proxy.events("confirming_look")
            #expect(!confirmed.isEmpty && confirmed.allSatisfy { $0["outcome"] == "same_chain" && $0["chain.0.spki"] == Pins.rogueLeaf },
                    "\(confirmed)\n\(attempts)")
            #expect(attempts.filter(\.gotRogue).count <= 9 && attempts.contains { $0.caughtByMirror }, "\(attempts)")
        } else {
            Self.expectCaughtWithinAFewGuesses(scene, attempts)
        }
    }

    /// Between the probe's delay and the client's: measured here (2 cores shared with four builds)
    /// 0.19–0.87 ms for the probe, 1.2–12 ms for curl's hello and its mirror.
    static let delayThreshold = 1.0

    /// The interceptor's draws with seed 22 (Python's random.Random) are genuine, rogue, rogue: the
    /// probe passes, then both the tunnel's connection and the mirror are taken, whichever order
    /// they come in: caught by the first attempt.
    @Test func randomWithASeedIsCaughtAtOnce() throws {
        try Self.requireDraws(seed: 22, ["genuine", "rogue", "rogue"])
        let scene = try Scene(.random(probability: 0.5, seed: 22))
        defer { scene.stop() }
        let attempts = try scene.attack { try scene.curl() }
        Self.expectCaughtAtOnce(scene, attempts)
    }

    static func requireDraws(seed: Int, _ expected: [String]) throws {
        let draws = try run("/usr/bin/env", ["python3", "-c", "import random; r = random.Random(\(seed)); print(' '.join('rogue' if r.random() < 0.5 else 'genuine' for _ in range(\(expected.count))))"])
        try #require(draws.stdout.split(whereSeparator: \.isWhitespace).map(String.init) == expected, "\(draws)")
    }

    // MARK: 2. The same interceptors with the client's key log

    static let keyLogStrategies: [(name: String, strategy: Interceptor.Strategy, invert: Bool, curl: [String])] = [
        ("order:first", .order(.first), false, []), ("order:2", .order(.nth(2)), false, []), ("order:last", .order(.last), false, []),
        ("alpn", .alpn, false, []), ("alpn inverted", .alpn, true, ["--no-alpn"]), ("delay", .delay(milliseconds: delayThreshold), false, []),
        ("random:0.5", .random(probability: 0.5, seed: 22), false, []),
    ]

    /// With the key log the client's own chain decides: no attempt gets a rogue body, an attempt the
    /// interceptor took is refused in the stream (or by the probe), and a quarantine never stops a
    /// tunnel the key log verified.
    @Test(arguments: 0..<keyLogStrategies.count)
    func withTheKeyLogNoAttemptGetsTheRogueServer(index: Int) throws {
        let (name, strategy, invert, extra) = Self.keyLogStrategies[index]
        let scene = try Scene(strategy, invert: invert, keyLog: true)
        defer { scene.stop() }
        let attempts = try scene.attack(pause: true) { try scene.curl(extra) }
        Self.expectNoRogueWithTheKeyLog(attempts, name)
    }

    @Test(arguments: [false, true])
    func withTheKeyLogTheFingerprintInterceptorsGetNothing(inverted: Bool) throws {
        let capture = inverted ? try Self.probeShapeCapture() : try Self.curlShapeCapture()
        let scene = try Scene(.fingerprint(learnedFrom: capture.logPath), invert: inverted, keyLog: true)
        defer { scene.stop() }
        let attempts = try scene.attack { try scene.curl() }
        Self.expectNoRogueWithTheKeyLog(attempts, inverted ? "fingerprint inverted on the probe" : "fingerprint of curl")
        // Both the client's connection and the mirror were taken: every tunnel refused in the stream.
        #expect(attempts.allSatisfy { $0.end["stage"] == "stream" && $0.end["reason"] == "pin_mismatch" }, "\(attempts)")
    }

    static func expectNoRogueWithTheKeyLog(_ attempts: [Attempt], _ name: String, sourceLocation: SourceLocation = #_sourceLocation) {
        for attempt in attempts {
            let genuine = attempt.output == "hello from genuine\n" && attempt.end["verify"] == "probe+keylog"
            let refused = attempt.refused && attempt.end["reason"] == "pin_mismatch" && attempt.end["chain.0.spki"] == Pins.rogueLeaf
                && [nil, "stream"].contains(attempt.end["stage"])
            #expect(!attempt.gotRogue && (genuine || refused), "\(name): \(attempt)\n\(attempts)", sourceLocation: sourceLocation)
        }
    }

    // MARK: 3. Go net/http, no key log

    @Test func goThroughOrderSecondIsCaughtWithinAFewGuesses() throws {
        let scene = try Scene(.order(.nth(2)))
        defer { scene.stop() }
        let attempts = try scene.attack(pause: true) { try scene.go() }
        Self.expectCaughtWithinAFewGuesses(scene, attempts)
        #expect(attempts.allSatisfy { $0.output.hasPrefix("OK 200 hello from") || $0.output.hasPrefix("ERROR") }, "\(attempts)")
    }

    @Test func goThroughRandomIsCaughtAtOnce() throws {
        try Self.requireDraws(seed: 22, ["genuine", "rogue", "rogue"])
        let scene = try Scene(.random(probability: 0.5, seed: 22))
        defer { scene.stop() }
        let attempts = try scene.attack { try scene.go() }
        Self.expectCaughtAtOnce(scene, attempts)
        #expect(attempts.allSatisfy { $0.output.hasPrefix("ERROR") }, "\(attempts)")
    }

    // 4 to 6, genuine servers: InterceptionTests+GenuineServers.swift; 7, resumption:
    // InterceptionTests+Resumption.swift.
}
