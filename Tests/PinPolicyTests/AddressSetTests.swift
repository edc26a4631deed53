import Testing
@testable import PinPolicy

/// `deny_destinations` sees through every way IPv6 can carry an IPv4 address; `allow_clients`
/// does not (IPAddress.embeddedIPv4, AddressSet.entry(containingAnyFormOf:)).
@Suite struct AddressSetTests {
    static let denyLoopback = AddressSet.parse(["loopback", "unspecified"])!

    // should be denied as the IPv4 address they embed / should keep their IPv6 meaning
    @Test(arguments: [
        ("127.0.0.1", "loopback"),
        ("::ffff:127.0.0.1", "loopback"),          // IPv4-mapped
        ("::127.0.0.1", "loopback"),               // IPv4-compatible
        ("::7f00:2", "loopback"),                  // the same, written in hex
        ("64:ff9b::127.0.0.1", "loopback"),        // NAT64 well-known prefix, /96
        ("64:ff9b::7f00:1", "loopback"),
        ("64:ff9b:1::7f00:1", "loopback"),         // NAT64 local-use prefix, read with the /96 layout
        ("64:ff9b:1:abcd:1::7f00:1", "loopback"),
        ("::1", "loopback"),                       // IPv6 loopback, not 0.0.0.1
        ("::", "unspecified"),                     // IPv6 unspecified, not 0.0.0.0
        ("::0.0.0.2", "unspecified"),              // compatible form of 0.0.0.2, in 0.0.0.0/8
        ("64:ff9b::0.0.0.0", "unspecified"),
    ])
    func denied(address: String, entry: String) throws {
        #expect(Self.denyLoopback.entry(containingAnyFormOf: try #require(IPAddress(address)))?.name == entry)
    }

    @Test(arguments: [
        "2001:db8::7f00:1",        // an unrelated IPv6 address with 127.0.0.1 in its last 32 bits
        "64:ff9b::808:808",        // NAT64 of 8.8.8.8
        "64:ff9b:2::7f00:1",       // outside 64:ff9b:1::/48
        "64:ff9b:0:1::7f00:1",     // inside 64:ff9b::/48 but not 64:ff9b::/96 or 64:ff9b:1::/48
        "::ffff:8.8.8.8",
        "::8.8.8.8",
        "8.8.8.8",
    ])
    func notDenied(address: String) throws {
        #expect(Self.denyLoopback.entry(containingAnyFormOf: try #require(IPAddress(address))) == nil)
    }

    /// `::1` is in `::/96`, but is IPv6 loopback: a list without `loopback` does not deny it as 0.0.0.1.
    @Test func ipv6LoopbackIsNotZeroDotZeroDotZeroDotOne() {
        let unspecified = AddressSet.parse(["unspecified"])!
        #expect(!unspecified.containsAnyForm(of: IPAddress("::1")!))
        #expect(unspecified.containsAnyForm(of: IPAddress("0.0.0.1")!))
        #expect(IPAddress("::1")!.embeddedIPv4 == nil && IPAddress("::")!.embeddedIPv4 == nil)
    }

    /// The address as written is compared first, so an IPv6 CIDR naming a NAT64 prefix still matches.
    @Test func anIPv6RangeOfEmbeddingAddressesStillMatches() {
        let set = AddressSet.parse(["loopback", "64:ff9b::/96"])!
        #expect(set.entry(containingAnyFormOf: IPAddress("64:ff9b::808:808")!)?.name == "64:ff9b::/96")
        #expect(set.entry(containingAnyFormOf: IPAddress("64:ff9b::7f00:1")!)?.name == "64:ff9b::/96")
    }

    /// Allow lists take no spelling the list does not name: only the mapped form, which is how a
    /// dual-stack socket shows an IPv4 client, is the IPv4 address.
    @Test(arguments: [("::ffff:127.0.0.1", true), ("::127.0.0.1", false), ("64:ff9b::7f00:1", false), ("64:ff9b:1::7f00:1", false)])
    func allowListsDoNotSeeThroughEmbeddings(address: String, allowed: Bool) throws {
        #expect(AddressSet.parse(["loopback"])!.contains(try #require(IPAddress(address))) == allowed)
    }

    @Test(arguments: [
        ("::ffff:10.1.2.3", "10.1.2.3"), ("::10.1.2.3", "10.1.2.3"), ("64:ff9b::a01:203", "10.1.2.3"),
        ("64:ff9b:1:ffff::10.1.2.3", "10.1.2.3"),
    ])
    func embeddedIPv4(address: String, ipv4: String) throws {
        let embedded = try #require(IPAddress(address)).embeddedIPv4
        #expect(embedded == IPAddress(ipv4) && embedded?.isIPv4 == true)
    }

    @Test(arguments: ["10.1.2.3", "2001:db8::a01:203", "fe80::a01:203", "::", "::1"])
    func noEmbeddedIPv4(address: String) throws {
        #expect(try #require(IPAddress(address)).embeddedIPv4 == nil)
    }
}
