#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address as bytes. Only canonical text is accepted: a dotted quad of four decimal
/// numbers without leading zeros for IPv4 (`127.1`, `0x7f.0.0.1` and `2130706433` are not addresses
/// here, because resolvers disagree on what they mean), and RFC 4291 text without a zone id for IPv6.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// 4 bytes (IPv4) or 16 bytes (IPv6), network order.
    public let bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    public var isIPv4: Bool { bytes.count == 4 }

    /// Parses canonical IPv4 or IPv6 text (no brackets, no zone id).
    public init?(_ text: String) {
        if let v4 = IPAddress.parseDottedQuad(text.utf8) {
            self.bytes = v4
        } else if text.utf8.contains(UInt8(ascii: ":")), !text.utf8.contains(UInt8(ascii: "%")), text.utf8.allSatisfy({ $0 < 0x80 }) {
            var raw = in6_addr()
            guard inet_pton(AF_INET6, text, &raw) == 1 else { return nil }
            self.bytes = withUnsafeBytes(of: &raw) { Array($0) }
        } else {
            return nil
        }
    }

    /// `a.b.c.d`, each 0–255 in decimal without leading zeros.
    static func parseDottedQuad<Bytes: Collection<UInt8>>(_ text: Bytes) -> [UInt8]? {
        var out: [UInt8] = []
        out.reserveCapacity(4)
        var value = 0, digits = 0, leadingZero = false
        for byte in text {
            if byte == UInt8(ascii: ".") {
                guard digits > 0, out.count < 3 else { return nil }
                out.append(UInt8(value))
                (value, digits) = (0, 0)
                continue
            }
            // 1–3 digits, no leading zero (`010` is octal to some resolvers), at most 255.
            guard byte >= 0x30 && byte <= 0x39, digits < 3, digits == 0 || !leadingZero else { return nil }
            if digits == 0 { leadingZero = byte == 0x30 }
            value = value * 10 + Int(byte - 0x30)
            digits += 1
            guard value <= 255 else { return nil }
        }
        guard digits > 0, out.count == 3 else { return nil }
        out.append(UInt8(value))
        return out
    }

    /// The IPv4 address inside an IPv4-mapped IPv6 address (`::ffff:a.b.c.d`), or self.
    ///
    /// Only the mapped form: it is how a dual-stack socket shows an IPv4 peer, so it *is* the IPv4
    /// address everywhere (CIDR parsing, `ip:` rules, `allow_clients`). The other embeddings are in
    /// `embeddedIPv4`, which only the refusing checks use.
    public var unmapped: IPAddress {
        guard bytes.count == 16, bytes[0..<10].allSatisfy({ $0 == 0 }), bytes[10] == 0xff, bytes[11] == 0xff else {
            return self
        }
        return IPAddress(bytes: Array(bytes[12..<16]))!
    }

    /// The IPv4 address an IPv6 address carries in its last 32 bits and reaches through a
    /// translator or tunnel, or nil (also for IPv4 addresses):
    ///
    /// - IPv4-mapped `::ffff:a.b.c.d` (RFC 4291 §2.5.5.2), as `unmapped`;
    /// - IPv4-compatible `::a.b.c.d` (RFC 4291 §2.5.5.1; deprecated, but a `sit` tunnel still
    ///   carries it to the IPv4 address) — except `::` and `::1`, the unspecified and loopback
    ///   addresses (RFC 4291 §2.5.2–§2.5.3), which stay IPv6 and are not 0.0.0.0 and 0.0.0.1;
    /// - NAT64 with the well-known prefix `64:ff9b::/96` (RFC 6052 §2.1, the /96 layout of §2.2);
    /// - NAT64 with the local-use prefix `64:ff9b:1::/48` (RFC 8215), read with the same /96
    ///   layout: the IPv4 address in the last 32 bits.
    ///
    /// XXX: RFC 8215 leaves the prefix length inside `64:ff9b:1::/48` to the operator (/48 to /96).
    /// With a prefix shorter than /96 RFC 6052 §2.2 puts the IPv4 address elsewhere (split around
    /// the u-octet, bits 64–71), which we do not decode; such a network should deny
    /// `64:ff9b:1::/48` as a whole.
    ///
    /// Used where seeing through can only refuse more (`deny_destinations`, loop detection), never
    /// where it would admit more (`allow_clients`, `ip:` rules use `unmapped`).
    public var embeddedIPv4: IPAddress? {
        guard bytes.count == 16 else { return nil }
        let last32 = IPAddress(bytes: Array(bytes[12..<16]))!
        let prefix96 = bytes[0..<12]
        if prefix96.elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff]) { return last32 }  // ::ffff:0:0/96
        if prefix96.allSatisfy({ $0 == 0 }) {                                                 // ::/96
            let isUnspecifiedOrLoopback = last32.bytes[0..<3].allSatisfy { $0 == 0 } && last32.bytes[3] <= 1
            return isUnspecifiedOrLoopback ? nil : last32
        }
        if prefix96.elementsEqual([0x00, 0x64, 0xff, 0x9b, 0, 0, 0, 0, 0, 0, 0, 0]) { return last32 }  // 64:ff9b::/96
        if bytes[0..<6].elementsEqual([0x00, 0x64, 0xff, 0x9b, 0x00, 0x01]) { return last32 }         // 64:ff9b:1::/48
        return nil
    }

    public var description: String {
        if isIPv4 {  // every log line names its client's address: written as bytes
            var text: [UInt8] = []
            text.reserveCapacity(15)
            for (index, byte) in bytes.enumerated() {
                if index > 0 { text.append(UInt8(ascii: ".")) }
                if byte >= 100 { text.append(UInt8(ascii: "0") + byte / 100) }
                if byte >= 10 { text.append(UInt8(ascii: "0") + byte / 10 % 10) }
                text.append(UInt8(ascii: "0") + byte % 10)
            }
            return String(decoding: text, as: UTF8.self)
        }
        var raw = in6_addr()
        withUnsafeMutableBytes(of: &raw) { $0.copyBytes(from: bytes) }
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        guard inet_ntop(AF_INET6, &raw, &buffer, socklen_t(buffer.count)) != nil else { return "?" }
        return String(decoding: buffer.prefix(while: { $0 != 0 }).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// How the address is written inside an authority: IPv6 in brackets.
    public var authorityText: String { isIPv4 ? description : "[\(description)]" }
}

/// An address range: `10.0.0.0/8`, `2001:db8::/32`, or one address (`/32`, `/128`).
public struct CIDR: Hashable, Sendable, CustomStringConvertible {
    public let network: IPAddress
    public let prefixLength: Int

    public init?(network: IPAddress, prefixLength: Int) {
        guard prefixLength >= 0, prefixLength <= network.bytes.count * 8 else { return nil }
        self.network = network
        self.prefixLength = prefixLength
    }

    /// `addr` or `addr/len`. An IPv4-mapped IPv6 network is read as the IPv4 one, so that it matches
    /// the unmapped addresses it is compared with.
    public init?(_ text: String) {
        let parts = text.split(separator: "/", omittingEmptySubsequences: false)
        guard parts.count <= 2, let address = IPAddress(String(parts[0])) else { return nil }
        var length = address.bytes.count * 8
        if parts.count == 2 {
            let digits = parts[1]
            guard (1...3).contains(digits.count), digits.allSatisfy(\.isASCII), let n = Int(digits),
                  !(digits.count > 1 && digits.first == "0"), n <= length else { return nil }
            length = n
        }
        if address.unmapped.isIPv4, !address.isIPv4 {
            guard length >= 96 else { return nil }
            self.init(network: address.unmapped, prefixLength: length - 96)
        } else {
            self.init(network: address, prefixLength: length)
        }
    }

    /// Whether the (unmapped) address lies in this range. IPv4 ranges never contain IPv6 addresses.
    public func contains(_ address: IPAddress) -> Bool {
        let candidate = address.unmapped
        guard candidate.bytes.count == network.bytes.count else { return false }
        var remaining = prefixLength
        for (a, b) in zip(candidate.bytes, network.bytes) where remaining > 0 {
            let bits = min(8, remaining)
            let mask: UInt8 = bits == 8 ? 0xff : ~(0xff >> UInt8(bits))
            if a & mask != b & mask { return false }
            remaining -= bits
        }
        return true
    }

    public var description: String { "\(network)/\(prefixLength)" }
}
