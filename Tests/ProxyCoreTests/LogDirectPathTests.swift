import Foundation
import Logging
import Testing
@_spi(ChainValidation) import PinPolicy
@_spi(Benchmarks) @testable import ProxyCore

/// The decision and close lines skip swift-log's metadata round trip and render straight into bytes
/// (issue 8, item 4). The log format is an interface: these check that the bytes did not change.
@Suite struct LogDirectPathTests {
    let time = Date(timeIntervalSince1970: 1_795_975_200.123)

    /// Fields in a made-up order, a key set twice, unlisted keys, network text with quotes, control
    /// bytes, DEL and non-ASCII, an empty string, negative and zero numbers, objects out of order.
    var awkward: LogRecord {
        LogRecord(.warning, "tunnel_refused", [
            ("chain", .objects([[("anchor", .bool(false)), ("subject", .string("CN=ä \"x\"")), ("position", .int(0)), ("zz", .string("z"))],
                                [("position", .int(1)), ("spki", .string("spki-sha256:AA=="))]])),
            ("zeta", .string("")), ("alpha", .int(-3)), ("conn", .int(0)), ("host", .string("evil\"host\n=x\t\u{7f}\u{1}")),
            ("reason", .string("first")), ("sni", .string("ünï 😀")), ("expected", .objects([[("label", .string("l")), ("pin", .string("p"))]])),
            ("reason", .string("second")), ("empty", .objects([])), ("detail", .string("a\\b=c d")),
        ])
    }

    /// What the line was before: the record through swift-log's metadata and back, rendered.
    func viaSwiftLog(_ record: LogRecord) -> LogRecord {
        LogRecord(level: record.level, event: record.event, metadata: record.metadata)
    }

    @Test func theCanonicalOrderIsTheRoundTripsOrder() {
        let direct = LogRecord(awkward.level, awkward.event, LogKeys.canonical(awkward.fields))
        let before = viaSwiftLog(awkward)
        #expect(direct.text(at: time) == before.text(at: time))
        #expect(direct.json(at: time) == before.json(at: time))
        #expect(direct["reason"].map { $0.plain } == "second")
    }

    @Test func aPinnedTunnelsLinesAreTheBytesTheyWere() throws {
        let leaf = CertificateFacts(spki: Pin(kind: .spki, digest: Array(repeating: 1, count: 32))!, certificate: Pin(kind: .cert, digest: Array(repeating: 2, count: 32))!,
                                    subject: "CN=api.test", issuer: "CN=root", notBefore: Date(timeIntervalSince1970: 0),
                                    notAfter: Date(timeIntervalSince1970: 2_000_000_000), subjectAltNames: ["api.test"], key: "EC P-256", isCA: false)
        let root = CertificateFacts(spki: Pin(kind: .spki, digest: Array(repeating: 3, count: 32))!, certificate: Pin(kind: .cert, digest: Array(repeating: 4, count: 32))!,
                                    subject: "CN=root", issuer: "CN=root", notBefore: Date(timeIntervalSince1970: 0),
                                    notAfter: Date(timeIntervalSince1970: 2_100_000_000), subjectAltNames: [], key: "EC P-256", isCA: true)
        let policy = try PolicyLoader.load(yaml: "version: 1\ndefaults: { unpinned: allow }\nrules:\n  - host: api.test\n    pins: [\"\(leaf.spki)\", \"\(root.spki)\"]\n", source: "/p.yaml")
        let tunnel = try #require(LogCost.tunnel(policy: policy, host: "api.test", port: 443, address: IPAddress("127.0.0.1")!,
                                                 chain: .verified(VerifiedChain(leafFirst: [leaf, root]))))
        let record = DecisionRecord(conn: 0, client: SocketAddress(ip: IPAddress("127.0.0.1")!, port: 50000),
                                    .opened(tunnel.asked, tunnel.passage, address: tunnel.address))
        let decision = SessionLog.decision(record, tunnel.passage.decision)
        let closed = SessionLog.end(.closed(.relay(.finished), ClosedTunnel(record: record, bytesUp: 1, bytesDown: 2,
                                                                           duration: .milliseconds(3), stream: nil, relay: .copy)))
        for record in [decision, closed] {
            let direct = LogRecord(record.level, record.event, LogKeys.canonical(record.fields))
            #expect(direct.text(at: time) == viaSwiftLog(record).text(at: time))
            #expect(direct.json(at: time) == viaSwiftLog(record).json(at: time))
        }
        #expect(viaSwiftLog(decision).text(at: time).hasPrefix("ts=2026-11-29T18:00:00.123Z level=info event=tunnel_allowed host=api.test port=443 verdict=allowed conn=0 client=127.0.0.1:50000 address=127.0.0.1 sni=api.test tls=TLSv1.3 key_proof=handshake rule=api.test rule_line=4 mode=enforce"))
    }

    /// `Logger.emit` with pinproxy's handler writes exactly the line the swift-log path wrote, and
    /// nothing below the level.
    @Test func theLoggerWritesTheRoundTripsLine() throws {
        var fds: [Int32] = [0, 0]
        #expect(pipe(&fds) == 0)
        defer { close(fds[0]) }
        let sink = LogSink(format: .json, fd: fds[1], minimumLevel: .warning)
        let logger = Logger(label: "test") { _ in LineLogHandler(sink: sink) }
        logger.emit(LogRecord(.info, "tunnel_closed", [("conn", .int(1))]))
        logger.emit(awkward)
        #expect(sink.flush(timeout: 10))
        close(fds[1])
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        for _ in 0..<100 {
            let n = read(fds[0], &chunk, chunk.count)
            if n <= 0 { break }
            bytes += chunk[0..<n]
        }
        let line = String(decoding: bytes, as: UTF8.self)
        let expected = viaSwiftLog(awkward).json(at: time)
        // Everything after the timestamp, which is the moment of writing.
        #expect(line.hasSuffix(String(expected.drop { $0 != "Z" }) + "\n"))
        #expect(line.filter { $0 == "\n" }.count == 1)
    }

    @Test func eachLinesLevelIsKnownBeforeItIsBuilt() {
        let record = DecisionRecord(conn: 1, client: SocketAddress(ip: IPAddress("127.0.0.1")!, port: 1))
        func closed(_ reason: CloseReason) -> SessionEnd {
            .closed(reason, ClosedTunnel(record: record, bytesUp: 0, bytesDown: 0, duration: .zero, stream: nil, relay: nil))
        }
        for end in [closed(.clientClosed), closed(.policyReload(.chainRefused(.pinMismatch, failure: nil))), closed(.shutdown)] {
            #expect(SessionLog.end(end).level == SessionLog.level(of: end))
        }
        #expect(SessionLog.decision(record, .unpinned(.noRule)).level == SessionLog.level(of: TunnelDecision.unpinned(.noRule)))
    }

    /// The encoder against the string renderer it replaced (kept here as the reference).
    @Test func theEncoderWritesWhatTheStringRendererWrote() {
        for record in [awkward, LogRecord(.info, "e", []), LogRecord(.critical, "x", [("n", .int(Int.min)), ("m", .int(Int.max))])] {
            #expect(record.text(at: time) == ReferenceRenderer.text(record, at: time))
            #expect(record.json(at: time) == ReferenceRenderer.json(record, at: time))
            #expect(record.text(at: Date(timeIntervalSince1970: 0.001)) == ReferenceRenderer.text(record, at: Date(timeIntervalSince1970: 0.001)))
        }
    }
}

/// pinproxy's renderer before issue 8 item 4, verbatim but for names.
enum ReferenceRenderer {
    static func text(_ r: LogRecord, at time: Date) -> String {
        var parts = ["ts=\(timestamp(time))", "level=\(r.levelName)", "event=\(r.event)"]
        for (key, value) in r.fields {
            switch value {
            case .objects(let list):
                for (index, object) in list.enumerated() {
                    for (field, inner) in object { parts.append("\(key).\(index).\(field)=\(logfmt(inner))") }
                }
            default:
                parts.append("\(key)=\(logfmt(value))")
            }
        }
        return parts.joined(separator: " ")
    }

    static func json(_ r: LogRecord, at time: Date) -> String {
        var parts = ["\"ts\":\(jsonString(timestamp(time)))", "\"level\":\(jsonString(r.levelName))", "\"event\":\(jsonString(r.event))"]
        for (key, value) in r.fields { parts.append("\(jsonString(key)):\(value.json)") }
        return "{" + parts.joined(separator: ",") + "}"
    }

    static func logfmt(_ value: LogValue) -> String {
        switch value {
        case .int(let i): return String(i)
        case .bool(let b): return b ? "true" : "false"
        case .objects: return "[]"
        case .string(let s):
            let plain = !s.isEmpty && s.unicodeScalars.allSatisfy { $0.value > 0x20 && $0.value < 0x7f && $0 != "\"" && $0 != "=" && $0 != "\\" }
            return plain ? s : jsonString(s)
        }
    }
}
