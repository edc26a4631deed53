// Micro-measure of TLS13ServerFlight (compiled by Benchmarks/tls13-open.sh with TLSInspection's
// sources and the captures of Tests/TestSupport/TLS13Vectors*.swift): per capture, the time of
// init + feed + open of the whole flight (key derivation, decryption, parsing, CertificateVerify,
// Finished), and of TLS13TicketReader over the tickets. Not a test: numbers for the README.
import Foundation

func bytes(_ base64: String) -> [UInt8] { Array(Data(base64Encoded: base64, options: .ignoreUnknownCharacters)!) }
func hexBytes(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8).map { $0 <= 0x39 ? $0 - 0x30 : $0 - 0x61 + 10 }
    return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
}

func percentile(_ sorted: [Double], _ p: Double) -> Double { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }

@main struct Bench {
    static func main() throws {
        let rounds = Int(CommandLine.arguments.dropFirst().first ?? "") ?? 500
        print("| capture | suite | scheme | flight bytes | open p50 µs | open p99 µs | tickets p50 µs |")
        print("|---|---|---|---|---|---|---|")
        for capture in TLS13Vectors.all {
            let client = bytes(capture.client), server = bytes(capture.server)
            var clientReader = ClientFlightReader()
            let first = try clientReader.feed(client)!
            var serverReader = ServerFlightReader()
            let hellos = try serverReader.feed(server).compactMap { event -> ServerHello? in
                if case .serverHello(let hello) = event { return hello }
                return nil
            }
            var transcript = [first.raw, hellos[0].raw]
            if capture.helloRetry {
                let second = try clientReader.readSecondHello(client[clientReader.bytesConsumed...])!
                transcript = [first.raw, hellos[0].raw, second.raw, hellos[1].raw]
            }
            let encrypted = Array(server[serverReader.bytesConsumed...])
            let flightBytes = Array(encrypted[..<capture.flightEnd])
            let afterFlight = Array(encrypted[capture.flightEnd...])
            let handshakeSecret = hexBytes(capture.handshakeSecret).withUnsafeBytes { SecretBytes(copying: $0) }
            let trafficSecret = hexBytes(capture.trafficSecret).withUnsafeBytes { SecretBytes(copying: $0) }
            var opens: [Double] = [], reads: [Double] = []
            for _ in 0..<rounds {
                let start = DispatchTime.now().uptimeNanoseconds
                var flight = try TLS13ServerFlight(suite: capture.suite, transcript: transcript)
                try flightBytes.withUnsafeBytes { try flight.feed($0) }
                guard case .verified = try flight.open(with: handshakeSecret) else { fatalError("not verified") }
                let middle = DispatchTime.now().uptimeNanoseconds
                var tickets = try TLS13TicketReader(suite: capture.suite)
                try afterFlight.withUnsafeBytes { try tickets.feed($0) }
                guard case .done = try tickets.read(with: trafficSecret) else { fatalError("tickets not done") }
                let end = DispatchTime.now().uptimeNanoseconds
                opens.append(Double(middle - start) / 1000)
                reads.append(Double(end - middle) / 1000)
            }
            opens.sort()
            reads.sort()
            print(String(format: "| %@ | 0x%04X | 0x%04X | %d | %.0f | %.0f | %.0f |", capture.name, capture.suite, capture.scheme,
                         flightBytes.count, percentile(opens, 0.5), percentile(opens, 0.99), percentile(reads, 0.5)))
        }
    }
}
