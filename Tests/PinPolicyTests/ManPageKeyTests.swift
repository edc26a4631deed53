import Foundation
import PinPolicy
import Testing

/// pinproxy.yaml(5) documents every key the loader accepts: each is a tag (`.TP`, then
/// `.B proxy.keylog.wait`) in docs/man/pinproxy.yaml.5. A key added to a PolicySection table
/// without its entry fails here; so does an entry for a key the loader would reject.
@Suite struct ManPageKeyTests {
    static let page = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("docs/man/pinproxy.yaml.5")

    /// The tags of the page's `.TP` and `.TQ` items written in bold, with groff's `\-` as `-`.
    static func tags() throws -> Set<String> {
        let lines = try String(contentsOf: page, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false)
        var tags = Set<String>()
        for (index, line) in lines.enumerated().dropLast() where line == ".TP" || line == ".TQ" {
            let next = lines[index + 1]
            guard next.hasPrefix(".B ") else { continue }
            tags.insert(next.dropFirst(3).replacingOccurrences(of: "\\-", with: "-"))
        }
        return tags
    }

    @Test func everyKeyTheLoaderAcceptsHasItsEntry() throws {
        let documented = try Self.tags()
        let accepted = PolicySection.allCases.flatMap(\.paths)
        #expect(accepted.count > 50)
        let missing = accepted.filter { !documented.contains($0) }
        #expect(missing.isEmpty, "keys the loader accepts but pinproxy.yaml(5) does not document: \(missing)")
    }

    @Test func everyKeyEntryIsAKeyTheLoaderAccepts() throws {
        let accepted = Set(PolicySection.allCases.flatMap(\.paths))
        let prefixes = PolicySection.allCases.map(\.rawValue).filter { !$0.isEmpty }.map { $0 + "." }
        let keyLike = try Self.tags().filter { tag in prefixes.contains { tag.hasPrefix($0) } }
        #expect(!keyLike.isEmpty)
        let stale = keyLike.subtracting(accepted).sorted()
        #expect(stale.isEmpty, "pinproxy.yaml(5) documents keys the loader rejects: \(stale)")
    }

    /// The sections are the loader's: a key outside them is an error naming the section's keys.
    @Test(arguments: [("proxy:\n  colour: red\n", "proxy"), ("proxy:\n  keylog: { colour: red }\n", "proxy.keylog"),
                      ("debug: { until: \"2030-01-01T00:00:00Z\", hosts: [a.test], colour: red }\n", "debug")])
    func anUnknownKeyNamesTheSectionsKeys(yaml: String, section: String) throws {
        let result = load("version: 1\ndefaults: { unpinned: allow }\n" + yaml)
        let keys = try #require(PolicySection(rawValue: section)).keys.joined(separator: ", ")
        guard case .failure(let error) = result else { Issue.record("loaded"); return }
        #expect(error.errors.map(\.message).contains { $0.hasPrefix("unknown key 'colour'") && $0.hasSuffix("known keys: \(keys)") })
    }
}
