import Testing
import Yams
@testable import PinPolicy

/// The loader composes without resolving plain keys' tags (DuplicateKeys.composeAsDefault); where a
/// key's tag decides whether two keys are one, it must decide as Yams' default resolver does.
@Suite struct ComposeAsDefaultTests {
    static let texts = [
        "host: a\nhost: b\n",
        "at: 1\n\"at\": 2\n",
        "1: a\n\"1\": b\n",
        "1: a\n!!int 1: b\n",
        "1: a\n!!str 1: b\n",
        "yes: a\n\"yes\": b\n",
        "null: a\n~: b\n",
        "a: [ {1: x, !!int 1: y} ]\n",
        "a: {x: 1, \"x\": 2}\n",
        "? [1]\n: a\n? [\"1\"]\n: b\n",
        "? {k: 1}\n: a\n? {k: !!int 1}\n: b\n",
        "rules:\n  - {host: a.example, pins: [{pin: x, at: leaf}]}\n",
        "a: b: c\n",
        "",
    ]

    @Test(arguments: texts) func composesAsTheDefaultResolver(_ text: String) {
        #expect(outcome { try DuplicateKeys.composeAsDefault(text) } == outcome { try Yams.compose(yaml: text) })
    }

    /// Whether there was a document, or the error (where it is and what it says). The tags of keys
    /// differ, by design: they are resolved only where they decide.
    private func outcome(_ compose: () throws -> Node?) -> String {
        do {
            return try compose() == nil ? "empty" : "composed"
        } catch {
            return "error: \(error)"
        }
    }
}
