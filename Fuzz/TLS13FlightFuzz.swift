// libFuzzer harness for the TLS 1.3 flight opener (TLS13ServerFlight, TLS13TicketReader). Built with
// `swiftc -sanitize=fuzzer,address` together with TLSInspection's and PinPolicy's sources in one
// module (Fuzz/run.sh has the line), linked with OpenSSL, zlib, brotli and zstd.
//
// Transcript, suite and secret are RFC 8448 §3's, fixed. The first input byte picks:
//   bit 0: raw (the rest is the server's record stream as relayed: framing, AEAD failures) or
//          sealed (the rest is handshake plaintext, which the harness encrypts under the secret's
//          key in records, so the fuzzer reaches the message parser and the signature check);
//   bit 1: the ClientHello is RFC 8448's with compress_certificate (zlib, brotli, zstd) added, so
//          that a CompressedCertificate (RFC 8879) is decompressed rather than refused as not
//          offered (RFC 8448's own CertificateVerify does not match that transcript);
//   bits 2-7: a split position (as a fraction of the length), and in sealed mode the record size.
// Properties besides "no crash": the flight fed in one piece and in two gives the same outcome;
// opened after every piece it gives the same verified flight; a verified flight ends within the
// bytes fed and has a chain; the ticket reader over the same bytes does not crash either.

import COpenSSL

let fuzzSuite: UInt16 = 0x1301
let fuzzClientHello = fuzzHex("010000c00303cb34ecb1e78163ba1c38c6dacb196a6dffa21a8d9912ec18a2ef6283024dece7000006130113031302010000910000000b0009000006736572766572ff01000100000a00140012001d0017001800190100010101020103010400230000003300260024001d002099381de560e4bd43d23d8e435a7dbafeb3c06e51c13cae4d5413691e529aaf2c002b0003020304000d0020001e040305030603020308040805080604010501060102010402050206020202002d00020101001c00024001")
/// RFC 8448's ClientHello with compress_certificate (27) offering zlib, brotli and zstd appended
/// to its extensions (the message and extension lengths grown by the 11 bytes).
let fuzzCompressingClientHello: [UInt8] = {
    let offer: [UInt8] = [0, 27, 0, 7, 6, 0, 1, 0, 2, 0, 3]
    var hello = fuzzClientHello + offer
    let length = hello.count - 4
    hello[1...3] = [UInt8(length >> 16), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
    // Extensions length: after version, random, session id, suites and compression methods.
    var at = 4 + 2 + 32
    at += 1 + Int(hello[at])
    at += 2 + (Int(hello[at]) << 8 | Int(hello[at + 1]))
    at += 1 + Int(hello[at])
    let extensions = (Int(hello[at]) << 8 | Int(hello[at + 1])) + offer.count
    hello[at...at + 1] = [UInt8(extensions >> 8), UInt8(extensions & 0xFF)]
    return hello
}()
let fuzzServerHello = fuzzHex("020000560303a6af06a4121860dc5e6e60249cd34c95930c8ac5cb1434dac155772ed3e2692800130100002e00330024001d0020c9828876112095fe66762bdbf7c672e156d6cc253b833df1dd69b1b04e751f0f002b00020304")
let fuzzSecret = fuzzHex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38").withUnsafeBytes { SecretBytes(copying: $0) }
let fuzzKey = hkdfExpandLabel(fuzzSecret, "key", length: 16, suite: try! TLS13Suite(fuzzSuite))
let fuzzIV = hkdfExpandLabel(fuzzSecret, "iv", length: 12, suite: try! TLS13Suite(fuzzSuite))

func fuzzHex(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8).map { $0 <= 0x39 ? $0 - 0x30 : $0 - 0x61 + 10 }
    return stride(from: 0, to: digits.count, by: 2).map { digits[$0] << 4 | digits[$0 + 1] }
}

/// Encrypts `plaintext` as TLS 1.3 records of at most `size` content bytes (inner type handshake),
/// with the RFC 8448 server handshake key: what a server holding the secret would send.
func seal(_ plaintext: [UInt8], recordSize size: Int) -> [UInt8] {
    var out: [UInt8] = []
    var sequence: UInt64 = 0
    for start in stride(from: 0, to: plaintext.count, by: size) {
        let inner = Array(plaintext[start..<min(start + size, plaintext.count)]) + [tlsContentTypeHandshake]
        let header: [UInt8] = [23, 3, 3, UInt8((inner.count + 16) >> 8), UInt8((inner.count + 16) & 0xFF)]
        var nonce = fuzzIV.withUnsafeBytes { Array($0) }
        for index in 0..<8 { nonce[11 - index] ^= UInt8(truncatingIfNeeded: sequence >> (8 * UInt64(index))) }
        sequence += 1
        var ciphertext = [UInt8](repeating: 0, count: inner.count + 16)
        let context = EVP_CIPHER_CTX_new()!
        var written: Int32 = 0
        var finalWritten: Int32 = 0
        let ok = fuzzKey.withUnsafeBytes { key in
            ciphertext.withUnsafeMutableBufferPointer { out in
                EVP_EncryptInit_ex(context, EVP_aes_128_gcm(), nil, key.baseAddress!.assumingMemoryBound(to: UInt8.self), nonce) == 1
                    && EVP_EncryptUpdate(context, nil, &written, header, 5) == 1
                    && EVP_EncryptUpdate(context, out.baseAddress, &written, inner, Int32(inner.count)) == 1
                    && EVP_EncryptFinal_ex(context, out.baseAddress! + Int(written), &finalWritten) == 1
                    && EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_AEAD_GET_TAG, 16, out.baseAddress! + inner.count) == 1
            }
        }
        EVP_CIPHER_CTX_free(context)
        precondition(ok, "sealing failed")
        out += header + ciphertext
    }
    return out
}

enum FuzzOutcome: Equatable {
    case opened(TLS13Opening)
    case failed(TLS13FlightError)
}

func runFlight(_ bytes: [UInt8], clientHello: [UInt8], cuts: [Int], openEachPiece: Bool) -> FuzzOutcome {
    do throws(TLS13FlightError) {
        var flight = try TLS13ServerFlight(suite: fuzzSuite, transcript: [clientHello, fuzzServerHello], limit: 8 * 1024)
        var start = 0
        var last = TLS13Opening.needMore
        for cut in cuts + [bytes.count] {
            try bytes[start..<cut].withFedBytes { (raw) throws(TLS13FlightError) in try flight.feed(raw) }
            start = cut
            if openEachPiece { last = try flight.open(with: fuzzSecret) }
        }
        if !openEachPiece { last = try flight.open(with: fuzzSecret) }
        return .opened(last)
    } catch {
        return .failed(error)
    }
}

extension ArraySlice<UInt8> {
    func withFedBytes<R>(_ body: (UnsafeRawBufferPointer) throws(TLS13FlightError) -> R) throws(TLS13FlightError) -> R {
        let copy = Array(self)
        do {
            return try copy.withUnsafeBytes { try body($0) }
        } catch {
            throw error as! TLS13FlightError
        }
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let input = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let sealed = data[0] & 1 == 1
    let hello = data[0] & 2 == 2 ? fuzzCompressingClientHello : fuzzClientHello
    let fraction = Int(data[0] >> 2)
    let bytes = sealed ? seal(input, recordSize: 1 + fraction * 256) : input
    let split = bytes.count * fraction / 63

    let whole = runFlight(bytes, clientHello: hello, cuts: [], openEachPiece: false)
    precondition(runFlight(bytes, clientHello: hello, cuts: [split], openEachPiece: false) == whole, "split at \(split) differs from one piece")
    if case .opened(.verified(let flight)) = whole {
        precondition(flight.flightEnd <= bytes.count && !flight.chain.isEmpty, "verified flight out of bounds")
        precondition(runFlight(bytes, clientHello: hello, cuts: [split], openEachPiece: true) == whole, "opening each piece differs")
    }

    do throws(TLS13FlightError) {
        var tickets = try TLS13TicketReader(suite: fuzzSuite, limit: 8 * 1024)
        try bytes[...].withFedBytes { (raw) throws(TLS13FlightError) in try tickets.feed(raw) }
        _ = try tickets.read(with: fuzzSecret)
    } catch {
    }
    return 0
}
