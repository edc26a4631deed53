import Foundation
import Yams

/// Walks the composed YAML node tree against pinproxy's schema, collecting errors.
final class PolicyReader {
    let file: String
    let baseDirectory: String
    let pinFiles: PinFileLoader?
    private(set) var errors: [PolicyError] = []
    /// The line of each `resolve:` entry (for `check`'s warnings).
    private(set) var resolveLines: [String: Int] = [:]

    init(file: String, baseDirectory: String, pinFiles: PinFileLoader?) {
        self.file = file
        self.baseDirectory = baseDirectory
        self.pinFiles = pinFiles
    }

    // MARK: errors

    func fail(_ node: Node?, _ message: String) {
        let mark = node?.mark
        errors.append(PolicyError(file: file, line: mark?.line ?? 0, column: mark?.column ?? 0, message: Printable.oneLine(message)))
    }

    func yamlError(_ error: any Error) -> PolicyError {
        let raw = rawYamlError(error)
        return PolicyError(file: raw.file, line: raw.line, column: raw.column, message: Printable.oneLine(raw.message))
    }

    private func rawYamlError(_ error: any Error) -> PolicyError {
        guard let yaml = error as? YamlError else {
            return PolicyError(file: file, line: 0, column: 0, message: "not valid YAML: \(error)")
        }
        switch yaml {
        case .duplicatedKeysInMapping(let duplicates, let context):
            let names = duplicates.map { "'\($0)'" }.joined(separator: ", ")
            return PolicyError(file: file, line: context.mark.line, column: context.mark.column,
                               message: "duplicate key \(names): each key may appear once in a mapping")
        case .scanner(_, let problem, let mark, let text), .parser(_, let problem, let mark, let text), .composer(_, let problem, let mark, let text):
            if let tab = Self.indentingTab(near: mark, in: text) {
                return PolicyError(file: file, line: tab.line, column: tab.column, message: "tabs are not allowed for indentation in YAML; indent with spaces")
            }
            if Self.character(at: mark, in: text) == "\t" {  // after '-' or ':', where YAML wants a space
                return PolicyError(file: file, line: mark.line, column: mark.column, message: "tabs are not allowed here in YAML; use spaces")
            }
            if problem.contains("undefined alias") {
                return PolicyError(file: file, line: mark.line, column: mark.column, message: "YAML aliases are not allowed in a policy file")
            }
            return PolicyError(file: file, line: mark.line, column: mark.column, message: "not valid YAML: \(problem)")
        case .reader(let problem, let offset, _, _):
            return PolicyError(file: file, line: 0, column: offset ?? 0, message: "not valid YAML text: \(problem)")
        default:
            return PolicyError(file: file, line: 0, column: 0, message: "not valid YAML: \(yaml)")
        }
    }

    /// libyaml says "found character that cannot start any token" (or worse) about a tab that
    /// indents a line; this finds such a tab on the line of the error or the one before it.
    static func indentingTab(near mark: Mark, in text: String) -> (line: Int, column: Int)? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        for number in [mark.line, mark.line - 1] where number >= 1 && number <= lines.count {
            let indentation = lines[number - 1].prefix { $0 == " " || $0 == "\t" }
            if let tab = indentation.firstIndex(of: "\t") {
                return (number, indentation.distance(from: indentation.startIndex, to: tab) + 1)
            }
        }
        return nil
    }

    /// The character at a 1-based line and column of `text`, if there is one.
    static func character(at mark: Mark, in text: String) -> Character? {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard mark.line >= 1, mark.line <= lines.count, mark.column >= 1 else { return nil }
        let line = lines[mark.line - 1]
        guard mark.column <= line.count else { return nil }
        return line[line.index(line.startIndex, offsetBy: mark.column - 1)]
    }

    // MARK: the document

    func readPolicy(_ root: Node) -> Policy? {
        guard rejectAliases(root, notBefore: nil), let top = fields(root, "the policy file", allowed: .top) else { return nil }
        if let v = top["version"] {
            if string(v, "version") != "1" { fail(v, "version must be 1 (the only policy format so far)") }
        } else {
            fail(root, "the policy file needs 'version: 1'")
        }
        let proxy = top["proxy"].map(readProxy) ?? ProxySettings()
        guard let defaultsNode = top["defaults"] else {
            fail(root, "the policy file needs a 'defaults:' section with 'unpinned: allow' or 'unpinned: deny' (what to do for hosts no rule matches)")
            return nil
        }
        let defaults = readDefaults(defaultsNode)
        if let defaults, defaults.requireKeylog, proxy.keylog == nil,
           let n = defaultsNode.mapping?.first(where: { $0.key.scalar?.string == "require_keylog" })?.value {
            fail(n, "defaults.require_keylog is true, but there is no proxy.keylog for clients to write their key lines to; add proxy.keylog: { path: /run/pinproxy/keylog }")
        }
        let pinsets = top["pinsets"].map(readPinsets) ?? [:]
        let deny = top["deny"].map(readDeny) ?? []
        let rules = top["rules"].map { readRules($0, proxy: proxy, defaults: defaults, pinsets: pinsets) } ?? []
        let debug = top["debug"].flatMap(readDebug)
        let resolve = top["resolve"].map(readResolve) ?? [:]
        guard let defaults else { return nil }
        if proxy.ct.logList == nil {
            if defaults.ct != .off, let n = defaultsNode.mapping?.first(where: { $0.key.scalar?.string == "ct" })?.value {
                fail(n, "defaults.ct is \(defaults.ct.rawValue), but there is no proxy.ct_log_list to judge SCTs by; add proxy.ct_log_list: /var/lib/pinproxy/ct/log_list.json (see pinproxy ct-list)")
            }
        }
        var policy = Policy(source: file, proxy: proxy, defaults: defaults, resolve: resolve, deny: deny, pinsets: pinsets,
                            rules: rules, debug: debug)
        policy.resolveLines = resolveLines
        return policy
    }

    // MARK: debug, resolve

    func readDebug(_ node: Node) -> DebugBypass? {
        guard let f = fields(node, "debug", allowed: .debug) else { return nil }
        guard let u = f["until"] else {
            fail(node, "debug needs 'until:' (an RFC 3339 time): a bypass always ends")
            return nil
        }
        let until = date(u, "debug.until")
        var hosts: [HostPattern] = []
        if let h = f["hosts"] {
            for item in list(h, "debug.hosts", example: "[\"**.example.com\"]") ?? [] {
                guard let text = string(item, "a debug host pattern") else { continue }
                switch HostPattern.parse(text) {
                case .success(let p): hosts.append(p)
                case .failure(let problem): fail(item, "bad debug host pattern '\(text)': \(problem.message)")
                }
            }
            if hosts.isEmpty, h.sequence?.isEmpty ?? false { fail(h, "debug.hosts is empty; list the host patterns to bypass") }
        } else {
            fail(node, "debug needs 'hosts:' (host patterns to bypass); there is no bypass-everything")
        }
        guard let until else { return nil }
        return DebugBypass(until: until, hosts: hosts, line: node.mark?.line ?? 0)
    }

    func readResolve(_ node: Node) -> [String: [IPAddress]] {
        guard case .mapping(let mapping) = node else {
            fail(node, "resolve must be a mapping of host names to addresses")
            return [:]
        }
        var map: [String: [IPAddress]] = [:]
        for (key, value) in mapping {
            guard let raw = key.scalar?.string else { continue }
            guard case .success(let name) = HostName.normalize(raw) else {
                fail(key, "'\(raw)' in resolve is not a host name")
                continue
            }
            let items: [Node] = value.sequence.map(Array.init) ?? [value]
            var addresses: [IPAddress] = []
            for item in items {
                guard let text = string(item, "the address for \(name)") else { continue }
                guard let address = IPAddress(text) else {
                    fail(item, "'\(text)' is not an IP address (resolve maps names to addresses)")
                    continue
                }
                addresses.append(address)
            }
            if map[name] != nil { fail(key, "'\(name)' appears twice in resolve (after normalising case and the trailing dot)") }
            map[name] = addresses
            resolveLines[name] = key.mark?.line ?? 0
        }
        return map
    }
}
