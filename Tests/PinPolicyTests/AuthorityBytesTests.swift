import Foundation
import Testing
@testable import PinPolicy

/// `Authority.parse`, `HostName.normalize` and the dotted quad are read as bytes (every CONNECT
/// passes through them; the character-by-character reading was a third of an unpinned CONNECT's
/// instructions). They must answer exactly as the character reading did: the previous code is kept
/// here and both read the same texts — hand-picked edge cases and many generated ones.
@Suite struct AuthorityBytesTests {
    @Test func sameAnswersAsTheCharacterReading() {
        for text in Self.corpus() {
            #expect(Authority.parse(text) == Reference.parse(text), "Authority.parse(\(text.debugDescription))")
            #expect(HostName.normalize(text) == Reference.normalize(text), "HostName.normalize(\(text.debugDescription))")
            #expect(IPAddress.parseDottedQuad(text.utf8) == Reference.parseDottedQuad(Substring(text)), "parseDottedQuad(\(text.debugDescription))")
        }
    }

    @Test func portsAsTheCharacterReading() {
        for text in ["443", "0", "00", "65535", "65536", "99999", "123456", "", "+1", "-1", "١٢", "4\r\n", "44 3", "1e3", "0443", String(repeating: "9", count: 40)] {
            #expect(Authority.parsePort(Substring(text)) == Reference.parsePort(Substring(text)), "parsePort(\(text.debugDescription))")
        }
    }

    /// A bad character is named whole, as a `Character` (CR LF is one).
    @Test func badCharacterIsTheWholeCharacter() {
        #expect(HostName.normalize("a\r\nb") == .failure(.badCharacter("\r\n")))
        #expect(HostName.normalize("A*B") == .failure(.badCharacter("*")))
    }

    static func corpus() -> [String] {
        var texts = [
            "", ":", "::", "a:1", "A.B.:443", "a..b:443", ".a:1", "a.:1", "a.b.:1", "[::1]:443", "[::1]", "[::1]x", "[::1]:", "[]:1",
            "[192.0.2.1]:1", "[fe80::1%eth0]:1", "[::ffff:1.2.3.4]:443", "1.2.3.4:443", "1.2.3.4", "01.2.3.4:1", "1.2.3.04:1",
            "256.1.1.1:1", "1.2.3:1", "1.2.3.4.5:1", "1..2.3:1", "0.0.0.0:1", "255.255.255.255:65535", "0x7f.0.0.1:1", "0x:1",
            "0xg:1", "a.0x1f:1", "a.0X1F:1", "a.123:1", "123:1", "a.b-c_d:1", "a*b:1", "a$b:1", "user@h:1", "h:1/x", "h:1?x", "h#:1",
            "h%2e:1", "bücher.example:443", "a b:1", "a\tb:1", "h:0", "h:00", "h:65536", "h:+1", "h:1:2", "2001:db8::1:443",
            "xn--bcher-kva.example:443", "A" + String(repeating: "b", count: 63) + ".c:1", String(repeating: "b", count: 64) + ".c:1",
            String(repeating: "a.", count: 126) + "b:1", String(repeating: "a.", count: 127) + "b:1", "a\r\nb:1", "a\u{7f}b:1",
            "\u{0}:1", "HOST.Example.COM", "host", "-a.b", "a-.b", "_a.b", "1.2.3.4.", "1.2.3.4.:1", "localhost:8080",
        ]
        // Generated: texts over an alphabet that reaches every branch, from a fixed seed.
        var generator = SplitMix(seed: 21)
        let alphabet = Array("aZ09.:-_[]%@/x*1 255.\u{e9}\r\n")
        for _ in 0..<4000 {
            let length = Int(generator.next() % 14)
            texts.append(String((0..<length).map { _ in alphabet[Int(generator.next() % UInt64(alphabet.count))] }))
        }
        return texts
    }

    struct SplitMix {
        var state: UInt64
        init(seed: UInt64) { state = seed }
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    /// The character reading as it was (commit caa767a), for comparison only.
    enum Reference {
        static func parse(_ text: String) -> Result<Authority, Authority.Problem> {
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
            if hostPart.contains(":") { return .failure(.badIPv6(String(hostPart))) }
            let port: UInt16
            switch parsePort(portPart) {
            case .success(let p): port = p
            case .failure(let e): return .failure(e)
            }
            return parseHost(String(hostPart)).map { Authority(target: $0, port: port) }
        }

        static func parseHost(_ text: String) -> Result<Target, Authority.Problem> {
            if let v4 = parseDottedQuad(Substring(text)) { return .success(.ip(IPAddress(bytes: v4)!)) }
            var bare = text
            if bare.hasPrefix("["), bare.hasSuffix("]") { bare = String(bare.dropFirst().dropLast()) }
            if bare.contains(":") {
                if bare.contains("%") { return .failure(.zoneID) }
                guard let address = IPAddress(bare), !address.isIPv4 else { return .failure(.badIPv6(bare)) }
                return .success(.ip(address))
            }
            return normalize(text).map { Target.name($0) }.mapError { .badHost($0) }
        }

        static func parsePort(_ text: Substring) -> Result<UInt16, Authority.Problem> {
            guard !text.isEmpty else { return .failure(.missingPort) }
            guard text.count <= 5, text.allSatisfy({ $0.isASCII && $0.isNumber }), text.first != "0",
                  let value = Int(text), (1...65535).contains(value) else {
                return .failure(.badPort(String(text)))
            }
            return .success(UInt16(value))
        }

        static func normalize(_ text: String) -> Result<String, HostName.Problem> {
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
            if let last = labels.last, isNumericLabel(last) { return .failure(.numericIPv4Form) }
            return .success(name)
        }

        static func isNumericLabel(_ label: Substring) -> Bool {
            if label.allSatisfy({ $0.isNumber }) { return true }
            if label.hasPrefix("0x") { return label.dropFirst(2).allSatisfy(\.isHexDigit) }
            return false
        }

        static func parseDottedQuad(_ text: Substring) -> [UInt8]? {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            guard parts.count == 4 else { return nil }
            var out: [UInt8] = []
            for part in parts {
                guard (1...3).contains(part.utf8.count), part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
                if part.utf8.count > 1 && part.utf8.first == 0x30 { return nil }
                guard let value = Int(part), value <= 255 else { return nil }
                out.append(UInt8(value))
            }
            return out
        }
    }
}

/// The texts a log line writes for every CONNECT (dates, IPv4 addresses) are written as bytes; they
/// must read exactly as the string interpolation they replace did.
@Suite struct LogTextBytesTests {
    @Test func datesAsBefore() {
        var generator = AuthorityBytesTests.SplitMix(seed: 19)
        var dates = [0, 1, 59, 86399, 86400, 951_782_400, 1_709_164_800, 253_402_300_799, 253_402_300_800, -1, -86401, -62_167_219_200, -62_167_219_201]
            .map { Date(timeIntervalSince1970: Double($0)) }
        for _ in 0..<3000 { dates.append(Date(timeIntervalSince1970: Double(Int64(generator.next() % 8_000_000_000) - 1_000_000_000) + 0.75)) }
        for date in dates {
            #expect(RFC3339.format(date) == Self.format(date), "\(date.timeIntervalSince1970)")
        }
    }

    @Test func addressesAsBefore() {
        for bytes in [[0, 0, 0, 0], [127, 0, 0, 1], [255, 255, 255, 255], [10, 9, 99, 100], [192, 0, 2, 1], [1, 10, 100, 200]] as [[UInt8]] {
            #expect(IPAddress(bytes: bytes)!.description == bytes.map(String.init).joined(separator: "."))
        }
        for byte in 0...255 {
            #expect(IPAddress(bytes: [UInt8(byte), 0, UInt8(255 - byte), 7])!.description == "\(byte).0.\(255 - byte).7")
        }
    }

    /// RFC3339.format as it was (commit caa767a).
    static func format(_ date: Date) -> String {
        let total = Int(date.timeIntervalSince1970.rounded(.down))
        let days = total >= 0 ? total / 86400 : (total - 86399) / 86400
        let secs = total - days * 86400
        let z = days + 719468
        let era = (z >= 0 ? z : z - 146096) / 146097
        let doe = z - era * 146097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func pad(_ v: Int, _ n: Int) -> String { String(repeating: "0", count: max(0, n - String(v).count)) + String(v) }
        return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(secs / 3600, 2)):\(pad(secs / 60 % 60, 2)):\(pad(secs % 60, 2))Z"
    }
}
