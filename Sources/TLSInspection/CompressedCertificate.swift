import CCompression
import Foundation

// RFC 8879: a TLS 1.3 server may send its Certificate compressed, with an algorithm the client
// offered in its compress_certificate extension. The transcript keeps the CompressedCertificate as
// sent (§4); the decompressed bytes are the body of a Certificate message.

let tlsExtensionCompressCertificate: UInt16 = 27  // RFC 8879 §3

/// RFC 8879 §7.3: CertificateCompressionAlgorithm values pinproxy decodes.
enum CertificateCompressionAlgorithm: UInt16, CaseIterable, Sendable {
    case zlib = 1
    case brotli = 2
    case zstd = 3
}

/// A CompressedCertificate message, read but not yet decompressed. RFC 8879 §4:
///
///     struct {
///          CertificateCompressionAlgorithm algorithm;
///          uint24 uncompressed_length;
///          opaque compressed_certificate_message<1..2^24-1>;
///     } CompressedCertificate;
struct CompressedCertificate {
    let algorithm: UInt16
    let uncompressedLength: Int
    let compressed: ArraySlice<UInt8>

    init(_ message: HandshakeMessage) throws(TLSReadError) {
        var body = ByteCursor(message.body)
        algorithm = try body.uint16("CompressedCertificate algorithm")
        uncompressedLength = try body.uint(3, "CompressedCertificate uncompressed_length")
        compressed = try body.vector("compressed_certificate_message", lengthBytes: 3, 1...0xFF_FFFF).bytes
        try body.expectEnd("CompressedCertificate")
    }

    /// The Certificate message it stands for (type 11, its length, the decompressed body), after
    /// checking the algorithm against the client's offer. `bound`: the most bytes it may decompress
    /// to, whatever it declares; nothing larger is ever allocated for the output.
    func certificateMessage(offered: [UInt16], bound: Int) throws(TLSReadError) -> HandshakeMessage {
        // Not offered first: a server that answers with an algorithm the client never listed is at
        // fault whether or not pinproxy could read it (RFC 8879 §4: illegal_parameter).
        guard offered.contains(algorithm) else {
            throw .malformed("CompressedCertificate algorithm \(algorithm) was not offered in the ClientHello")
        }
        guard let known = CertificateCompressionAlgorithm(rawValue: algorithm) else {
            throw .malformed("CompressedCertificate algorithm \(algorithm) is unknown")
        }
        let bound = min(bound, 0xFF_FFFF)
        guard uncompressedLength <= bound else {
            throw .malformed("CompressedCertificate uncompressed_length \(uncompressedLength) is over the bound of \(bound)")
        }
        // A Certificate body holds at least its context and list lengths (RFC 8446 §4.4.2).
        guard uncompressedLength >= 4 else {
            throw .malformed("CompressedCertificate uncompressed_length \(uncompressedLength) is too short for a Certificate")
        }
        let body = try decompress(compressed, with: known, exactly: uncompressedLength)
        let length = body.count
        let header: [UInt8] = [tlsHandshakeCertificate, UInt8(length >> 16), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
        return HandshakeMessage(type: tlsHandshakeCertificate, raw: header + body)
    }
}

/// RFC 8879 §3: the client's `CertificateCompressionAlgorithm algorithms<2..2^8-2>` from the
/// compress_certificate extension of a raw ClientHello message; [] if it has none.
func offeredCertificateCompression(clientHello: [UInt8]) throws(TLSReadError) -> [UInt16] {
    guard clientHello.count >= tlsHandshakeHeaderLength else { throw .malformed("truncated ClientHello") }
    var hello = ByteCursor(clientHello[tlsHandshakeHeaderLength...])
    _ = try hello.take(2 + 32, "ClientHello version and random")
    _ = try hello.vector("ClientHello session_id", lengthBytes: 1, 0...32)
    _ = try hello.vector("cipher_suites", lengthBytes: 2, 2...0xFFFE)
    _ = try hello.vector("compression_methods", lengthBytes: 1, 1...0xFF)
    guard let offer = try readExtensions(&hello, in: "ClientHello").first(where: { $0.type == tlsExtensionCompressCertificate }) else {
        return []
    }
    var data = offer.data
    var list = try data.vector("compress_certificate algorithms", lengthBytes: 1, 2...0xFE)
    try data.expectEnd("compress_certificate algorithms")
    guard list.bytes.count.isMultiple(of: 2) else { throw .malformed("compress_certificate algorithms of \(list.bytes.count) bytes") }
    var algorithms: [UInt16] = []
    while !list.isEmpty { algorithms.append(try list.uint16("compress_certificate algorithm")) }
    return algorithms
}

/// Decompresses `input` into exactly `count` bytes: fewer, more, trailing input or a stream that
/// stops short is malformed. Output goes into one buffer of `count` bytes; once it is full the
/// decoder is given a single spare byte, and anything written there means the stream is longer
/// than declared, so a bomb is stopped at `count` bytes without being expanded further.
func decompress(_ input: ArraySlice<UInt8>, with algorithm: CertificateCompressionAlgorithm, exactly count: Int) throws(TLSReadError) -> [UInt8] {
    let outcome: Result<[UInt8], TLSReadError> = input.withUnsafeBytes { raw in
        switch algorithm {
        case .zlib:
            guard let decoder = ZlibInflater(input: raw) else { return .failure(.malformed("zlib inflater could not start")) }
            return decodeExactly(count, with: decoder)
        case .brotli:
            guard let decoder = BrotliStreamDecoder(input: raw, memoryBudget: BrotliStreamDecoder.budget(forOutput: count)) else {
                return .failure(.malformed("brotli decoder could not start"))
            }
            return decodeExactly(count, with: decoder)
        case .zstd:
            return ZstdFrameDecoder.decode(raw, exactly: count)
        }
    }
    return try outcome.get()
}

/// One step of a streaming decoder.
enum DecodeStep {
    case ended                 // the compressed stream is complete
    case needsInput            // all input is consumed and the stream is not complete
    case progressed            // call again
    case failed(String)        // corrupt data, or the decoder refused
}

/// A streaming decoder over one input it was made with; it owns its C context.
protocol StreamDecoder: AnyObject {
    var name: String { get }
    /// Input bytes not consumed yet.
    var inputLeft: Int { get }
    /// Decodes into `output` (never empty); returns how many bytes it wrote.
    func decode(into output: UnsafeMutableRawBufferPointer) -> (written: Int, step: DecodeStep)
}

private func decodeExactly(_ count: Int, with decoder: some StreamDecoder) -> Result<[UInt8], TLSReadError> {
    var output = [UInt8](repeating: 0, count: count)
    var filled = 0
    var spare: UInt8 = 0
    // Every step consumes input or writes output, or the loop stops: bounded by both sizes.
    for _ in 0...(decoder.inputLeft + count + 1) {
        let before = (decoder.inputLeft, filled)
        let (written, step): (Int, DecodeStep)
        if filled < count {
            (written, step) = output.withUnsafeMutableBytes { decoder.decode(into: UnsafeMutableRawBufferPointer(rebasing: $0[filled...])) }
            filled += written
        } else {
            (written, step) = withUnsafeMutableBytes(of: &spare) { decoder.decode(into: $0) }
            guard written == 0 else {
                return .failure(.malformed("CompressedCertificate decompresses to more than its uncompressed_length of \(count)"))
            }
        }
        switch step {
        case .ended:
            guard filled == count else {
                return .failure(.malformed("CompressedCertificate decompresses to \(filled) bytes, not its uncompressed_length of \(count)"))
            }
            guard decoder.inputLeft == 0 else {
                return .failure(.malformed("\(decoder.inputLeft) bytes after the end of the \(decoder.name) stream"))
            }
            return .success(output)
        case .needsInput:
            return .failure(.malformed("the \(decoder.name) stream ends early, after \(filled) of \(count) bytes"))
        case .failed(let reason):
            return .failure(.malformed("the \(decoder.name) stream does not decompress: \(reason)"))
        case .progressed:
            guard (decoder.inputLeft, filled) != before else {
                return .failure(.malformed("the \(decoder.name) decoder makes no progress"))
            }
        }
    }
    return .failure(.malformed("the \(decoder.name) decoder makes no progress"))
}

/// zlib (RFC 1950) through inflate. The z_stream lives on the heap: zlib keeps a pointer to it.
final class ZlibInflater: StreamDecoder {
    let name = "zlib"
    private let stream = UnsafeMutablePointer<z_stream>.allocate(capacity: 1)
    private var initialized = false

    init?(input: UnsafeRawBufferPointer) {
        stream.initialize(to: z_stream())
        stream.pointee.next_in = UnsafeMutablePointer(mutating: input.baseAddress?.assumingMemoryBound(to: Bytef.self))
        stream.pointee.avail_in = uInt(input.count)
        guard ccompression_inflate_init(stream) == Z_OK else { return nil }
        initialized = true
    }

    deinit {
        if initialized { inflateEnd(stream) }
        stream.deinitialize(count: 1)
        stream.deallocate()
    }

    var inputLeft: Int { Int(stream.pointee.avail_in) }

    func decode(into output: UnsafeMutableRawBufferPointer) -> (written: Int, step: DecodeStep) {
        stream.pointee.next_out = output.baseAddress?.assumingMemoryBound(to: Bytef.self)
        stream.pointee.avail_out = uInt(output.count)
        let status = inflate(stream, Z_NO_FLUSH)
        let written = output.count - Int(stream.pointee.avail_out)
        stream.pointee.next_out = nil
        stream.pointee.avail_out = 0
        switch status {
        case Z_STREAM_END: return (written, .ended)
        case Z_OK: return (written, .progressed)
        // With room to write, a buffer error means inflate wants input it does not have.
        case Z_BUF_ERROR where stream.pointee.avail_in == 0: return (written, .needsInput)
        case Z_NEED_DICT: return (written, .failed("it needs a preset dictionary"))
        default:
            let message = stream.pointee.msg.map { String(cString: $0) } ?? "inflate error \(status)"
            return (written, .failed(message))
        }
    }
}

/// brotli (RFC 7932) through BrotliDecoderDecompressStream. Its ring buffer is sized from the
/// stream's own header (up to 16 MiB), so its allocations go through a budget set from the
/// declared length: a stream that asks for more memory than its output needs is refused.
final class BrotliStreamDecoder: StreamDecoder {
    let name = "brotli"
    private let state: OpaquePointer
    private let budget: MemoryBudget
    private var nextIn: UnsafePointer<UInt8>?
    private var availableIn: Int

    /// The ring buffer may grow by doubling to twice the output (the sum of its sizes under four
    /// times), plus the Huffman tables of up to 256 trees per alphabet and the state: under 4 MiB.
    static func budget(forOutput count: Int) -> Int { 4 * count + (4 << 20) }

    init?(input: UnsafeRawBufferPointer, memoryBudget: Int) {
        budget = MemoryBudget(memoryBudget)
        let opaque = Unmanaged.passUnretained(budget).toOpaque()
        guard let state = BrotliDecoderCreateInstance(budgetedAllocate, budgetedFree, opaque) else { return nil }
        self.state = state
        nextIn = input.baseAddress?.assumingMemoryBound(to: UInt8.self)
        availableIn = input.count
    }

    deinit { BrotliDecoderDestroyInstance(state) }

    var inputLeft: Int { availableIn }

    func decode(into output: UnsafeMutableRawBufferPointer) -> (written: Int, step: DecodeStep) {
        var nextOut = output.baseAddress?.assumingMemoryBound(to: UInt8.self)
        var availableOut = output.count
        let result = BrotliDecoderDecompressStream(state, &availableIn, &nextIn, &availableOut, &nextOut, nil)
        let written = output.count - availableOut
        switch result {
        case BROTLI_DECODER_RESULT_SUCCESS: return (written, .ended)
        case BROTLI_DECODER_RESULT_NEEDS_MORE_OUTPUT: return (written, .progressed)
        case BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT: return (written, .needsInput)
        default:
            if budget.refused { return (written, .failed("it needs more memory than \(budget.limit) bytes")) }
            return (written, .failed(String(cString: BrotliDecoderErrorString(BrotliDecoderGetErrorCode(state)))))
        }
    }
}

/// Bytes the brotli decoder may allocate in all, counted without refunds on free.
private final class MemoryBudget {
    let limit: Int
    var left: Int
    var refused = false
    init(_ limit: Int) { (self.limit, left) = (limit, limit) }
}

private let budgetedAllocate: brotli_alloc_func = { opaque, size in
    guard let opaque else { return nil }
    let budget = Unmanaged<MemoryBudget>.fromOpaque(opaque).takeUnretainedValue()
    guard size <= budget.left else {
        budget.refused = true
        return nil
    }
    budget.left -= size
    return malloc(size)
}

private let budgetedFree: brotli_free_func = { _, address in free(address) }

/// zstd (RFC 8878) through ZSTD_decompressDCtx into the output buffer itself: one-shot decoding
/// uses the destination as its window, so nothing is allocated from the frame's declared window
/// size, and it stops with dstSize_tooSmall as soon as the output would pass `count`. (The
/// streaming API would allocate a window buffer of the frame's declared size.)
enum ZstdFrameDecoder {
    static func decode(_ input: UnsafeRawBufferPointer, exactly count: Int) -> Result<[UInt8], TLSReadError> {
        // One frame, as the other algorithms have one stream: what follows it is refused, not
        // decoded as further frames.
        let frameSize = ZSTD_findFrameCompressedSize(input.baseAddress, input.count)
        if ZSTD_isError(frameSize) != 0 {
            if ZSTD_getErrorCode(frameSize) == ZSTD_error_srcSize_wrong { return .failure(.malformed("the zstd stream ends early")) }
            return .failure(.malformed("the zstd stream does not decompress: \(String(cString: ZSTD_getErrorName(frameSize)))"))
        }
        guard frameSize == input.count else { return .failure(.malformed("\(input.count - frameSize) bytes after the end of the zstd stream")) }
        guard let context = ZSTD_createDCtx() else { return .failure(.malformed("zstd decoder could not start")) }
        defer { ZSTD_freeDCtx(context) }
        var output = [UInt8](repeating: 0, count: count)
        let result = output.withUnsafeMutableBytes { ZSTD_decompressDCtx(context, $0.baseAddress, count, input.baseAddress, frameSize) }
        if ZSTD_isError(result) != 0 {
            if ZSTD_getErrorCode(result) == ZSTD_error_dstSize_tooSmall {
                return .failure(.malformed("CompressedCertificate decompresses to more than its uncompressed_length of \(count)"))
            }
            return .failure(.malformed("the zstd stream does not decompress: \(String(cString: ZSTD_getErrorName(result)))"))
        }
        guard result == count else {
            return .failure(.malformed("CompressedCertificate decompresses to \(result) bytes, not its uncompressed_length of \(count)"))
        }
        return .success(output)
    }
}
