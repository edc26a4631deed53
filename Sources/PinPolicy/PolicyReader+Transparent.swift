import Yams

/// `proxy.transparent_listen` and `proxy.transparent_mark` (transparent mode).
extension PolicyReader {
    func readTransparent(_ f: Fields, into settings: inout ProxySettings) {
        var transparent = TransparentSettings()
        transparent.line = f["transparent_listen"]?.mark?.line ?? 0
        if let n = f["transparent_listen"], let items = list(n, "proxy.transparent_listen", example: "[\"127.0.0.1:15001\", \"[::1]:15001\"]") {
            for item in items {
                guard let text = string(item, "a proxy.transparent_listen address") else { continue }
                guard let address = SocketAddress.parse(text), address.port != 0 else {
                    fail(item, "'\(text)' is not a transparent listen address; write IP:PORT with the port the redirect rules name, e.g. 127.0.0.1:15001 or [::1]:15001")
                    continue
                }
                if settings.listen.contains(address) {
                    fail(item, "\(address) is both a proxy.listen and a proxy.transparent_listen address; a transparent listener needs a port of its own")
                    continue
                }
                transparent.listen.append(address)
            }
            if items.isEmpty { fail(n, "proxy.transparent_listen must name at least one address, or be left out") }
            for address in transparent.listen where !AddressSet.parse(["loopback"])!.contains(address.ip) && !settings.allowClientsExplicit {
                fail(n, "a transparent listener on \(address) (beyond loopback) needs an explicit proxy.allow_clients list, so that pinproxy is never an open proxy by accident")
            }
            if settings.upstreamProxy != nil {
                fail(n, "proxy.transparent_listen cannot be used with proxy.upstream_proxy: a redirected connection goes to the address its client chose")
            }
        }
        if let n = f["transparent_mark"] {
            if let text = string(n, "proxy.transparent_mark"), let mark = Self.mark(text) {
                transparent.mark = mark
            } else {
                fail(n, "proxy.transparent_mark must be a non-zero 32-bit mark, decimal or 0x-hex (e.g. 0x70), as nftables' 'meta mark' names it")
            }
            if f["transparent_listen"] == nil { fail(n, "proxy.transparent_mark is set but proxy.transparent_listen is not") }
        }
        settings.transparent = transparent
    }

    /// `112` or `0x70`; never 0 (every unmarked socket has mark 0, so the rules could not tell ours).
    static func mark(_ text: String) -> UInt32? {
        let value: UInt32? = if text.lowercased().hasPrefix("0x") { UInt32(text.dropFirst(2), radix: 16) } else { UInt32(text, radix: 10) }
        guard let value, value != 0 else { return nil }
        return value
    }
}
