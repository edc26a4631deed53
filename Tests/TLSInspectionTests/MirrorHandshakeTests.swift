import Foundation
import Testing
import TestSupport
@testable import TLSInspection

// The mirror's handshake with real servers: `openssl s_server` on 127.0.0.1 (OpenSSLServer, also
// used by SCTTests and MLKEMMirrorTests), runMirror, and what each server's answer comes to. The
// captured ClientHellos (CapturedHello) are in MirrorTests.swift.

/// `openssl s_server` on 127.0.0.1 with a fixture's chain, killed by `stop()` or deinit.
final class OpenSSLServer: @unchecked Sendable {
    let process = Process()
    let port: UInt16
    private let input = Pipe()

    /// Serves `<leaf>.pem` with good-intermediate.pem (a chain of two); `intermediate: false`: the leaf alone.
    init(_ leaf: String = "leaf-ec256", _ arguments: [String] = [], web: Bool = true, intermediate: Bool = true) throws {
        port = try freePort()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl", "s_server", "-accept", "127.0.0.1:\(port)", "-quiet"] + (web ? ["-www"] : [])
            + ["-cert", Paths.fixture("\(leaf).pem"), "-key", Paths.fixture("\(leaf).key.pem")]
            + (intermediate ? ["-cert_chain", Paths.fixture("good-intermediate.pem")] : []) + arguments
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try ChildProcesses.launch(process)
        // Listening within 15 s (a loaded machine), tried every 50 ms.
        for _ in 0..<300 {
            if let fd = try? connectedSocket(port: port) {
                close(fd)
                return
            }
            usleep(50_000)
        }
        stop()
        throw HelperError(message: "openssl s_server \(arguments) did not listen on \(port)")
    }

    /// SIGKILL at once: it has nothing to finish.
    func stop() { ChildProcesses.end(process, grace: 0) }

    deinit { stop() }
}

/// A mirror handshake run against a real server: the verdict and every byte the server sent.
struct MirrorRun {
    var verdict: MirrorVerdict
    var serverBytes: [UInt8]
    var secondHello: [UInt8]?
}

/// Connects to 127.0.0.1:port, writes the mirror (and `after`, e.g. mirrored early data), and feeds
/// what the server answers until a final verdict; a HelloRetryRequest is answered with
/// `second`'s mirror. At most 20 s and 1 MiB.
func runMirror(port: UInt16, _ hello: MirrorHello, after: [UInt8] = [], second: CapturedHello? = nil,
               secondRecords: [UInt8] = []) throws -> MirrorRun {
    let fd = try connectedSocket(port: port)
    defer { close(fd) }
    func send(_ bytes: [UInt8]) { _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
    send(hello.bytes + after)
    var handshake = MirrorHandshake(hello: hello)
    var run = MirrorRun(verdict: .pending, serverBytes: [])
    var buffer = [UInt8](repeating: 0, count: 16384)
    let deadline = Date().addingTimeInterval(20)
    while Date() < deadline && run.serverBytes.count < 1 << 20 {
        var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&ready, 1, 200) > 0 else { continue }
        let n = recv(fd, &buffer, buffer.count, 0)
        guard n > 0 else { break }
        run.serverBytes += buffer[0..<n]
        run.verdict = handshake.feed(buffer[0..<n])
        switch run.verdict {
        case .pending: continue
        case .helloRetry:
            // With no client's second hello, the mirror answers the retry as a client would.
            let bytes = try second.map { try handshake.secondHello(mirroring: $0.hello, records: secondRecords) }
                ?? handshake.secondHelloAnsweringRetry()
            run.secondHello = bytes
            send(bytes)
        default:
            return run
        }
    }
    return run
}

@Suite(.serialized) struct MirrorHandshakeTests {
    static let ecChain: [[UInt8]] = (try? chainDER("leaf-ec256.chain.pem")) ?? []

    func expectVerified(_ verdict: MirrorVerdict, chain: [[UInt8]] = ecChain, scheme: UInt16 = 0x0403,
                        sourceLocation: SourceLocation = #_sourceLocation) {
        guard case .verified(let flight) = verdict else {
            Issue.record("not verified: \(verdict)", sourceLocation: sourceLocation)
            return
        }
        // Compared as a Bool: a failure would print every byte of both chains.
        let sameChain = flight.chain == chain
        #expect(sameChain, "chain of \(flight.chain.count) certificates", sourceLocation: sourceLocation)
        #expect(flight.signatureScheme == scheme, sourceLocation: sourceLocation)
    }

    /// X25519 (curl, Go, Python, Node), P-256, P-384, P-521 and X448: the server takes the mirror's
    /// share, and the flight verifies under the secret pinproxy derived.
    @Test func everyComputableGroupVerifies() throws {
        let server = try OpenSSLServer()
        defer { server.stop() }
        for name in ["curl", "go", "python", "node", "openssl-p-256", "openssl-p-384", "openssl-p-521", "openssl-x448"] {
            let mirror = try CapturedHello(name).mirror()
            let run = try runMirror(port: server.port, mirror)
            expectVerified(run.verdict)
            // The same bytes fed one at a time give the same verdict.
            var dripped = MirrorHandshake(hello: mirror)
            var last = MirrorVerdict.pending
            for byte in run.serverBytes where last == .pending { last = dripped.feed([byte]) }
            #expect(last == run.verdict, "\(name) dripped")
        }
    }

    @Test func anRSALeafVerifies() throws {
        let server = try OpenSSLServer("leaf-rsa2048")
        defer { server.stop() }
        let run = try runMirror(port: server.port, try CapturedHello("curl").mirror())
        expectVerified(run.verdict, chain: try chainDER("leaf-rsa2048.chain.pem"), scheme: 0x0804)
    }

    /// The server wants P-384, which curl's hello has no share for: HelloRetryRequest on the
    /// mirror, answered with the mirror of curl's own second hello (TLS13Vectors.curlHRRChaCha).
    @Test func helloRetryRequestIsAnsweredWithTheMirrorOfTheSecondHello() throws {
        let server = try OpenSSLServer("leaf-ec256", ["-groups", "secp384r1", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"])
        defer { server.stop() }
        let bytes = decode(TLS13Vectors.curlHRRChaCha.client)
        var reader = ClientFlightReader()
        let first = try #require(try reader.feed(bytes))
        let firstEnd = reader.bytesConsumed
        let second = try #require(try reader.readSecondHello(bytes[firstEnd...]))
        let secondRecords = Array(bytes[firstEnd..<reader.bytesConsumed])
        let mirror = try MirrorHello(of: first, records: bytes[..<firstEnd])
        let secondCapture = CapturedHello(name: "curl CH2", hello: second, records: secondRecords, rest: [])
        let run = try runMirror(port: server.port, mirror, second: secondCapture, secondRecords: secondRecords)
        expectVerified(run.verdict)
        // The mirror's second hello: the mirror's first random and session id, a P-384 share of its
        // own, the client's record split (its ChangeCipherSpec included).
        let sent = try #require(run.secondHello)
        #expect(recordHeaders(sent) == recordHeaders(secondRecords))
        var mirrorReader = ClientFlightReader()
        let restated = try #require(try mirrorReader.feed(mirror.bytes))
        let secondMirror = try #require(try mirrorReader.readSecondHello(sent))
        #expect(secondMirror.random == restated.random && secondMirror.sessionID == restated.sessionID)
        #expect(secondMirror.random != second.random)
        var restored = secondMirror.raw
        for range in freshRanges(second.raw) {
            #expect(secondMirror.raw[range] != second.raw[range])
            restored.replaceSubrange(range, with: second.raw[range])
        }
        #expect(restored == second.raw)
    }

    /// An interceptor with a certificate of its own for the name, answering the mirror as it would
    /// the client: the mirror verifies, and shows the caller the rogue chain to judge.
    @Test func aRogueServerShowsItsOwnChain() throws {
        let server = try OpenSSLServer("rogue-leaf", intermediate: false)
        defer { server.stop() }
        let run = try runMirror(port: server.port, try CapturedHello("go").mirror())
        expectVerified(run.verdict, chain: try chainDER("rogue-leaf.chain.pem"))
    }

    @Test func aSecondHelloWithoutAHelloRetryIsRefused() throws {
        let client = try CapturedHello("curl")
        var handshake = MirrorHandshake(hello: try client.mirror())
        #expect(throws: MirrorError.notAfterHelloRetry) { try handshake.secondHello(mirroring: client.hello, records: client.records) }
    }

    @Test func aTLS12ServerShowsItsChainInClear() throws {
        let server = try OpenSSLServer("leaf-ec256", ["-tls1_2"])
        defer { server.stop() }
        let run = try runMirror(port: server.port, try CapturedHello("curl").mirror())
        let expected = MirrorVerdict.tls12(chain: Self.ecChain)
        #expect(run.verdict == expected, "\(run.verdict == .pending ? "pending" : "another verdict")")
    }

    /// A hello offering a real resumption's ticket: the mirror's identity and binder are random,
    /// so the server makes a full handshake, verified.
    @Test func aPSKOfferBecomesAFullHandshake() throws {
        let server = try OpenSSLServer()
        defer { server.stop() }
        let client = try CapturedHello("openssl-psk")
        #expect(client.hello.offersPreSharedKey)
        let run = try runMirror(port: server.port, try client.mirror())
        expectVerified(run.verdict)
    }

    /// A hello with early_data and its early-data records, mirrored as random bytes: the server
    /// resumes nothing, skips them and makes a full handshake.
    @Test func earlyDataIsMirroredAndSkipped() throws {
        let server = try OpenSSLServer("leaf-ec256", ["-early_data"], web: false)
        defer { server.stop() }
        let client = try CapturedHello("openssl-early-data")
        var early = MirrorEarlyData()
        let run = try runMirror(port: server.port, try client.mirror(), after: early.mirror(client.rest))
        expectVerified(run.verdict)
    }

    /// The server chose FFDHE 2048, whose share pinproxy sent as random bytes.
    @Test func anUncomputableGroupIsUnverifiable() throws {
        let server = try OpenSSLServer("leaf-ec256", ["-groups", "ffdhe2048"])
        defer { server.stop() }
        let run = try runMirror(port: server.port, try CapturedHello("openssl-ffdhe2048").mirror())
        #expect(run.verdict == .unverifiable(.group(0x0100)))
    }

    /// A recorded flight: replayed to the same mirror it verifies; with one byte changed, or
    /// replayed to another mirror of the same hello (other keys: what an interceptor replaying a
    /// genuine server's answer offers), it fails.
    @Test func aTamperedOrReplayedFlightFails() throws {
        let server = try OpenSSLServer()
        defer { server.stop() }
        let client = try CapturedHello("curl")
        let mirror = try client.mirror()
        let run = try runMirror(port: server.port, mirror)
        expectVerified(run.verdict)

        var replay = MirrorHandshake(hello: mirror)
        #expect(replay.feed(run.serverBytes) == run.verdict)

        var tampered = run.serverBytes
        tampered[tampered.count - 1] ^= 1
        var flipped = MirrorHandshake(hello: mirror)
        #expect(flipped.feed(tampered) == .failed(.flight(.undecryptable)))

        var other = MirrorHandshake(hello: try client.mirror())
        #expect(other.feed(run.serverBytes) == .failed(.flight(.undecryptable)))

        // A server share that is no key of its group.
        var badShare = run.serverBytes
        let shareAt = try #require(indexOfX25519Share(badShare))
        for index in shareAt..<shareAt + 32 { badShare[index] = 0 }
        var zero = MirrorHandshake(hello: mirror)
        #expect(zero.feed(badShare) == .failed(.keyShare("the server's 0x001d share is not a valid key")))

        // A final verdict stays.
        #expect(flipped.feed([0]) == .failed(.flight(.undecryptable)))

        // Memory is bounded: a flight over the limit fails as soon as it is over.
        let serverHelloEnd = 5 + (Int(run.serverBytes[3]) << 8 | Int(run.serverBytes[4]))
        var bounded = MirrorHandshake(hello: mirror, limit: serverHelloEnd + 200)
        #expect(bounded.feed(run.serverBytes) == .failed(.flight(.tooLarge)))
        var boundedPlaintext = MirrorHandshake(hello: mirror, limit: 100)
        #expect(boundedPlaintext.feed(run.serverBytes) == .failed(.plaintext(.tooLarge(limit: 100))))
    }
}

/// Where the X25519 key_exchange of the ServerHello at the start of `bytes` begins.
func indexOfX25519Share(_ bytes: [UInt8]) -> Int? {
    let marker: [UInt8] = [0x00, 0x33, 0x00, 0x24, 0x00, 0x1D, 0x00, 0x20]
    guard bytes.count > marker.count else { return nil }
    for index in 0..<(bytes.count - marker.count) where Array(bytes[index..<index + marker.count]) == marker {
        return index + marker.count
    }
    return nil
}
