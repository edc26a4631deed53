/// A set of address ranges written with class names and CIDRs, as `deny_destinations` and
/// `allow_clients` are. Classes cover IPv4 and IPv6; addresses are compared after unmapping
/// IPv4-mapped IPv6.
public struct AddressSet: Hashable, Sendable, CustomStringConvertible {
    public struct Entry: Hashable, Sendable {
        /// `loopback`, or the CIDR as written.
        public let name: String
        public let ranges: [CIDR]
    }

    public let entries: [Entry]

    public init(entries: [Entry]) { self.entries = entries }

    public static let classes: [String: [String]] = [
        "loopback": ["127.0.0.0/8", "::1/128"],
        "link-local": ["169.254.0.0/16", "fe80::/10"],
        "unspecified": ["0.0.0.0/8", "::/128"],
        "multicast": ["224.0.0.0/4", "ff00::/8"],
        "private": ["10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"],
    ]

    /// A class name or a CIDR; nil when neither.
    public static func entry(_ text: String) -> Entry? {
        if let ranges = classes[text] {
            return Entry(name: text, ranges: ranges.map { CIDR($0)! })
        }
        guard let cidr = CIDR(text) else { return nil }
        return Entry(name: text, ranges: [cidr])
    }

    public static func parse(_ items: [String]) -> AddressSet? {
        var entries: [Entry] = []
        for item in items {
            guard let e = entry(item) else { return nil }
            entries.append(e)
        }
        return AddressSet(entries: entries)
    }

    /// The entry that contains the address, if any (its name goes into log lines).
    public func entry(containing address: IPAddress) -> Entry? {
        entries.first { $0.ranges.contains { $0.contains(address) } }
    }

    public func contains(_ address: IPAddress) -> Bool { entry(containing: address) != nil }

    public var description: String { entries.map(\.name).joined(separator: ",") }
}
