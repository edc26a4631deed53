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
    public static func parse(_ text: String) -> Result<Authority, Problem> {
        guard !text.isEmpty else { return .failure(.empty) }
        guard text.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f }) else { return .failure(.notASCII) }
        if text.contains("@") { return .failure(.userinfo) }
        if text.contains(where: { "/?#".contains($0) }) { return .failure(.notAuthorityForm) }
        let hostPart: Substring
        let portPart: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return .failure(.badIPv6(text)) }
            let inner = text[text.index(after: text.startIndex)..<close]
            if inner.contains("%") { return .failure(.zoneID) }
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return .failure(.missingPort) }
            hostPart = inner
            portPart = rest.dropFirst()
            guard let address = IPAddress(String(hostPart)), !address.isIPv4 else {
                return .failure(.badIPv6(String(hostPart)))
            }
            return parsePort(portPart).map { Authority(target: .ip(address), port: $0) }
        }
        if text.contains("%") { return .failure(.percentEncoding) }
        guard let colon = text.lastIndex(of: ":") else { return .failure(.missingPort) }
        hostPart = text[..<colon]
        portPart = text[text.index(after: colon)...]
        if hostPart.contains(":") { return .failure(.badIPv6(String(hostPart))) }  // unbracketed IPv6
        let port: UInt16
        switch parsePort(portPart) {
        case .success(let p): port = p
        case .failure(let e): return .failure(e)
        }
        return parseHost(String(hostPart)).map { Authority(target: $0, port: port) }
    }

    /// A host without a port: a dotted quad, a bracketed or bare IPv6 address, or a name.
    public static func parseHost(_ text: String) -> Result<Target, Problem> {
        if let v4 = IPAddress.parseDottedQuad(Substring(text)) { return .success(.ip(IPAddress(bytes: v4)!)) }
        var bare = text
        if bare.hasPrefix("["), bare.hasSuffix("]") { bare = String(bare.dropFirst().dropLast()) }
        if bare.contains(":") {
            if bare.contains("%") { return .failure(.zoneID) }
            guard let address = IPAddress(bare), !address.isIPv4 else { return .failure(.badIPv6(bare)) }
            return .success(.ip(address))
        }
        return HostName.normalize(text).map { Target.name($0) }.mapError { .badHost($0) }
    }

    /// 1–65535, decimal digits only, no sign, no leading zeros.
    public static func parsePort(_ text: Substring) -> Result<UInt16, Problem> {
        guard !text.isEmpty else { return .failure(.missingPort) }
        guard text.count <= 5, text.allSatisfy({ $0.isASCII && $0.isNumber }), text.first != "0",
              let value = Int(text), (1...65535).contains(value) else {
            return .failure(.badPort(String(text)))
        }
        return .success(UInt16(value))
    }
}
