/// A set of address ranges written with class names and CIDRs, as `deny_destinations` and
/// `allow_clients` are. Classes cover IPv4 and IPv6; addresses are compared after unmapping
/// IPv4-mapped IPv6. A deny list also looks at the IPv4 address an IPv4-compatible or NAT64
/// address embeds (`entry(containingAnyFormOf:)`); an allow list does not, so that no spelling of
/// an address is admitted that the list does not name.
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

    /// The entry that contains the address or the IPv4 address it embeds (`IPAddress.embeddedIPv4`),
    /// so that `64:ff9b::7f00:1` or `::127.0.0.1` is as denied as 127.0.0.1. The address as written
    /// is looked at first, so `::1` stays loopback and a CIDR such as `64:ff9b::/96` still matches.
    public func entry(containingAnyFormOf address: IPAddress) -> Entry? {
        entry(containing: address) ?? address.embeddedIPv4.flatMap { entry(containing: $0) }
    }

    public func containsAnyForm(of address: IPAddress) -> Bool { entry(containingAnyFormOf: address) != nil }

    public var description: String { entries.map(\.name).joined(separator: ",") }
}
