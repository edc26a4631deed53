import Foundation
import Yams

/// Pins: `pinsets:`, `deny:` and the pin lists of rules.
extension PolicyReader {
    /// A list of pins: each a pin string, or a mapping with `pin` or `file`, and `at`, `label`, `kind`.
    func pinEntries(_ node: Node, _ what: String) -> [PinEntry] {
        guard let items = list(node, what, example: "[{ pin: \"spki-sha256:…\", at: leaf }]") else { return [] }
        var entries: [PinEntry] = []
        for item in items {
            if case .scalar = item {
                if let text = string(item, "a pin"), let pin = pin(text, item) { entries.append(PinEntry(pin: pin, line: item.mark?.line ?? 0)) }
                continue
            }
            guard let f = fields(item, "a pin entry", allowed: .pinEntry) else { continue }
            var pin: Pin?
            var file: String?
            var notAfter: Date?
            switch (f["pin"], f["file"]) {
            case (let p?, nil):
                if f["kind"] != nil { fail(f["kind"], "'kind' goes with 'file:'; a pin string says its kind itself") }
                if let text = string(p, "pin") { pin = self.pin(text, p) }
            case (nil, let fileNode?):
                var kind = Pin.Kind.spki
                if let k = f["kind"], let text = string(k, "kind") {
                    switch text {
                    case "spki": kind = .spki
                    case "cert": kind = .cert
                    default: fail(k, "kind must be spki or cert, not '\(text)'")
                    }
                }
                if let text = string(fileNode, "file") {
                    file = path(text)
                    if let loaded = loadPinFile(file!, kind: kind, node: fileNode) {
                        pin = loaded.pin
                        notAfter = loaded.notAfter
                    }
                }
            case (nil, nil):
                fail(item, "a pin entry needs 'pin:' or 'file:'")
            case (_?, _?):
                fail(item, "a pin entry has either 'pin:' or 'file:', not both")
            }
            var position: PinPosition?
            if let a = f["at"] { position = choice(a, "at", PinPosition.self, options: [.leaf, .ca, .any]) }
            let label = f["label"].flatMap { string($0, "label") }
            var acceptedBackup = false
            if let b = f["backup"], let value = boolean(b, "backup") {
                if value && position != .ca {
                    fail(b, "backup: true marks a CA pin (at: ca) as the rule's accepted backup; a leaf key not in use yet is a real backup without it")
                }
                acceptedBackup = value
            }
            if let pin {
                entries.append(PinEntry(pin: pin, position: position, label: label, line: item.mark?.line ?? 0, file: file,
                                        notAfter: notAfter, acceptedBackup: acceptedBackup))
            }
        }
        return entries
    }

    func pin(_ text: String, _ node: Node) -> Pin? {
        switch Pin.parse(text) {
        case .success(let pin): return pin
        case .failure(let problem):
            fail(node, problem.message)
            return nil
        }
    }

    func loadPinFile(_ file: String, kind: Pin.Kind, node: Node) -> PinFileContents? {
        guard let pinFiles else {
            fail(node, "file pins cannot be read here (no certificate reader was given)")
            return nil
        }
        do {
            return try pinFiles(file, kind)
        } catch {
            fail(node, "cannot use the pin file '\(file)': \(error)")
            return nil
        }
    }

    func readPinsets(_ node: Node) -> [String: [PinEntry]] {
        guard case .mapping(let mapping) = node else {
            fail(node, "pinsets must be a mapping of names to lists of pins")
            return [:]
        }
        var sets: [String: [PinEntry]] = [:]
        for (key, value) in mapping {
            guard let name = key.scalar?.string, !name.isEmpty,
                  name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) else {
                fail(key, "a pinset name uses letters, digits, '-' and '_' only")
                continue
            }
            // Yams tells `1:` (an int) from `"1":` (a string), so it lets both through; as names they clash.
            if sets[name] != nil { fail(key, "pinset '\(name)' is defined twice") }
            let entries = pinEntries(value, "pinset '\(name)'")
            if value.sequence?.isEmpty ?? false { fail(value, "pinset '\(name)' is empty") }
            sets[name] = entries
        }
        return sets
    }

    func readDeny(_ node: Node) -> [Pin] {
        pinEntries(node, "deny").map(\.pin)
    }
}
