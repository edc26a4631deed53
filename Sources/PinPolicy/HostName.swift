/// Host-name normalisation, shared by the policy file and the CONNECT request so that both sides
/// compare the same bytes (case and trailing dots have been real pinning bypasses).
public enum HostName {
    /// Why a text is not a host name, in words for an error message.
    public enum Problem: Error, Hashable, Sendable {
        case empty, notASCII, tooLong, emptyLabel, labelTooLong(String), badCharacter(Character)
        case numericIPv4Form  // `127.1`, `0x7f.0.0.1`, `2130706433`: refused, never guessed

        public var message: String {
            switch self {
            case .empty: return "the name is empty"
            case .notASCII: return "the name has non-ASCII characters (write IDNs as A-labels: xn--…)"
            case .tooLong: return "the name is longer than 253 bytes"
            case .emptyLabel: return "the name has an empty label (two dots in a row, or a leading dot)"
            case .labelTooLong(let label): return "the label '\(label)' is longer than 63 bytes"
            case .badCharacter(let c): return "the character '\(c)' is not allowed in a host name (letters, digits, '-' and '_' only)"
            case .numericIPv4Form: return "this looks like an IPv4 address in a non-canonical form; only a dotted quad such as 192.0.2.1 is an address"
            }
        }
    }

    /// Lowercases, strips exactly one trailing dot and checks every label. Read as bytes (every
    /// CONNECT's host comes through here): once the name is known to be ASCII, a byte is a
    /// character.
    public static func normalize(_ text: String) -> Result<String, Problem> {
        var name = Array(text.utf8)
        guard name.allSatisfy({ $0 < 0x80 }) else { return .failure(.notASCII) }
        for i in name.indices where name[i] >= UInt8(ascii: "A") && name[i] <= UInt8(ascii: "Z") { name[i] += 0x20 }
        if name.last == UInt8(ascii: ".") { name.removeLast() }
        guard !name.isEmpty else { return .failure(.empty) }
        guard name.count <= 253 else { return .failure(.tooLong) }
        var lastLabel = name[...]
        var start = 0
        while start <= name.count {
            let end = name[start...].firstIndex(of: UInt8(ascii: ".")) ?? name.count
            let label = name[start..<end]
            guard !label.isEmpty else { return .failure(.emptyLabel) }
            guard label.count <= 63 else { return .failure(.labelTooLong(String(decoding: label, as: UTF8.self))) }
            if let bad = label.firstIndex(where: { !isNameByte($0) }) {
                // The whole character ("\r\n" is one), as the message names it.
                return .failure(.badCharacter(String(decoding: name[bad...], as: UTF8.self).first!))
            }
            lastLabel = label
            start = end + 1
        }
        // WHATWG URL and most resolvers read a name whose last label is numeric as an IPv4 number.
        if isNumericLabel(lastLabel) { return .failure(.numericIPv4Form) }
        return .success(String(decoding: name, as: UTF8.self))
    }

    /// Letters (lowercased by now), digits, `-` and `_`.
    private static func isNameByte(_ byte: UInt8) -> Bool {
        (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z")) || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9"))
            || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
    }

    private static func isNumericLabel(_ label: ArraySlice<UInt8>) -> Bool {
        let digit = { (b: UInt8) in b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }
        if label.allSatisfy(digit) { return true }
        if label.starts(with: "0x".utf8) { return label.dropFirst(2).allSatisfy { digit($0) || ($0 >= UInt8(ascii: "a") && $0 <= UInt8(ascii: "f")) } }
        return false
    }
}
