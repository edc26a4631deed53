import Testing
@testable import PinPolicy

/// CONNECT targets and host names, as docs/policy.md says ("Patterns and which rule applies", and
/// step 1 of "How a tunnel runs").
@Suite struct AuthorityTests {
    @Test(arguments: [
        ("api.example.com:443", "api.example.com", 443),
        ("API.Example.COM.:443", "api.example.com", 443),     // case and one trailing dot
        ("a_b.example.com:8443", "a_b.example.com", 8443),
        ("xn--bcher-kva.example:443", "xn--bcher-kva.example", 443),
        ("192.0.2.1:443", "192.0.2.1", 443),
        ("[2001:db8::1]:443", "2001:db8::1", 443),
        ("[::ffff:192.0.2.1]:443", "::ffff:192.0.2.1", 443),
        ("[::192.0.2.1]:443", "::192.0.2.1", 443),              // IPv4-compatible
        ("[64:ff9b::7f00:1]:443", "64:ff9b::7f00:1", 443),      // NAT64 (RFC 6052)
        ("[64:ff9b::127.0.0.1]:443", "64:ff9b::7f00:1", 443),
        ("[64:ff9b:1::7f00:1]:443", "64:ff9b:1::7f00:1", 443),  // NAT64 local use (RFC 8215)
        ("host:65535", "host", 65535),
        ("host:1", "host", 1),
    ])
    func accepted(text: String, target: String, port: Int) throws {
        let authority = try Authority.parse(text).get()
        #expect(authority.target.description == target)
        #expect(authority.port == UInt16(port))
    }

    @Test(arguments: [
        ("", Authority.Problem.empty),
        ("api.example.com", .missingPort),
        ("api.example.com:", .missingPort),
        ("api.example.com:0", .badPort("0")),
        ("api.example.com:65536", .badPort("65536")),
        ("api.example.com:0443", .badPort("0443")),
        ("api.example.com:+443", .badPort("+443")),
        ("api.example.com:-1", .badPort("-1")),
        ("api.example.com:44 3", .notASCII),
        ("user@api.example.com:443", .userinfo),
        ("api%2eexample.com:443", .percentEncoding),
        ("[fe80::1%eth0]:443", .zoneID),
        ("[fe80::1%25eth0]:443", .zoneID),
        ("2001:db8::1:443", .badIPv6("2001:db8::1")),
        ("[192.0.2.1]:443", .badIPv6("192.0.2.1")),
        ("[nothex::]:443", .badIPv6("nothex::")),
        ("bücher.example:443", .notASCII),
        ("127.1:443", .badHost(.numericIPv4Form)),
        ("0x7f.0.0.1:443", .badHost(.numericIPv4Form)),
        ("2130706433:443", .badHost(.numericIPv4Form)),
        ("127.000.0.1:443", .badHost(.numericIPv4Form)),
        ("a..b:443", .badHost(.emptyLabel)),
        (".a.b:443", .badHost(.emptyLabel)),
        ("a.b..:443", .badHost(.emptyLabel)),
        ("a*b.example:443", .badHost(.badCharacter("*"))),
        ("http://a.b:443", .notAuthorityForm),
        ("a.b:443/x", .notAuthorityForm),
        ("a$b.example:443", .badHost(.badCharacter("$"))),
    ])
    func refused(text: String, problem: Authority.Problem) {
        #expect(throws: problem) { try Authority.parse(text).get() }
    }

    @Test func labelAndNameLimits() {
        let label63 = String(repeating: "a", count: 63)
        #expect(throws: Never.self) { try Authority.parse("\(label63).example:443").get() }
        #expect(throws: Authority.Problem.badHost(.labelTooLong(label63 + "a"))) { try Authority.parse("\(label63)a.example:443").get() }
        let long = Array(repeating: "abcdefghi", count: 26).joined(separator: ".")  // 259 bytes
        #expect(throws: Authority.Problem.badHost(.tooLong)) { try Authority.parse("\(long):443").get() }
    }

    @Test func mappedIPv4UnmapsToTheIPv4Address() throws {
        let authority = try Authority.parse("[::ffff:10.0.0.5]:443").get()
        guard case .ip(let address) = authority.target else { Issue.record("not an IP"); return }
        #expect(address.unmapped == IPAddress("10.0.0.5"))
        #expect(CIDR("10.0.0.0/8")!.contains(address))
    }

    @Test(arguments: [
        ("10.0.0.0/8", "10.255.1.2", true), ("10.0.0.0/8", "11.0.0.1", false),
        ("2001:db8::/32", "2001:db8:ffff::1", true), ("2001:db8::/32", "2001:db9::1", false),
        ("10.0.0.5", "10.0.0.5", true), ("10.0.0.5", "10.0.0.6", false),
        ("::ffff:10.0.0.0/104", "10.1.2.3", true), ("10.0.0.0/8", "::ffff:10.1.2.3", true),
        ("0.0.0.0/0", "2001:db8::1", false), ("fe80::/10", "febf::1", true), ("fe80::/10", "fec0::1", false),
    ])
    func cidrContainment(range: String, address: String, contained: Bool) {
        #expect(CIDR(range)!.contains(IPAddress(address)!) == contained)
    }

    @Test(arguments: ["10.0.0.0/33", "10.0.0.0/08", "10.0.0/8", "2001:db8::/129", "x/8", "10.0.0.0/"])
    func badCIDRs(text: String) { #expect(CIDR(text) == nil) }
}

@Suite struct HostPatternTests {
    // should be pinned / should not be pinned
    @Test(arguments: [
        ("api.example.com", "api.example.com", true),
        ("api.example.com", "x.api.example.com", false),
        ("*.example.com", "x.example.com", true),
        ("*.example.com", "example.com", false),
        ("*.example.com", "y.x.example.com", false),
        ("**.example.com", "example.com", true),
        ("**.example.com", "x.example.com", true),
        ("**.example.com", "y.x.example.com", true),
        ("**.example.com", "badexample.com", false),
        ("*.example.com", "xexample.com", false),
        ("**.example.com", "example.com.evil.net", false),
        ("API.Example.com.", "api.example.com", true),
    ])
    func matching(pattern: String, name: String, matches: Bool) throws {
        let p = try HostPattern.parse(pattern).get()
        #expect(p.matches(name) == matches)
    }

    @Test(arguments: [
        ("*", HostPattern.Problem.bareWildcard), ("**", .bareWildcard),
        ("a.*.example.com", .misplacedWildcard), ("foo*.example.com", .misplacedWildcard),
        ("***.example.com", .misplacedWildcard), ("*.*.example.com", .misplacedWildcard),
        ("bad..name", .badName(.emptyLabel)),
    ])
    func badPatterns(pattern: String, problem: HostPattern.Problem) {
        #expect(throws: problem) { try HostPattern.parse(pattern).get() }
    }
}

@Suite struct PinTests {
    static let b64 = "kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="

    @Test(arguments: [
        "spki-sha256:\(b64)", "sha256/\(b64)", "sha256//\(b64)", "pin-sha256=\"\(b64)\"", "  spki-sha256:\(b64) ",
        "SPKI-SHA256:\(b64)",
    ])
    func aliasesNormaliseToOneCanonicalForm(text: String) throws {
        let pin = try Pin.parse(text).get()
        #expect(pin.kind == .spki)
        #expect(pin.description == "spki-sha256:\(Self.b64)")
    }

    @Test func certPinsAcceptHexWithOrWithoutColonsAndBase64() throws {
        let hex = "DF:6F:F7:2F:E9:11:65:21:26:8F:6F:2D:D4:96:6F:51:DF:47:98:83:FE:70:37:B3:9F:75:91:6A:C3:04:9D:1A"
        let a = try Pin.parse("cert-sha256:\(hex)").get()
        let b = try Pin.parse("cert-sha256:\(hex.replacingOccurrences(of: ":", with: "").lowercased())").get()
        let c = try Pin.parse("cert-sha256:\(Base64.encode(a.digest))").get()
        #expect(a == b && b == c)
        #expect(a.kind == .cert)
        #expect(a.colonHex == hex)
    }

    @Test(arguments: [
        ("sha1/AAAAAAAAAAAAAAAAAAAAAAAAAAA=", Pin.Problem.sha1),
        ("pin-sha1=\"AAAAAAAAAAAAAAAAAAAAAAAAAAA=\"", .sha1),
        ("spki-sha1:AAAAAAAAAAAAAAAAAAAAAAAAAAA=", .sha1),
        ("spki-sha256:AAAA", .wrongLength(3)),
        ("spki-sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=", .wrongLength(62)),
        ("spki-sha256:not base64!", .badEncoding("not base64!")),
        ("spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZF=", .badEncoding("kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZF=")),
        ("md5/AAAA", .unknownForm("md5/AAAA")),
        ("kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=", .unknownForm("kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=")),
        ("cert-sha256:DF:6F", .wrongLength(2)),
    ])
    func refusedPins(text: String, problem: Pin.Problem) {
        #expect(throws: problem) { try Pin.parse(text).get() }
    }

    @Test(arguments: [[UInt8](), [0], [0, 1], [0, 1, 2], (0...255).map { UInt8($0) }] as [[UInt8]])
    func base64RoundTrips(bytes: [UInt8]) {
        #expect(Base64.decode(Base64.encode(bytes)) == bytes)
    }

    @Test func defaultPositions() throws {
        let spki = try Pin.parse("spki-sha256:\(Self.b64)").get()
        let cert = try Pin.parse("cert-sha256:\(Self.b64)").get()
        #expect(PinEntry(pin: spki).position == .any)
        #expect(PinEntry(pin: cert).position == .leaf)
        #expect(PinPosition.ca.allows(position: 1) && PinPosition.ca.allows(position: 3) && !PinPosition.ca.allows(position: 0))
        #expect(PinPosition.leaf.allows(position: 0) && !PinPosition.leaf.allows(position: 1))
    }

    @Test(arguments: [
        ("2027-06-30T00:00:00Z", 1814313600.0), ("2027-06-30T02:00:00+02:00", 1814313600.0),
        ("2026-12-01T18:00:00.5Z", 1796148000.0), ("2024-02-29T00:00:00Z", 1709164800.0),
    ])
    func rfc3339(text: String, seconds: Double) {
        #expect(RFC3339.parse(text)?.timeIntervalSince1970 == seconds)
    }

    @Test(arguments: ["2026-12-31", "2027-06-30T00:00:00", "2027-02-30T00:00:00Z", "2027-06-30 00:00:00Z", "tomorrow"])
    func rfc3339Refuses(text: String) { #expect(RFC3339.parse(text) == nil) }
}
