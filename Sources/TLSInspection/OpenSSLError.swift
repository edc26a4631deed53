import COpenSSL

/// OpenSSL's error queue drained into a value at the failure site, so the message survives the next
/// OpenSSL call.
public struct OpenSSLError: Error, Hashable, Sendable, CustomStringConvertible {
    public let operation: String
    public let reasons: [String]

    /// Drains the thread's error queue.
    public static func drain(_ operation: String) -> OpenSSLError {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            reasons.append(text(of: code))
        }
        return OpenSSLError(operation: operation, reasons: reasons)
    }

    /// OpenSSL's text for one packed error code (as libevent's `bufferevent_get_openssl_error` returns).
    public static func text(of code: UInt) -> String {
        var buffer = [CChar](repeating: 0, count: 256)
        ERR_error_string_n(code, &buffer, buffer.count)
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Forgets whatever is queued (after the caller has read what it needs through another path).
    public static func clear() { ERR_clear_error() }

    public var description: String {
        reasons.isEmpty ? "\(operation) failed" : "\(operation) failed: \(reasons.joined(separator: "; "))"
    }
}

/// A memory BIO over bytes, freed at the end of `body`.
func withMemoryBIO<T>(_ bytes: [UInt8], _ body: (OpaquePointer) throws -> T) rethrows -> T {
    try bytes.withUnsafeBytes { raw in
        let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count))!
        defer { BIO_free(bio) }
        return try body(bio)
    }
}

/// The text an OpenSSL print function wrote into a fresh memory BIO.
func printedText(_ print: (OpaquePointer) -> Void) -> String {
    let bio = BIO_new(BIO_s_mem())!
    defer { BIO_free(bio) }
    print(bio)
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let n = BIO_read(bio, &chunk, Int32(chunk.count))
        if n <= 0 { break }
        out += chunk[0..<Int(n)]
    }
    return String(decoding: out, as: UTF8.self)
}

/// SHA-256 of bytes.
public func sha256(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
    var digest = [UInt8](repeating: 0, count: 32)
    var length: UInt32 = 0
    let ok = EVP_Digest(bytes.baseAddress, bytes.count, &digest, &length, EVP_sha256(), nil)
    precondition(ok == 1 && length == 32, "EVP_Digest(SHA-256) failed")
    return digest
}

public func sha256(_ bytes: [UInt8]) -> [UInt8] { bytes.withUnsafeBytes { sha256($0) } }

/// Exactly one DER value filling `bytes`, read by an OpenSSL `d2i_*` function (`decode(&cursor,
/// length)`); nil when it does not parse or leaves bytes over (what it read then is freed): bytes
/// off the wire or from a file must be one value, not one value and something else.
func decodeDER<Value>(_ bytes: [UInt8], _ decode: (UnsafeMutablePointer<UnsafePointer<UInt8>?>, Int) -> Value?,
                      free: (Value) -> Void) -> Value? {
    bytes.withUnsafeBufferPointer { buffer -> Value? in
        guard let start = buffer.baseAddress, !buffer.isEmpty else { return nil }
        var cursor: UnsafePointer<UInt8>? = start
        guard let value = decode(&cursor, buffer.count) else { return nil }
        guard cursor == start + buffer.count else { free(value); return nil }
        return value
    }
}

/// The DER that an OpenSSL `i2d_*` function writes.
func derBytes(_ encode: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>) -> Int32) -> [UInt8]? {
    var out: UnsafeMutablePointer<UInt8>? = nil
    let length = encode(&out)
    guard length > 0, let out else { return nil }
    defer { CRYPTO_free(out, #fileID, #line) }
    return Array(UnsafeBufferPointer(start: out, count: Int(length)))
}
