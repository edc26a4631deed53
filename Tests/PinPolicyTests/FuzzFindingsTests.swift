import Testing
@testable import PinPolicy

/// Findings of the policy-loader fuzzer (Fuzz/PolicyLoaderFuzz.swift, `Fuzz/run.sh policy`), each
/// reduced to a small input written out here, and the nesting limit that keeps Yams' duplicate-key
/// check (exponential in the nesting) away from hostile files.
@Suite struct FuzzFindingsTests {
    /// Found: a quoted key with a newline was printed raw in "unknown key '…'", so one error took
    /// two lines of `pinproxy check` output (editors and CI read one error per line).
    @Test func aNewlineInAKeyIsEscapedInTheMessage() {
        expectError(header + "\"ru\\nles\": []\n", line: 4, column: 1, "unknown key 'ru\\nles' in the policy file")
    }

    /// Found: a value with a tab (`at: "leaf\t"`) was quoted raw in "must be one of …".
    @Test func aTabInAValueIsEscapedInTheMessage() {
        expectError(header + "rules:\n  - host: a.example.com\n    pins: [{pin: \"\(pinA)\", at: \"leaf\\t\"}]\n",
                    line: 6, column: 82, "at must be one of leaf, ca, any, not 'leaf\\t'")
    }

    /// Found (issue 16's long run, 52 k executions in): a duplicate key with a tab was quoted raw
    /// in "duplicate key '…'", the one message the first fix did not pass through `oneLine`.
    @Test func aTabInADuplicateKeyIsEscapedInTheMessage() {
        guard case .failure(let e) = load(header + "proxy:\n  \"allow_c\\tlients\": [127.0.0.1/8]\n  \"allow_c\\tlients\": [127.0.0.1/8]\n") else {
            Issue.record("loaded")
            return
        }
        // The key is unknown as well (an error of its own); the duplicate's is the one found.
        #expect(e.errors.contains { $0.line == 6 && $0.column == 3 && $0.message == "duplicate key 'allow_c\\tlients': each key may appear once in a mapping (first at line 5)" },
                "\(e.errors)")
        #expect(e.errors.allSatisfy { !$0.description.contains("\t") })
    }

    /// Found: a key with a bidirectional override (U+202E) reordered the rest of the error line
    /// on a terminal; it is written as an escape.
    @Test func aBidiOverrideInAKeyIsEscaped() {
        expectError(header + "\"ab\u{202E}cd\": 1\n", line: 4, column: 1, "unknown key 'ab\\u{202e}cd'")
    }

    /// Found: YAML tells the int key `1` from the string key `"1"`, so Yams' duplicate check let
    /// both through and the second pinset silently replaced the first.
    @Test func aPinsetNamedTwiceAsIntAndStringIsAnError() {
        expectError(header + "pinsets:\n  1: [\"\(pinA)\"]\n  \"1\": [\"\(pinB)\"]\n", line: 6, column: 3, "pinset '1' is defined twice")
    }

    /// Nesting beyond the limit is refused before Yams composes the file, naming the line that
    /// goes too deep; block style.
    @Test func blockMappingsNestedTooDeepAreRefusedAtTheirLine() {
        let deep = (0...NestingScan.limit).map { String(repeating: "  ", count: $0) + "k\($0):\n" }.joined()
        expectError(deep, line: 17, column: 33, "the YAML nests deeper than 16 levels")
    }

    /// Flow style: the column is the bracket that opens level 17.
    @Test func flowMappingsNestedTooDeepAreRefusedAtTheBracket() {
        let deep = String(repeating: "{a: ", count: 17) + "1" + String(repeating: "}", count: 17)
        expectError(deep, line: 1, column: 65, "the YAML nests deeper than 16 levels")
    }

    /// Compact sequences (`- - -`) count one level per marker.
    @Test func compactSequencesNestedTooDeepAreRefused() {
        expectError("a:\n" + String(repeating: "- ", count: 16) + "x\n", line: 2, column: 1, "the YAML nests deeper than 16 levels")
    }

    /// Exactly the limit passes the scan (the file then fails on its content, not its depth), and
    /// brackets in quoted text, comments and block scalars are not nesting.
    @Test func theLimitItselfAndTextThatLooksNestedPass() {
        let atLimit = (0..<NestingScan.limit).map { String(repeating: "  ", count: $0) + "k\($0):\n" }.joined()
        #expect(NestingScan.firstTooDeep(atLimit) == nil)
        #expect(NestingScan.firstTooDeep(String(repeating: "[", count: 16) + String(repeating: "]", count: 16)) == nil)
        #expect(NestingScan.firstTooDeep("a:\n" + String(repeating: "- ", count: 15) + "x\n") == nil)
        let brackets = String(repeating: "[{", count: 20)
        let text = header + """
            rules:
              - host: a.example.com   # \(brackets)
                pins:
                  - pin: "\(pinA)"
                    label: "\(brackets)"
                  - pin: "\(pinB)"
                    label: '\(brackets)'
                  - pin: "\(pinC)"
                    label: |
                      \(brackets)
                                                          deeply indented text is text
            """
        #expect(NestingScan.firstTooDeep(text) == nil)
        if case .failure(let e) = load(text) { Issue.record("\(e)") }
    }
}
