// libFuzzer harness for the policy loader: arbitrary text as a policy file, through Yams and
// PinPolicy's schema reader. Built by Fuzz/run.sh with `swiftc -sanitize=fuzzer,address` together
// with PinPolicy's sources (one module) and Yams, compiled by the script as a static library.
//
// Besides "does not crash or hang" (run.sh gives each input a time limit), it checks what a user of
// `pinproxy check` relies on:
// - a refused file has at least one error, each at a position inside the file, each one line of text
//   (`file:line:column: message`, one per line, is what editors and CI parse);
// - an accepted file has no mapping with the same key twice (a silent overwrite would drop a rule's
//   pins or a setting without a word), and its rules and pins name lines inside the file;
// - an accepted policy can be linted.

import Foundation
import Yams

/// A fixed "now" for lint, so that a finding reproduces.
let lintTime = Date(timeIntervalSince1970: 1_800_000_000)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard let text = String(validating: UnsafeBufferPointer(start: data, count: size), as: UTF8.self) else { return 0 }
    // Lines as YAML counts them (CR, LF and CRLF breaks); one more for a mark just past the end.
    let lineCount = text.unicodeScalars.reduce(1) { $0 + ($1 == "\n" || $1 == "\r" ? 1 : 0) } + 1
    do {
        let policy = try PolicyLoader.load(yaml: text, source: "fuzz.yaml")
        for rule in policy.rules {
            check((1...lineCount).contains(rule.line), "rule at line \(rule.line) outside the file")
            for entry in rule.pins { check((1...lineCount).contains(entry.line), "pin at line \(entry.line) outside the file") }
        }
        _ = policy.lint(at: lintTime)
        if let root = try? Yams.compose(yaml: text) { checkUniqueKeys(root) }
    } catch {
        check(!error.errors.isEmpty, "refused without an error")
        for e in error.errors {
            check(e.line >= 0 && e.line <= lineCount && e.column >= 0, "error outside the file: \(e)")
            check(!e.message.isEmpty, "error without a message at \(e.line):\(e.column)")
            check(!e.description.unicodeScalars.contains { $0.properties.generalCategory == .control || $0 == "\u{2028}" || $0 == "\u{2029}" },
                         "error message is not one line of plain text: \(e.description.debugDescription)")
        }
    }
    return 0
}

/// `precondition` drops its message in -O builds; a finding should say what it is.
func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError(message()) }
}

/// An accepted policy must not contain a mapping in which two keys read as the same name.
func checkUniqueKeys(_ node: Node) {
    switch node {
    case .mapping(let mapping):
        var seen: Set<String> = []
        for (key, value) in mapping {
            if let name = key.scalar?.string {
                check(seen.insert(name).inserted, "accepted a mapping with key '\(name)' twice")
            }
            checkUniqueKeys(value)
        }
    case .sequence(let sequence):
        for item in sequence { checkUniqueKeys(item) }
    default:
        break
    }
}
