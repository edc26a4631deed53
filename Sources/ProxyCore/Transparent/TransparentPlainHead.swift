import PinPolicy

/// A plain-HTTP request redirected from port 80 (or another plain port) is in origin-form
/// (`GET /path HTTP/1.1` with `Host:`), as a client that does not know of a proxy writes it. It is
/// forwarded as a proxy client's absolute-form request would be — same admission, same refusal of
/// a pinned host, same `deny_destinations` — by writing its target as the URL the `Host` header
/// names, at the original destination's port (RFC 9112 §3.2.2 reconstructs the target URI so).
/// Without a usable `Host`, the URL names the original destination's address. A request already in
/// absolute form is left as it is.
enum TransparentPlainHead {
    static func absoluteForm(_ head: [UInt8], origin: TransparentOrigin) -> [UInt8] {
        guard let lineEnd = head.firstIndex(of: 0x0a) else { return head }
        let line = head[..<lineEnd].last == 0x0d ? head[..<(lineEnd - 1)] : head[..<lineEnd]
        let parts = line.split(separator: 0x20, omittingEmptySubsequences: false)
        guard parts.count == 3, parts[1].first == UInt8(ascii: "/") else { return head }
        let port = origin.original.port
        var authority = SocketAddress(ip: origin.original.ip, port: port).description
        if let host = hostField(head[(lineEnd + 1)...]), let target = hostAuthority(host, port: port) { authority = target }
        var out = Array(parts[0]) + Array(" http://\(authority)".utf8) + Array(parts[1]) + [0x20] + Array(parts[2])
        out += head[line.endIndex...]
        return out
    }

    /// The first `Host` field's value, trimmed.
    private static func hostField(_ fields: ArraySlice<UInt8>) -> String? {
        for rawLine in fields.split(separator: 0x0a) {
            let line = rawLine.last == 0x0d ? rawLine.dropLast() : rawLine
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            guard String(decoding: line[..<colon], as: UTF8.self).lowercased() == "host" else { continue }
            return String(decoding: line[(colon + 1)...], as: UTF8.self).trimmingCharacters(in: [" ", "\t"])
        }
        return nil
    }

    /// `name` or `name:port` as a URL authority; nil for a value that is no host (the address is used then).
    private static func hostAuthority(_ host: String, port: UInt16) -> String? {
        guard !host.isEmpty, !host.contains(where: { "/?#@ \t\\".contains($0) }) else { return nil }
        let hasPort = host.hasPrefix("[") ? host.contains("]:") : host.contains(":")
        guard case .success(let authority) = Authority.parse(hasPort ? host : "\(host):\(port)") else { return nil }
        return authority.port == 80 ? authority.target.description.withBrackets : authority.description
    }
}

private extension String {
    /// An IPv6 literal in brackets, as a URL writes it.
    var withBrackets: String { contains(":") && !hasPrefix("[") ? "[\(self)]" : self }
}
