import Testing
import Yams
@testable import PinPolicy

/// The loader composes with a resolver that answers `str` for most keys in one regular expression
/// (DuplicateKeys.keyResolver); it must resolve every plain scalar as Yams' default resolver does,
/// or two keys would be told apart (or taken as one) differently.
@Suite struct KeyResolverTests {
    static let texts = [
        "host", "pins", "pin", "at", "mode", "pinset", "allowed_ports", "_", "a", "é", "h0.d0.example", "*.w8.example",
        "yes", "Yes", "YES", "yES", "no", "No", "NO", "nO", "true", "True", "TRUE", "tRue", "false", "False", "FALSE",
        "on", "On", "ON", "oN", "off", "Off", "OFF", "null", "Null", "NULL", "nULL", "~", "", "<<", "=", "< <",
        "1", "01", "-1", "+1", "1_000", "0b101", "0o17", "017", "0x1f", "0xAF", "1:30", "190:20:30",
        "1.5", "1e3", "1.5e-3", ".5", "-.inf", ".Inf", ".NaN", ".nan", "nan", "inf", "1:30.5",
        "2026-11-29", "2026-11-29T05:03:08Z", "2026-11-29 05:03:08.5 +01:00", "2026-1-2t1:02:03",
        "a b", "a\tb", "10.0.0.15", "11.0.0.0/24", "2001:db8::/64", "spki-sha256:TUZV+k=", "a\u{0}", "1\u{0}",
    ]

    @Test(arguments: texts) func resolvesAsTheDefault(_ text: String) {
        let node = Node.scalar(.init(text))
        #expect(DuplicateKeys.keyResolver.resolveTag(of: node) == Resolver.default.resolveTag(of: node))
    }

    @Test func aWordAndItsQuotedSpellingAreOneKeyAnIntAndItsQuotedSpellingTwo() {
        #expect(throws: YamlError.self) { try Yams.compose(yaml: "at: 1\n\"at\": 2\n", DuplicateKeys.keyResolver) }
        #expect(throws: Never.self) { try Yams.compose(yaml: "yes: 1\n\"yes\": 2\n1: 3\n\"1\": 4\n", DuplicateKeys.keyResolver) }
    }
}
