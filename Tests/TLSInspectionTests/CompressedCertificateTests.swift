import CCompressionEncoders
import Foundation
import Testing
import TestSupport
@testable import TLSInspection

// RFC 8879 CompressedCertificate in a TLS 1.3 server flight: signed flights built by
// Fixtures/compressed-flights.py (the transcript holds the compressed message as sent), and the
// decompression's refusals on messages compressed here with the same C libraries.

/// `data` compressed with `algorithm`'s encoder. brotli's `quality` and `window` (lgwin) matter
/// for the bombs: a large window makes the decoder want a large ring buffer.
func compressed(_ data: [UInt8], _ algorithm: CertificateCompressionAlgorithm, quality: Int32 = 9, window: Int32 = 22) -> [UInt8] {
    switch algorithm {
    case .zlib:
        var size = compressBound(uLong(data.count))
        var output = [UInt8](repeating: 0, count: Int(size))
        let status = compress2(&output, &size, data, uLong(data.count), quality)
        precondition(status == Z_OK, "compress2 \(status)")
        return Array(output[..<Int(size)])
    case .brotli:
        var size = BrotliEncoderMaxCompressedSize(data.count)
        var output = [UInt8](repeating: 0, count: size)
        let done = BrotliEncoderCompress(quality, window, BROTLI_MODE_GENERIC, data.count, data, &size, &output)
        precondition(done == BROTLI_TRUE, "BrotliEncoderCompress failed")
        return Array(output[..<size])
    case .zstd:
        var output = [UInt8](repeating: 0, count: ZSTD_compressBound(data.count))
        let size = ZSTD_compress(&output, output.count, data, data.count, quality)
        precondition(ZSTD_isError(size) == 0, "ZSTD_compress failed")
        return Array(output[..<size])
    }
}

func uint24(_ value: Int) -> [UInt8] { [UInt8(value >> 16 & 0xFF), UInt8(value >> 8 & 0xFF), UInt8(value & 0xFF)] }

/// A CompressedCertificate message (RFC 8879 §4) declaring `declared` bytes.
func compressedCertificateMessage(algorithm: UInt16, declared: Int, _ data: [UInt8]) -> HandshakeMessage {
    HandshakeMessage(type: 25, raw: handshake(25, u16(Int(algorithm)) + uint24(declared) + uint24(data.count) + data))
}

/// The Certificate message the compressed one stands for, or the reason it is refused.
func decompressedCertificate(_ message: HandshakeMessage, offered: [UInt16] = [1, 2, 3], bound: Int = 128 * 1024) -> Result<[UInt8], TLSReadError> {
    Result { () throws(TLSReadError) in try CompressedCertificate(message).certificateMessage(offered: offered, bound: bound).raw }
}

struct CompressedFlightCase: CustomTestStringConvertible, Sendable {
    let vectors: CompressedFlight
    var testDescription: String { vectors.name }
    static let all = CompressedCertificateVectors.all.map(CompressedFlightCase.init)
}

@Suite struct CompressedCertificateFlightTests {
    typealias V = CompressedCertificateVectors
    static let transcript = [decode(V.clientHello), decode(V.serverHello)]
    static let secret = TLSInspectionTests.secret(hexBytes(V.handshakeSecret))

    func open(_ base64: String, transcript: [[UInt8]] = Self.transcript, cuts: [Int] = [], openEachPiece: Bool = false) -> FlightOutcome {
        openFlight(suite: V.suite, transcript: transcript, bytes: decode(base64), cuts: cuts, secret: Self.secret,
                   openEachPiece: openEachPiece)
    }

    @Test(arguments: CompressedFlightCase.all)
    func aCompressedCertificateFlightVerifies(flight: CompressedFlightCase) throws {
        let bytes = decode(flight.vectors.flight)
        let expected = FlightOutcome.opened(.verified(TLS13VerifiedFlight(
            chain: try chainDER("leaf-ec256.chain.pem"), certificateRequested: false, signatureScheme: 0x0403, flightEnd: bytes.count)))
        #expect(open(flight.vectors.flight) == expected)
        #expect(open(flight.vectors.flight, cuts: drip(bytes.count), openEachPiece: true) == expected)
        for end in [0, 5, bytes.count / 2, bytes.count - 1] {
            #expect(openFlight(suite: V.suite, transcript: Self.transcript, bytes: Array(bytes[..<end]), secret: Self.secret) == .opened(.needMore))
        }
    }

    @Test(arguments: CompressedFlightCase.all)
    func theSignatureCoversTheCompressedMessageAsSent(flight: CompressedFlightCase) {
        // Signed over EncryptedExtensions and the decompressed Certificate: the transcript pinproxy
        // hashes holds the CompressedCertificate (RFC 8879 §4), so this does not verify.
        #expect(open(flight.vectors.signedOverCertificate) == .failed(.certificateVerifyFailed("the signature does not verify with the leaf's key")))
    }

    @Test(arguments: CompressedFlightCase.all)
    func oneCertificateMessagePerFlight(flight: CompressedFlightCase) {
        #expect(open(flight.vectors.afterCertificate) == .failed(.malformed("CompressedCertificate after a Certificate in one flight")))
        #expect(open(flight.vectors.twice) == .failed(.malformed("CompressedCertificate after a CompressedCertificate in one flight")))
    }

    @Test(arguments: CompressedFlightCase.all)
    func anAlgorithmTheClientDidNotOfferIsRefused(flight: CompressedFlightCase) {
        let algorithm = flight.vectors.algorithm
        let refusal = FlightOutcome.failed(.malformed("CompressedCertificate algorithm \(algorithm) was not offered in the ClientHello"))
        // A ClientHello without compress_certificate, and one offering the two other algorithms.
        let silent = clientHelloMessage([(43, [2, 3, 4])])
        let others = [UInt16(1), 2, 3].filter { $0 != algorithm }.flatMap { u16(Int($0)) }
        let offeringOthers = clientHelloMessage([(43, [2, 3, 4]), (27, [UInt8(others.count)] + others)])
        for hello in [silent, offeringOthers] {
            #expect(open(flight.vectors.flight, transcript: [hello, Self.transcript[1]]) == refusal)
        }
        // Offering it alone is enough: the certificate is read, and the signature, made over the
        // script's ClientHello and not this one, is what fails.
        let alone = clientHelloMessage([(43, [2, 3, 4]), (27, [2] + u16(Int(algorithm)))])
        #expect(open(flight.vectors.flight, transcript: [alone, Self.transcript[1]])
                == .failed(.certificateVerifyFailed("the signature does not verify with the leaf's key")))
    }

    @Test func afterAHelloRetryRequestTheSecondClientHellosOfferCounts() {
        // RFC 8446 §4.1.3's HelloRetryRequest random, TLS 1.3, key_share naming x25519 only.
        let retryRandom = hexBytes("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")
        let extensions: [UInt8] = [0, 43, 0, 2, 3, 4, 0, 51, 0, 2, 0, 0x1D]
        let retry = handshake(2, u16(0x0303) + retryRandom + [0] + u16(0x1301) + [0] + u16(extensions.count) + extensions)
        let silent = clientHelloMessage([(43, [2, 3, 4])])
        let offering = Self.transcript[0]
        let flight = CompressedCertificateVectors.all[0].flight
        // Offered only in the first hello: not offered.
        #expect(open(flight, transcript: [offering, retry, silent, Self.transcript[1]])
                == .failed(.malformed("CompressedCertificate algorithm 1 was not offered in the ClientHello")))
        // Offered in the second: read (the signature, made over another transcript, is what fails).
        #expect(open(flight, transcript: [silent, retry, offering, Self.transcript[1]])
                == .failed(.certificateVerifyFailed("the signature does not verify with the leaf's key")))
    }

    @Test func aMalformedOfferIsRefused() throws {
        // compress_certificate algorithms<2..2^8-2>: odd, empty, and longer than its extension.
        for (data, reason) in [([3, 0, 1, 0] as [UInt8], "compress_certificate algorithms of 3 bytes"),
                               ([0], "compress_certificate algorithms of 0 bytes"),
                               ([4, 0, 1], "truncated compress_certificate algorithms"),
                               ([2, 0, 1, 9], "1 bytes after compress_certificate algorithms")] {
            let hello = clientHelloMessage([(43, [2, 3, 4]), (27, data)])
            #expect(throws: TLSReadError.malformed(reason)) { try offeredCertificateCompression(clientHello: hello) }
            #expect(open(CompressedCertificateVectors.all[0].flight, transcript: [hello, Self.transcript[1]]) == .failed(.malformed(reason)))
        }
        #expect(try offeredCertificateCompression(clientHello: decode(V.clientHello)) == [1, 2, 3])
        #expect(try offeredCertificateCompression(clientHello: clientHelloMessage([])) == [])
    }
}

@Suite struct CertificateDecompressionTests {
    static let certificate = decode(CompressedCertificateVectors.certificate)
    static var body: [UInt8] { Array(certificate[4...]) }

    @Test(arguments: CertificateCompressionAlgorithm.allCases)
    func decompressesToTheCertificateMessage(algorithm: CertificateCompressionAlgorithm) {
        let message = compressedCertificateMessage(algorithm: algorithm.rawValue, declared: Self.body.count, compressed(Self.body, algorithm))
        #expect(decompressedCertificate(message) == .success(Self.certificate))
    }

    @Test(arguments: CertificateCompressionAlgorithm.allCases)
    func aDeclaredLengthThatDoesNotMatchIsRefused(algorithm: CertificateCompressionAlgorithm) {
        let data = compressed(Self.body, algorithm)
        let count = Self.body.count
        let short = compressedCertificateMessage(algorithm: algorithm.rawValue, declared: count + 1, data)
        #expect(decompressedCertificate(short) == .failure(.malformed(
            "CompressedCertificate decompresses to \(count) bytes, not its uncompressed_length of \(count + 1)")))
        for declared in [count - 1, 4] {
            let long = compressedCertificateMessage(algorithm: algorithm.rawValue, declared: declared, data)
            #expect(decompressedCertificate(long) == .failure(.malformed(
                "CompressedCertificate decompresses to more than its uncompressed_length of \(declared)")))
        }
        let tiny = compressedCertificateMessage(algorithm: algorithm.rawValue, declared: 3, data)
        #expect(decompressedCertificate(tiny) == .failure(.malformed("CompressedCertificate uncompressed_length 3 is too short for a Certificate")))
    }

    @Test func unknownAndUnofferedAlgorithmsAreRefused() {
        let data = compressed(Self.body, .zlib)
        let unknown = compressedCertificateMessage(algorithm: 4, declared: Self.body.count, data)
        #expect(decompressedCertificate(unknown, offered: [1, 2, 3, 4]) == .failure(.malformed("CompressedCertificate algorithm 4 is unknown")))
        #expect(decompressedCertificate(unknown) == .failure(.malformed("CompressedCertificate algorithm 4 was not offered in the ClientHello")))
        let zlib = compressedCertificateMessage(algorithm: 1, declared: Self.body.count, data)
        #expect(decompressedCertificate(zlib, offered: [2, 3]) == .failure(.malformed("CompressedCertificate algorithm 1 was not offered in the ClientHello")))
        #expect(decompressedCertificate(zlib, offered: []) == .failure(.malformed("CompressedCertificate algorithm 1 was not offered in the ClientHello")))
    }

    /// 16 MiB of zeros declared as 100 bytes: decoding stops at 100 bytes (or, for brotli, at the
    /// ring buffer its 4 MiB window asks for), never expanding the rest.
    @Test(arguments: [(CertificateCompressionAlgorithm.zlib, "CompressedCertificate decompresses to more than its uncompressed_length of 100"),
                      (.brotli, "the brotli stream does not decompress: it needs more memory than 4194704 bytes"),
                      (.zstd, "CompressedCertificate decompresses to more than its uncompressed_length of 100")])
    func aBombStopsAtTheDeclaredLength(algorithm: CertificateCompressionAlgorithm, reason: String) {
        let bomb = compressed([UInt8](repeating: 0, count: 16 << 20), algorithm, quality: algorithm == .zlib ? 9 : 5)
        #expect(bomb.count < 20_000)
        let message = compressedCertificateMessage(algorithm: algorithm.rawValue, declared: 100, bomb)
        #expect(decompressedCertificate(message) == .failure(.malformed(reason)))
    }

    @Test func aBrotliBombWithASmallWindowStopsAtTheDeclaredLength() {
        // A 1 KiB window needs a small ring buffer: the budget lets it run, the output bound stops it.
        let bomb = compressed([UInt8](repeating: 0, count: 16 << 20), .brotli, quality: 5, window: 10)
        let message = compressedCertificateMessage(algorithm: 2, declared: 100, bomb)
        #expect(decompressedCertificate(message) == .failure(.malformed("CompressedCertificate decompresses to more than its uncompressed_length of 100")))
    }

    @Test(arguments: CertificateCompressionAlgorithm.allCases)
    func aDeclaredLengthOverTheBoundIsRefusedBeforeDecompressing(algorithm: CertificateCompressionAlgorithm) {
        let data = compressed([UInt8](repeating: 0, count: 1 << 20), algorithm)
        // The flight's default limit, and a smaller one: declared lengths just over each.
        for (declared, bound) in [(128 * 1024 + 1, 128 * 1024), (1 << 20, 128 * 1024), (4097, 4096)] {
            let message = compressedCertificateMessage(algorithm: algorithm.rawValue, declared: declared, data)
            #expect(decompressedCertificate(message, bound: bound) == .failure(.malformed(
                "CompressedCertificate uncompressed_length \(declared) is over the bound of \(bound)")))
        }
    }

    @Test(arguments: [(CertificateCompressionAlgorithm.zlib, "the zlib stream ends early, after"),
                      (.brotli, "the brotli stream ends early, after"),
                      (.zstd, "the zstd stream ends early")])
    func everyTruncationIsRefusedWithoutACrash(algorithm: CertificateCompressionAlgorithm, prefix: String) {
        let data = compressed(Self.body, algorithm)
        // The stream cut short, its lengths consistent: refused as a stream that stops early.
        for end in 1..<data.count {
            let message = compressedCertificateMessage(algorithm: algorithm.rawValue, declared: Self.body.count, Array(data[..<end]))
            guard case .failure(.malformed(let reason)) = decompressedCertificate(message) else {
                Issue.record("\(algorithm) cut at \(end) was not refused")
                continue
            }
            #expect(reason.hasPrefix(prefix), "cut at \(end): \(reason)")
        }
        // The message itself cut short: its vector lengths are checked before any decoding.
        let whole = compressedCertificateMessage(algorithm: algorithm.rawValue, declared: Self.body.count, data).raw
        for end in tlsHandshakeHeaderLength..<whole.count {
            let message = HandshakeMessage(type: 25, raw: Array(whole[..<end]))
            guard case .failure(.malformed) = decompressedCertificate(message) else {
                Issue.record("\(algorithm) message cut at \(end) was not refused")
                continue
            }
        }
        let cut = HandshakeMessage(type: 25, raw: Array(whole[..<(whole.count - 1)]))
        #expect(decompressedCertificate(cut) == .failure(.malformed("truncated compressed_certificate_message")))
    }

    @Test(arguments: CertificateCompressionAlgorithm.allCases)
    func trailingOrCorruptDataIsRefused(algorithm: CertificateCompressionAlgorithm) {
        let data = compressed(Self.body, algorithm)
        let trailing = compressedCertificateMessage(algorithm: algorithm.rawValue, declared: Self.body.count, data + [1, 2, 3])
        let corrupt = compressedCertificateMessage(algorithm: algorithm.rawValue, declared: Self.body.count, [0xFF] + data.dropFirst())
        switch algorithm {
        case .zlib:
            #expect(decompressedCertificate(trailing) == .failure(.malformed("3 bytes after the end of the zlib stream")))
            #expect(decompressedCertificate(corrupt) == .failure(.malformed("the zlib stream does not decompress: incorrect header check")))
        case .brotli:
            #expect(decompressedCertificate(trailing) == .failure(.malformed("3 bytes after the end of the brotli stream")))
            guard case .failure(.malformed(let reason)) = decompressedCertificate(corrupt) else { Issue.record("corrupt brotli accepted"); return }
            #expect(reason.hasPrefix("the brotli stream does not decompress: "))
        case .zstd:
            #expect(decompressedCertificate(trailing) == .failure(.malformed("3 bytes after the end of the zstd stream")))
            #expect(decompressedCertificate(corrupt) == .failure(.malformed("the zstd stream does not decompress: Unknown frame descriptor")))
        }
    }
}
