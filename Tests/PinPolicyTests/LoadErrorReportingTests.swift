import Foundation
import Testing
@testable import PinPolicy

/// How load errors read: a duplicate key at the duplicate, with the file's other errors; a tab in
/// the indentation named as such.
@Suite struct LoadErrorReportingTests {
    func errors(_ yaml: String) -> [String] {
        switch load(yaml) {
        case .success: return []
        case .failure(let e): return e.errors.map(\.description)
        }
    }

    @Test func aDuplicateKeyPointsAtTheDuplicateAndTheOtherErrorsAreStillReported() {
        #expect(errors("version: 1\ndefaults:\n  unpinned: allow\n  unpinned: deny\ncolour: blue\n") == [
            "test.yaml:4:3: duplicate key 'unpinned': each key may appear once in a mapping (first at line 3)",
            "test.yaml:5:1: unknown key 'colour' in the policy file; known keys: version, proxy, defaults, resolve, deny, pinsets, rules, debug",
        ])
    }

    @Test func everyDuplicateIsReportedInBlockAndFlowMappings() {
        let yaml = header + """
            rules:
              - host: a.example.com
                pins: ["\(pinA)", "\(pinB)"]
                mode: enforce
                pins: ["\(pinC)"]
              - host: b.example.com
                pins: [{ pin: "\(pinA)", at: leaf, at: ca }, "\(pinB)"]
                ports: [443, 70000]

            """
        #expect(errors(yaml) == [
            "test.yaml:8:5: duplicate key 'pins': each key may appear once in a mapping (first at line 6)",
            "test.yaml:10:89: duplicate key 'at': each key may appear once in a mapping (first at line 10)",
            "test.yaml:11:18: a port in ports must be a whole number from 1 to 65535, not '70000'",
        ])
    }

    @Test func aTabInTheIndentationIsNamed() {
        #expect(errors("version: 1\ndefaults:\n\tunpinned: allow\n") == [
            "test.yaml:3:1: tabs are not allowed for indentation in YAML; indent with spaces",
        ])
        #expect(errors(header + "rules:\n  - host: a.example.com\n  \tpins: [\"\(pinA)\"]\n") == [
            "test.yaml:6:3: tabs are not allowed for indentation in YAML; indent with spaces",
        ])
        // After '-' (or ':'), where YAML wants a space: libyaml's "cannot start any token" named.
        #expect(errors(header + "rules:\n  - host: a.example.com\n    pins:\n      -\t\"\(pinA)\"\n") == [
            "test.yaml:7:8: tabs are not allowed here in YAML; use spaces",
        ])
    }

    /// A pinned tunnel holds its mirror connections while it waits for its client's hello: the wait
    /// is bounded, and the bound itself too.
    @Test func theClientHelloTimeoutIsBounded() throws {
        #expect(errors("version: 1\nproxy:\n  client_hello_timeout: 61s\ndefaults:\n  unpinned: allow\n") == [
            "test.yaml:3:25: proxy.client_hello_timeout is at most 60s: a tunnel waiting for its client's first bytes holds its mirror connections",
        ])
        #expect(errors("version: 1\nproxy:\n  client_hello_timeout: 0s\ndefaults:\n  unpinned: allow\n") == [
            "test.yaml:3:25: proxy.client_hello_timeout must be more than 0",
        ])
        let policy = try load("version: 1\nproxy:\n  client_hello_timeout: 2500ms\ndefaults:\n  unpinned: allow\n").get()
        #expect(policy.proxy.clientHelloTimeout == 2.5)
        #expect(try load("version: 1\ndefaults:\n  unpinned: allow\n").get().proxy.clientHelloTimeout == 10)
    }
}
