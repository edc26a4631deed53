// What a tunnel's two log lines (the decision and the close) cost the thread that logs them, in
// a release build: Benchmarks/logcost.sh [RECORDS=20000] (issue 8, item 4). Each round hands
// RECORDS decision+close pairs of a pinned tunnel (a three-certificate chain, two expected pins)
// to a swift-log Logger whose handler is pinproxy's own, writing to /dev/null, in text, in JSON,
// and with the level at warning (both lines filtered out). Prints the median over ROUNDS rounds of
// the logging thread's CPU time per pair, in µs, as a markdown table. CPU only; bounded by the
// counts. Not a test: numbers for the README.
import Foundation
import Logging
@_spi(ChainValidation) import PinPolicy
@_spi(Benchmarks) import ProxyCore

func facts(_ seed: UInt8, subject: String, issuer: String, isCA: Bool) -> CertificateFacts {
    let digest = (0..<32).map { UInt8(truncatingIfNeeded: Int(seed) &* 37 &+ $0 &* 11) }
    return CertificateFacts(spki: Pin(kind: .spki, digest: digest)!, certificate: Pin(kind: .cert, digest: digest.reversed())!,
                            subject: subject, issuer: issuer, notBefore: Date(timeIntervalSince1970: 1_700_000_000),
                            notAfter: Date(timeIntervalSince1970: 1_900_000_000), subjectAltNames: ["api.pinproxy.test"],
                            key: "EC P-256", isCA: isCA)
}

let chain = [
    facts(1, subject: "CN=api.pinproxy.test", issuer: "CN=pinproxy test intermediate,O=pinproxy tests", isCA: false),
    facts(2, subject: "CN=pinproxy test intermediate,O=pinproxy tests", issuer: "CN=pinproxy test root,O=pinproxy tests", isCA: true),
    facts(3, subject: "CN=pinproxy test root,O=pinproxy tests", issuer: "CN=pinproxy test root,O=pinproxy tests", isCA: true),
]
let yaml = """
    version: 1
    defaults: { unpinned: allow }
    rules:
      - host: api.pinproxy.test
        pins: ["\(chain[0].spki)", "\(facts(9, subject: "CN=backup", issuer: "CN=backup", isCA: false).spki)"]
    """
let policy = try PolicyLoader.load(yaml: yaml, source: "/etc/pinproxy/pinproxy.yaml")
guard let tunnel = LogCost.tunnel(policy: policy, host: "api.pinproxy.test", port: 443, address: IPAddress("127.0.0.1")!,
                                  chain: .verified(VerifiedChain(leafFirst: chain))) else { fatalError("no rule") }

let arguments = CommandLine.arguments.dropFirst()
let records = Int(arguments.first ?? "") ?? 20_000
let rounds = Int(ProcessInfo.processInfo.environment["ROUNDS"] ?? "") ?? 7
let devNull = open("/dev/null", O_WRONLY)

func threadCPU() -> Double {
    var t = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t)
    return Double(t.tv_sec) + Double(t.tv_nsec) / 1e9
}

/// Median µs of this thread's CPU per decision+close pair.
func measure(_ format: LogFormatChoice, level: Logger.Level) -> Double {
    let sink = LogSink(format: format, fd: devNull, minimumLevel: level, queueBytes: 64 << 20)
    let logger = Logger(label: "bench") { _ in LineLogHandler(sink: sink) }
    var samples: [Double] = []
    for _ in 0..<rounds {
        let start = threadCPU()
        for conn in 0..<records {
            LogCost.emitDecisionAndClose(tunnel, conn: conn, to: logger)
        }
        samples.append((threadCPU() - start) / Double(records) * 1e6)
        sink.flush(timeout: 30)  // the writer empties the queue between rounds, off the clock
    }
    return samples.sorted()[samples.count / 2]
}

print("| decision + close lines (\(records) pairs, median of \(rounds) rounds) | µs of the logging thread's CPU per pair |")
print("|---|---|")
print("| text | \(String(format: "%.2f", measure(.text, level: .info))) |")
print("| JSON | \(String(format: "%.2f", measure(.json, level: .info))) |")
print("| level warning (both lines filtered out) | \(String(format: "%.2f", measure(.text, level: .warning))) |")
