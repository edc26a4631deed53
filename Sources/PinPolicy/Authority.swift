/// The target of a CONNECT: a normalised host name or an IP literal.
public enum Target: Hashable, Sendable, CustomStringConvertible {
    case name(String)
    case ip(IPAddress)

    public var description: String {
        switch self {
        case .name(let n): return n
        case .ip(let a): return a.description
        }
    }
}

/// A parsed CONNECT request-target (RFC 9110 §9.3.6 authority-form: `host:port`).
public struct Authority: Hashable, Sendable, CustomStringConvertible {
    public let target: Target
    public let port: UInt16

    public init(target: Target, port: UInt16) {
        self.target = target
        self.port = port
    }

    public var description: String {
        switch target {
        case .name(let n): return "\(n):\(port)"
        case .ip(let a): return "\(a.authorityText):\(port)"
        }
    }

    public enum Problem: Error, Hashable, Sendable, CustomStringConvertible {
        case missingPort, badPort(String), userinfo, percentEncoding, zoneID, badIPv6(String), badHost(HostName.Problem)
        case notASCII, empty, notAuthorityForm

        public var description: String {
            switch self {
            case .empty: return "empty request-target"
            case .notAuthorityForm: return "a CONNECT target is host:port (authority-form), not a URL or a path"
            case .missingPort: return "the CONNECT target needs a port (host:port)"
            case .badPort(let p): return "bad port '\(p)': a decimal number 1-65535 without sign or leading zeros"
            case .userinfo: return "userinfo ('@') is not allowed in a CONNECT target"
            case .percentEncoding: return "percent-encoding is not allowed in a CONNECT target"
            case .zoneID: return "IPv6 zone ids are not allowed"
            case .badIPv6(let t): return "'\(t)' is not an IPv6 address"
            case .badHost(let p): return p.message
            case .notASCII: return "the target has non-ASCII bytes (IDNs must come as A-labels)"
            }
        }
    }

    /// Parses `host:port`, `a.b.c.d:port` or `[v6]:port`, strictly: authority-form only, no
    /// userinfo, no percent-encoding, no zone ids, ASCII only, canonical dotted quads only.
    /// Read as bytes (every CONNECT comes through here): once the text is known to be printable
    /// ASCII, a byte is a character.
    public static func parse(_ text: String) -> Result<Authority, Problem> {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty else { return .failure(.empty) }
        guard bytes.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return .failure(.notASCII) }
        if bytes.contains(UInt8(ascii: "@")) { return .failure(.userinfo) }
        if bytes.contains(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }) {
            return .failure(.notAuthorityForm)
        }
        func slice(_ range: Range<Int>) -> String { String(decoding: bytes[range], as: UTF8.self) }
        if bytes[0] == UInt8(ascii: "[") {
            guard let close = bytes.firstIndex(of: UInt8(ascii: "]")) else { return .failure(.badIPv6(text)) }
            let inner = 1..<close
            if bytes[inner].contains(UInt8(ascii: "%")) { return .failure(.zoneID) }
            guard close + 1 < bytes.count, bytes[close + 1] == UInt8(ascii: ":") else { return .failure(.missingPort) }
            guard let address = IPAddress(slice(inner)), !address.isIPv4 else { return .failure(.badIPv6(slice(inner))) }
            return parsePort(bytes[(close + 2)...]).map { Authority(target: .ip(address), port: $0) }
        }
        if bytes.contains(UInt8(ascii: "%")) { return .failure(.percentEncoding) }
        guard let colon = bytes.lastIndex(of: UInt8(ascii: ":")) else { return .failure(.missingPort) }
        if bytes[..<colon].contains(UInt8(ascii: ":")) { return .failure(.badIPv6(slice(0..<colon))) }  // unbracketed IPv6
        let port: UInt16
        switch parsePort(bytes[(colon + 1)...]) {
        case .success(let p): port = p
        case .failure(let e): return .failure(e)
        }
        return parseHost(slice(0..<colon)).map { Authority(target: $0, port: port) }
    }

    /// A host without a port: a dotted quad, a bracketed or bare IPv6 address, or a name.
    public static func parseHost(_ text: String) -> Result<Target, Problem> {
        if let v4 = IPAddress.parseDottedQuad(text.utf8) { return .success(.ip(IPAddress(bytes: v4)!)) }
        var bare = text
        if bare.utf8.first == UInt8(ascii: "["), bare.utf8.last == UInt8(ascii: "]") { bare = String(bare.dropFirst().dropLast()) }
        if bare.utf8.contains(UInt8(ascii: ":")) {
            if bare.utf8.contains(UInt8(ascii: "%")) { return .failure(.zoneID) }
            guard let address = IPAddress(bare), !address.isIPv4 else { return .failure(.badIPv6(bare)) }
            return .success(.ip(address))
        }
        return HostName.normalize(text).map { Target.name($0) }.mapError { .badHost($0) }
    }

    /// 1–65535, decimal digits only, no sign, no leading zeros.
    public static func parsePort(_ text: Substring) -> Result<UInt16, Problem> {
        // Non-ASCII digits (`١`) are not digits here: only the bytes 0-9 pass.
        guard text.utf8.count == text.count else { return .failure(.badPort(String(text))) }
        return parsePort(Array(text.utf8)[...])
    }

    static func parsePort(_ digits: ArraySlice<UInt8>) -> Result<UInt16, Problem> {
        guard !digits.isEmpty else { return .failure(.missingPort) }
        guard digits.count <= 5 else { return .failure(.badPort(String(decoding: digits, as: UTF8.self))) }
        var value = 0
        for digit in digits {
            guard digit >= 0x30 && digit <= 0x39 else { return .failure(.badPort(String(decoding: digits, as: UTF8.self))) }
            value = value * 10 + Int(digit - 0x30)
        }
        guard digits.first != 0x30, (1...65535).contains(value) else {
            return .failure(.badPort(String(decoding: digits, as: UTF8.self)))
        }
        return .success(UInt16(value))
    }
}
