/// Strict standard base64 (RFC 4648 §4, with padding), kept here so pin parsing is a pure function
/// over text with no Foundation quirks (Foundation skips or accepts some malformed input).
public enum Base64 {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
    /// Each byte's value in the alphabet, or `invalid`.
    private static let reverse: [UInt8] = {
        var table = [UInt8](repeating: invalid, count: 256)
        for (i, c) in alphabet.enumerated() { table[Int(c)] = UInt8(i) }
        return table
    }()
    private static let invalid: UInt8 = 0xff

    public static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? alphabet[Int((b1 & 0x0f) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? alphabet[Int(b2 & 0x3f)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// nil unless the text is canonical padded base64.
    public static func decode(_ text: String) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 4 == 0 else { return nil }
        var out: [UInt8] = []
        var i = 0
        while i < chars.count {
            let isLast = i + 4 == chars.count
            var bits: UInt32 = 0            // the quad's four 6-bit values, `=` as 0
            var padding = 0
            for c in chars[i..<i + 4] {
                var value: UInt8 = 0
                if c == UInt8(ascii: "=") {
                    guard isLast else { return nil }
                    padding += 1
                } else {
                    value = reverse[Int(c)]
                    guard padding == 0, value != invalid else { return nil }
                }
                bits = bits << 6 | UInt32(value)
            }
            guard padding <= 2 else { return nil }
            let triple = [UInt8(bits >> 16), UInt8(bits >> 8 & 0xff), UInt8(bits & 0xff)]
            out.append(contentsOf: triple.prefix(3 - padding))
            i += 4
        }
        guard encode(out) == text else { return nil }  // refuse non-zero padding bits
        return out
    }
}
