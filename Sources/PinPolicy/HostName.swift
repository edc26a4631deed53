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

    /// Lowercases, strips exactly one trailing dot and checks every label.
    public static func normalize(_ text: String) -> Result<String, Problem> {
        guard text.utf8.allSatisfy({ $0 < 0x80 }) else { return .failure(.notASCII) }
        var name = text.lowercased()
        if name.hasSuffix(".") { name.removeLast() }
        guard !name.isEmpty else { return .failure(.empty) }
        guard name.utf8.count <= 253 else { return .failure(.tooLong) }
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        for label in labels {
            guard !label.isEmpty else { return .failure(.emptyLabel) }
            guard label.utf8.count <= 63 else { return .failure(.labelTooLong(String(label))) }
            if let bad = label.first(where: { !($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) {
                return .failure(.badCharacter(bad))
            }
        }
        // WHATWG URL and most resolvers read a name whose last label is numeric as an IPv4 number.
        if let last = labels.last, isNumericLabel(last) { return .failure(.numericIPv4Form) }
        return .success(name)
    }

    private static func isNumericLabel(_ label: Substring) -> Bool {
        if label.allSatisfy({ $0.isNumber }) { return true }
        if label.hasPrefix("0x") { return label.dropFirst(2).allSatisfy(\.isHexDigit) }
        return false
    }
}
