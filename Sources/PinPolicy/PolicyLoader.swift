import Foundation
import Yams

/// Loads a policy file strictly (docs/policy.md, "Policy file"): every unknown key, duplicate key, bad
/// value, alias or merge key is an error with file, line and column. All errors are collected, so
/// one run of `pinproxy check` shows them all.
public enum PolicyLoader {
    /// The most a policy file may be; a bigger one is a mistake (a log file or a disk image named
    /// as the policy), and reading it whole would cost the proxy that much memory on every SIGHUP.
    public static let maxFileBytes = 16 << 20

    /// Reads and loads a policy file. A file that cannot be read is one error at line 0, column 0,
    /// saying why in plain words: `cannot read PATH: No such file or directory (errno 2)`.
    public static func load(file path: String, pinFiles: PinFileLoader?) throws(PolicyLoadError) -> Policy {
        let bytes: [UInt8]
        do {
            bytes = try PlainFile.contents(of: path, limit: maxFileBytes)
        } catch {
            throw PolicyLoadError([PolicyError(file: path, line: 0, column: 0, message: error.description)])
        }
        // A UTF-8 byte order mark (some Windows editors write one) is dropped, as Foundation did.
        let body = bytes.starts(with: [0xef, 0xbb, 0xbf]) ? bytes.dropFirst(3) : bytes[...]
        guard let text = String(validating: body, as: UTF8.self) else {
            throw PolicyLoadError([PolicyError(file: path, line: 0, column: 0, message: "cannot read \(path): it is not UTF-8 text")])
        }
        let directory = (path as NSString).deletingLastPathComponent
        return try load(yaml: text, source: path, baseDirectory: directory.isEmpty ? "." : directory, pinFiles: pinFiles)
    }

    public static func load(yaml: String, source: String, baseDirectory: String = ".",
                            pinFiles: PinFileLoader? = nil) throws(PolicyLoadError) -> Policy {
        let reader = PolicyReader(file: source, baseDirectory: baseDirectory, pinFiles: pinFiles)
        if let deep = NestingScan.firstTooDeep(yaml) {
            throw PolicyLoadError([PolicyError(file: source, line: deep.line, column: deep.column,
                                               message: "the YAML nests deeper than \(NestingScan.limit) levels here; a policy needs about 5, so this is refused before it is parsed")])
        }
        // Each duplicate key is reported where it is, and the load goes on to the file's other errors.
        var duplicates = DuplicateKeys(yaml: yaml, file: source)
        let root: Node?
        do {
            root = try duplicates.compose()
        } catch {
            throw PolicyLoadError(duplicates.errors + [reader.yamlError(error)])
        }
        guard let root else {
            throw PolicyLoadError([PolicyError(file: source, line: 1, column: 1, message: "the policy file is empty; it needs at least 'version: 1' and 'defaults: {unpinned: allow|deny}'")])
        }
        let policy = reader.readPolicy(root)
        let errors = duplicates.errors + reader.errors.filter { !duplicates.mentionsPlaceholder($0.message) }
        if let policy, errors.isEmpty { return policy }
        throw PolicyLoadError(errors.sorted { ($0.line, $0.column) < ($1.line, $1.column) })
    }
}

/// A mapping's values by key, after its keys were checked against a schema.
struct Fields {
    let node: Node
    private(set) var values: [String: Node] = [:]

    init(node: Node) { self.node = node }

    mutating func set(_ name: String, value: Node) { values[name] = value }

    subscript(_ name: String) -> Node? { values[name] }
}

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
        errors.append(PolicyError(file: file, line: mark?.line ?? 0, column: mark?.column ?? 0, message: Self.oneLine(message)))
    }

    /// Messages quote the file's text; `pinproxy check` prints one error per line, so a quoted key
    /// or value must not break the line or move the terminal's cursor (fuzzing found keys with
    /// newlines and tabs printed raw). Control characters, line separators and bidirectional
    /// overrides are written as `\u{…}` escapes (`\n`, `\t`, `\r` by name).
    static func oneLine(_ message: String) -> String {
        var out = ""
        for scalar in message.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\t": out += "\\t"
            case "\r": out += "\\r"
            case _ where scalar.properties.generalCategory == .control || scalar.properties.generalCategory == .lineSeparator
                || scalar.properties.generalCategory == .paragraphSeparator || (0x202a...0x202e).contains(scalar.value)
                || (0x2066...0x2069).contains(scalar.value):
                out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    func yamlError(_ error: any Error) -> PolicyError {
        let raw = rawYamlError(error)
        return PolicyError(file: raw.file, line: raw.line, column: raw.column, message: Self.oneLine(raw.message))
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

    // MARK: shape

    /// Yams resolves aliases silently; an aliased node keeps the position of its anchor, which lies
    /// before the place it is used. So any node that starts before its parent key (or previous
    /// sibling) was an alias; the error names the key (or list) that used it. Anchors without
    /// aliases do no harm and pass.
    func rejectAliases(_ node: Node, notBefore floor: Mark?, usedAt site: Node? = nil) -> Bool {
        if let floor, let mark = node.mark, (mark.line, mark.column) < (floor.line, floor.column) {
            let key = (site?.scalar?.string).map { " (the value of '\($0)')" } ?? ""
            fail(site ?? node, "YAML aliases (*name) are not allowed in a policy file\(key); write the value out")
            return false
        }
        switch node {
        case .mapping(let mapping):
            var previous = node.mark
            for (key, value) in mapping {
                if key.scalar?.string == "<<" {
                    fail(key, "YAML merge keys (<<) are not allowed in a policy file; write the keys out")
                    return false
                }
                guard rejectAliases(key, notBefore: previous, usedAt: node),
                      rejectAliases(value, notBefore: key.mark, usedAt: key) else { return false }
                previous = value.mark
            }
        case .sequence(let sequence):
            var previous = node.mark
            for item in sequence {
                guard rejectAliases(item, notBefore: previous, usedAt: node) else { return false }
                previous = item.mark
            }
        default:
            break
        }
        return true
    }

    func fields(_ node: Node, _ what: String, allowed section: PolicySection) -> Fields? {
        let allowed = section.keys
        guard case .mapping(let mapping) = node else {
            fail(node, "\(what) must be a mapping (key: value)")
            return nil
        }
        var fields = Fields(node: node)
        for (key, value) in mapping {
            guard let name = key.scalar?.string else {
                fail(key, "keys in \(what) must be plain names")
                continue
            }
            if name.hasPrefix("\t") {  // a tab that the YAML parser took into a key: the same cause, the same words
                fail(key, "tabs are not allowed for indentation in YAML; indent with spaces")
                continue
            }
            guard allowed.contains(name) else {
                fail(key, "unknown key '\(name)' in \(what); known keys: \(allowed.joined(separator: ", "))")
                continue
            }
            fields.set(name, value: value)
        }
        return fields
    }

    func isNull(_ node: Node) -> Bool {
        guard case .scalar(let s) = node, s.style == .plain else { return false }
        return ["", "~", "null", "Null", "NULL"].contains(s.string)
    }

    func string(_ node: Node, _ what: String) -> String? {
        guard case .scalar(let s) = node else {
            fail(node, "\(what) must be a single value, not a list or mapping")
            return nil
        }
        if isNull(node) {
            fail(node, "\(what) needs a value")
            return nil
        }
        return s.string
    }

    func choice<T: RawRepresentable>(_ node: Node, _ what: String, _: T.Type, options: [T]) -> T? where T.RawValue == String {
        guard let text = string(node, what) else { return nil }
        guard let value = T(rawValue: text), options.contains(where: { $0.rawValue == text }) else {
            fail(node, "\(what) must be one of \(options.map(\.rawValue).joined(separator: ", ")), not '\(text)'")
            return nil
        }
        return value
    }

    func integer(_ node: Node, _ what: String, in range: ClosedRange<Int>) -> Int? {
        guard let text = string(node, what) else { return nil }
        guard !text.isEmpty, text.allSatisfy({ $0.isASCII && $0.isNumber }), !(text.count > 1 && text.hasPrefix("0")),
              let value = Int(text), range.contains(value) else {
            fail(node, "\(what) must be a whole number from \(range.lowerBound) to \(range.upperBound), not '\(text)'")
            return nil
        }
        return value
    }

    /// `500ms`, `10s`, `5m`, `1h`, or `0`.
    func duration(_ node: Node, _ what: String) -> Double? {
        guard let text = string(node, what) else { return nil }
        if text == "0" { return 0 }
        let units: [(String, Double)] = [("ms", 0.001), ("s", 1), ("m", 60), ("h", 3600)]
        for (suffix, scale) in units where text.hasSuffix(suffix) {
            let digits = text.dropLast(suffix.count)
            if !digits.isEmpty, digits.allSatisfy({ $0.isASCII && $0.isNumber }), let n = Int(digits), n <= 1_000_000 {
                return Double(n) * scale
            }
        }
        fail(node, "\(what) must be a duration such as 500ms, 10s, 5m or 1h, not '\(text)'")
        return nil
    }

    func boolean(_ node: Node, _ what: String) -> Bool? {
        guard let text = string(node, what) else { return nil }
        switch text {
        case "true": return true
        case "false": return false
        default:
            fail(node, "\(what) must be true or false, not '\(text)'")
            return nil
        }
    }

    func date(_ node: Node, _ what: String) -> Date? {
        guard let text = string(node, what) else { return nil }
        guard let date = RFC3339.parse(text) else {
            fail(node, "\(what) must be an RFC 3339 time with a zone, such as \"2027-06-30T00:00:00Z\", not '\(text)'")
            return nil
        }
        return date
    }

    func list(_ node: Node, _ what: String, example: String) -> [Node]? {
        guard case .sequence(let sequence) = node else {
            fail(node, "\(what) must be a list, e.g. \(example)")
            return nil
        }
        return Array(sequence)
    }

    func ports(_ node: Node, _ what: String) -> [UInt16]? {
        guard let items = list(node, what, example: "[443, 8443]") else { return nil }
        var ports: [UInt16] = []
        for item in items {
            guard let n = integer(item, "a port in \(what)", in: 1...65535) else { continue }
            if ports.contains(UInt16(n)) { fail(item, "port \(n) is listed twice in \(what)") }
            ports.append(UInt16(n))
        }
        if items.isEmpty { fail(node, "\(what) must not be empty") }
        return ports
    }

    /// A `file:` path, relative to the policy file's directory. `.` and empty components are dropped
    /// (they only make messages odd: `./../pki/x.pem`); `..` is kept, since a symlink makes it mean
    /// more than the text says.
    func path(_ text: String) -> String {
        guard !text.hasPrefix("/") else { return text }
        let joined = baseDirectory + "/" + text
        let parts = joined.split(separator: "/").filter { $0 != "." }
        return (joined.hasPrefix("/") ? "/" : "") + (parts.isEmpty ? "." : parts.joined(separator: "/"))
    }

    // MARK: the document

    static let topKeys = ["version", "proxy", "defaults", "resolve", "deny", "pinsets", "rules", "debug"]

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
        var policy = Policy(source: file, proxy: proxy, defaults: defaults, resolve: resolve, deny: deny, pinsets: pinsets,
                            rules: rules, debug: debug)
        policy.resolveLines = resolveLines
        return policy
    }

    // MARK: proxy

    static let proxyKeys = ["listen", "allow_clients", "allowed_ports", "deny_destinations", "dns", "max_tunnels",
                            "max_request_bytes", "header_timeout", "dns_timeout", "connect_timeout",
                            "connect_total_timeout", "probe_timeout", "idle_timeout", "verify_cache_ttl",
                            "drain_timeout", "log_format", "stats_interval", "keylog",
                            "upstream_proxy", "upstream_proxy_credentials_file", "relay", "metrics_listen", "plain_http",
                            "allowed_plain_ports", "workers"]

    func readProxy(_ node: Node) -> ProxySettings {
        var settings = ProxySettings()
        guard let f = fields(node, "proxy", allowed: .proxy) else { return settings }
        if let n = f["listen"], let items = list(n, "proxy.listen", example: "[\"127.0.0.1:3128\", \"[::1]:3128\"]") {
            var addresses: [SocketAddress] = []
            for item in items {
                guard let text = string(item, "a proxy.listen address") else { continue }
                guard let address = SocketAddress.parse(text) else {
                    fail(item, "'\(text)' is not a listen address; write IP:PORT, e.g. 127.0.0.1:3128 or [::1]:3128")
                    continue
                }
                addresses.append(address)
            }
            if items.isEmpty { fail(n, "proxy.listen must name at least one address") }
            settings.listen = addresses
        }
        if let n = f["allow_clients"], let set = addressSet(n, "proxy.allow_clients") {
            settings.allowClients = set
            settings.allowClientsExplicit = true
        }
        if let n = f["allowed_ports"], let ports = ports(n, "proxy.allowed_ports") { settings.allowedPorts = ports }
        if let n = f["deny_destinations"], let set = addressSet(n, "proxy.deny_destinations") { settings.denyDestinations = set }
        if let n = f["dns"] { settings.dns = readDNS(n) }
        if let n = f["max_tunnels"], let v = integer(n, "proxy.max_tunnels", in: 1...1_000_000) { settings.maxTunnels = v }
        if let n = f["workers"], let v = integer(n, "proxy.workers", in: 1...64) { settings.workers = v }
        if let n = f["max_request_bytes"], let v = integer(n, "proxy.max_request_bytes", in: 256...1_048_576) { settings.maxRequestBytes = v }
        let durations: [(String, WritableKeyPath<ProxySettings, Double>)] = [
            ("header_timeout", \.headerTimeout), ("dns_timeout", \.dnsTimeout), ("connect_timeout", \.connectTimeout),
            ("connect_total_timeout", \.connectTotalTimeout), ("probe_timeout", \.probeTimeout),
            ("idle_timeout", \.idleTimeout), ("verify_cache_ttl", \.verifyCacheTTL), ("drain_timeout", \.drainTimeout),
            ("stats_interval", \.statsInterval),
        ]
        for (key, path) in durations {
            guard let n = f[key], let seconds = duration(n, "proxy.\(key)") else { continue }
            if seconds == 0 && !["verify_cache_ttl", "stats_interval", "drain_timeout"].contains(key) {
                fail(n, "proxy.\(key) must be more than 0")
                continue
            }
            settings[keyPath: path] = seconds
        }
        if let n = f["log_format"], let v = choice(n, "proxy.log_format", LogFormat.self, options: [.text, .json]) { settings.logFormat = v }
        if let n = f["keylog"] { settings.keylog = readKeyLog(n) }
        settings.upstreamProxy = readUpstreamProxy(f["upstream_proxy"], credentials: f["upstream_proxy_credentials_file"])
        if let n = f["relay"], let v = choice(n, "proxy.relay", RelayMethod.self, options: [.copy, .splice]) { settings.relay = v }
        if let n = f["metrics_listen"] { settings.metricsListen = readMetricsListen(n) }
        if let n = f["plain_http"], let v = choice(n, "proxy.plain_http", PlainHTTPMode.self, options: [.forward, .refuse]) { settings.plainHTTP = v }
        if let n = f["allowed_plain_ports"], let ports = ports(n, "proxy.allowed_plain_ports") { settings.allowedPlainPorts = ports }
        for address in settings.listen where !AddressSet.parse(["loopback"])!.contains(address.ip) && !settings.allowClientsExplicit {
            fail(f["listen"], "listening on \(address) (beyond loopback) needs an explicit proxy.allow_clients list, so that pinproxy is never an open proxy by accident")
        }
        return settings
    }

    /// `proxy.metrics_listen: IP:PORT`, a loopback address only: the metrics say how much traffic
    /// goes where, which is nobody's business beyond this machine (and the listener has no client list).
    func readMetricsListen(_ node: Node) -> SocketAddress? {
        guard let text = string(node, "proxy.metrics_listen") else { return nil }
        guard let address = SocketAddress.parse(text) else {
            fail(node, "'\(text)' is not a metrics address; write IP:PORT on loopback, e.g. 127.0.0.1:9464 or [::1]:9464")
            return nil
        }
        guard AddressSet.parse(["loopback"])!.contains(address.ip) else {
            fail(node, "proxy.metrics_listen must be a loopback address (127.0.0.0/8 or ::1), not \(address): the metrics are served to this machine only; scrape them through an SSH tunnel or a local agent")
            return nil
        }
        return address
    }

    /// `proxy.keylog: { path: PATH, wait: DURATION, mode: "0622" }`. The path's directory must be on
    /// tmpfs or ramfs: the file holds TLS secrets, which must never reach persistent storage.
    func readKeyLog(_ node: Node) -> KeyLogSettings? {
        guard let f = fields(node, "proxy.keylog", allowed: .keylog) else { return nil }
        guard let p = f["path"] else {
            fail(node, "proxy.keylog needs 'path:', the file clients name in SSLKEYLOGFILE, e.g. /run/pinproxy/keylog")
            return nil
        }
        guard let path = string(p, "proxy.keylog.path") else { return nil }
        guard path.hasPrefix("/"), path.count > 1, !path.hasSuffix("/") else {
            fail(p, "proxy.keylog.path must be an absolute file path, such as /run/pinproxy/keylog, not '\(path)'")
            return nil
        }
        var settings = KeyLogSettings(path: path, line: node.mark?.line ?? 0)
        let directory = String(path[..<path.lastIndex(of: "/")!])
        switch FileSystemKind.of(directory.isEmpty ? "/" : directory) {
        case .memory:
            break
        case .other(let type):
            fail(p, "proxy.keylog.path: '\(directory.isEmpty ? "/" : directory)' is not on tmpfs or ramfs (file system type 0x\(String(type, radix: 16))); the key log holds TLS secrets, which must never reach a disk: use a directory under /run or /dev/shm")
        case .unknown(let code):
            fail(p, "proxy.keylog.path: cannot check the directory '\(directory)': \(String(cString: strerror(code))) (errno \(code)); it must exist and be on tmpfs")
        }
        if let n = f["wait"], let seconds = duration(n, "proxy.keylog.wait") {
            if seconds <= 0 || seconds > 10 {
                fail(n, "proxy.keylog.wait must be more than 0 and at most 10s (a pinned TLS 1.3 tunnel holds the server's flight that long)")
            } else {
                settings.wait = seconds
            }
        }
        if let n = f["mode"], let text = string(n, "proxy.keylog.mode") {
            if let mode = UInt32(text, radix: 8), text.count >= 3, text.count <= 4, mode <= 0o777 {
                if mode & 0o400 == 0 {
                    fail(n, "proxy.keylog.mode \(text) does not let pinproxy's own user read the file")
                } else if mode & 0o044 != 0 {
                    fail(n, "proxy.keylog.mode \(text) lets others read the file, and with it the TLS secrets of every client that writes it; give read to the owner only (e.g. 0622 or 0620)")
                } else {
                    settings.mode = mode
                }
            } else {
                fail(n, "proxy.keylog.mode must be octal permission bits such as \"0622\" or \"0620\", not '\(text)'")
            }
        }
        return settings
    }

    /// `upstream_proxy: http://IP:PORT` and the file its credentials are read from (one line
    /// `user:password`): credentials never stand in the policy file itself.
    func readUpstreamProxy(_ node: Node?, credentials: Node?) -> UpstreamProxy? {
        guard let node else {
            if let credentials { fail(credentials, "proxy.upstream_proxy_credentials_file needs proxy.upstream_proxy") }
            return nil
        }
        guard let text = string(node, "proxy.upstream_proxy") else { return nil }
        guard text.hasPrefix("http://") else {
            fail(node, "proxy.upstream_proxy must be http://IP:PORT (the parent is spoken to in HTTP CONNECT), not '\(text)'")
            return nil
        }
        var rest = String(text.dropFirst(7))
        if rest.hasSuffix("/") { rest.removeLast() }
        if rest.contains("@") {
            fail(node, "proxy.upstream_proxy must not carry credentials; put 'user:password' in a file named by proxy.upstream_proxy_credentials_file")
            return nil
        }
        guard let address = SocketAddress.parse(rest), address.port != 0 else {
            fail(node, "'\(text)' is not http://IP:PORT, e.g. http://10.0.0.1:3128 or http://[2001:db8::1]:3128 (a name is not accepted: pinproxy would have to resolve it before every CONNECT)")
            return nil
        }
        guard let credentials else { return UpstreamProxy(address: address) }
        guard let file = string(credentials, "proxy.upstream_proxy_credentials_file").map(path) else { return nil }
        let bytes: [UInt8]
        do {
            bytes = try PlainFile.contents(of: file, limit: 4096)
        } catch {
            fail(credentials, "proxy.upstream_proxy_credentials_file: \(error)")
            return nil
        }
        var line = bytes
        while let last = line.last, last == 0x0a || last == 0x0d { line.removeLast() }
        guard line.contains(0x3a), line.first != 0x3a, !line.contains(where: { $0 < 0x20 || $0 == 0x7f }) else {
            // The message never quotes the file: it holds a password.
            fail(credentials, "proxy.upstream_proxy_credentials_file \(file) must hold one line 'user:password'")
            return nil
        }
        return UpstreamProxy(address: address, authorization: "Basic " + Base64.encode(line))
    }

    func addressSet(_ node: Node, _ what: String) -> AddressSet? {
        guard let items = list(node, what, example: "[loopback, \"10.0.0.0/8\"]") else { return nil }
        var entries: [AddressSet.Entry] = []
        for item in items {
            guard let text = string(item, "an entry of \(what)") else { continue }
            guard let entry = AddressSet.entry(text) else {
                fail(item, "'\(text)' is neither an address class (\(AddressSet.classes.keys.sorted().joined(separator: ", "))) nor a CIDR such as 10.0.0.0/8")
                continue
            }
            entries.append(entry)
        }
        return AddressSet(entries: entries)
    }

    func readDNS(_ node: Node) -> DNSSettings {
        var dns = DNSSettings()
        guard let f = fields(node, "proxy.dns", allowed: .dns) else { return dns }
        if let n = f["nameservers"] {
            if case .scalar = n {
                if string(n, "proxy.dns.nameservers") != "system" {
                    fail(n, "proxy.dns.nameservers must be 'system' or a list such as [\"127.0.0.1:53\"]")
                }
            } else if let items = list(n, "proxy.dns.nameservers", example: "[\"127.0.0.1:53\"]") {
                var servers: [SocketAddress] = []
                for item in items {
                    guard let text = string(item, "a nameserver") else { continue }
                    guard let address = SocketAddress.parse(text, defaultPort: 53), address.port != 0 else {
                        fail(item, "'\(text)' is not a nameserver address; write IP or IP:PORT")
                        continue
                    }
                    servers.append(address)
                }
                dns.nameservers = .list(servers)
            }
        }
        if let n = f["hosts_file"], let text = string(n, "proxy.dns.hosts_file") {
            dns.hostsFile = text == "none" ? nil : path(text)
        }
        return dns
    }

    // MARK: defaults

    func readDefaults(_ node: Node) -> PolicyDefaults? {
        guard let f = fields(node, "defaults", allowed: .defaults) else { return nil }
        guard let u = f["unpinned"] else {
            fail(node, "defaults.unpinned is required: 'allow' (tunnel hosts no rule matches, unverified) or 'deny' (refuse them)")
            return nil
        }
        guard let unpinned = choice(u, "defaults.unpinned", UnpinnedDecision.self, options: [.allow, .deny]) else { return nil }
        var defaults = PolicyDefaults(unpinned: unpinned)
        if let n = f["trust"], let trust = trust(n, "defaults.trust") { defaults.trust = trust }
        if let n = f["require_backup"],
           let v = choice(n, "defaults.require_backup", BackupRequirement.self, options: [.warn, .error, .off]) {
            defaults.requireBackup = v
        }
        if let n = f["require_keylog"], let v = boolean(n, "defaults.require_keylog") { defaults.requireKeylog = v }
        return defaults
    }

    func trust(_ node: Node, _ what: String) -> Trust? {
        guard let text = string(node, what) else { return nil }
        switch text {
        case "system": return .system
        case "pins-only": return .pinsOnly
        default:
            if text.hasPrefix("ca-file:"), text.count > 8 {
                let file = path(String(text.dropFirst(8)))
                guard FileManager.default.isReadableFile(atPath: file) else {
                    fail(node, "\(what): the CA file '\(file)' cannot be read")
                    return nil
                }
                return .caFile(path: file)
            }
            fail(node, "\(what) must be system, pins-only or ca-file:/path/to/bundle.pem, not '\(text)'")
            return nil
        }
    }

    // MARK: pins

    static let pinKeys = ["pin", "file", "kind", "at", "label", "backup"]
    static let dnsKeys = ["nameservers", "hosts_file"]
    static let keylogKeys = ["path", "wait", "mode"]
    static let defaultsKeys = ["unpinned", "trust", "require_backup", "require_keylog"]
    static let debugKeys = ["until", "hosts"]

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

    // MARK: rules

    static let ruleKeys = ["host", "ip", "ports", "pins", "pinset", "mode", "trust", "expires", "on_expiry", "require_keylog"]

    func readRules(_ node: Node, proxy: ProxySettings, defaults: PolicyDefaults?, pinsets: [String: [PinEntry]]) -> [Rule] {
        guard let items = list(node, "rules", example: "[{ host: api.example.com, pins: [...] }]") else { return [] }
        var rules: [Rule] = []
        for item in items {
            guard let rule = readRule(item, proxy: proxy, defaults: defaults, pinsets: pinsets) else { continue }
            if let other = rules.first(where: { $0.pattern == rule.pattern && portsOverlap($0.ports, rule.ports) }) {
                fail(item, "this rule for '\(rule.pattern)' overlaps the rule at line \(other.line) (same pattern, and their ports overlap); exactly one rule must apply, so give them disjoint 'ports:' or merge them")
                continue
            }
            rules.append(rule)
        }
        return rules
    }

    /// Two rules with the same pattern clash when neither has `ports` or their `ports`
    /// intersect. One with `ports` beside one without is a port split (the one with `ports` wins).
    private func portsOverlap(_ a: [UInt16]?, _ b: [UInt16]?) -> Bool {
        switch (a, b) {
        case (nil, nil): return true
        case (let a?, let b?): return !Set(a).isDisjoint(with: b)
        default: return false
        }
    }

    func readRule(_ node: Node, proxy: ProxySettings, defaults: PolicyDefaults?, pinsets: [String: [PinEntry]]) -> Rule? {
        guard let f = fields(node, "a rule", allowed: .rule) else { return nil }
        let line = node.mark?.line ?? 0
        var pattern: RulePattern?
        switch (f["host"], f["ip"]) {
        case (let h?, nil):
            guard let text = string(h, "host") else { break }
            if IPAddress(text) != nil || CIDR(text) != nil {
                fail(h, "'\(text)' is an address; write 'ip: \(text)' for IP-literal targets")
                break
            }
            switch HostPattern.parse(text) {
            case .success(let p): pattern = .host(p)
            case .failure(let problem): fail(h, "bad host pattern '\(text)': \(problem.message)")
            }
        case (nil, let i?):
            guard let text = string(i, "ip") else { break }
            if let cidr = CIDR(text) { pattern = .ip(cidr) } else { fail(i, "'\(text)' is not an IP address or CIDR such as 10.0.0.0/8 or 2001:db8::/32") }
        case (nil, nil):
            fail(node, "a rule needs 'host:' (a name pattern) or 'ip:' (an address or CIDR)")
        case (_?, _?):
            fail(node, "a rule has either 'host:' or 'ip:', not both")
        }

        var ports: [UInt16]?
        if let n = f["ports"], let list = self.ports(n, "ports") {
            for (port, item) in zip(list, n.sequence.map(Array.init) ?? []) where !proxy.allowedPorts.contains(port) {
                fail(item, "port \(port) is not in proxy.allowed_ports (\(proxy.allowedPorts.map(String.init).joined(separator: ", "))); CONNECTs to it are refused before any rule applies")
            }
            ports = list
        }
        let errorsBeforePins = errors.count
        var pins = f["pins"].map { pinEntries($0, "pins") } ?? []
        var pinsetName: String?
        if let n = f["pinset"], let name = string(n, "pinset") {
            if let set = pinsets[name] {
                pins = set + pins
                pinsetName = name
            } else {
                let known = pinsets.keys.sorted()
                fail(n, "unknown pinset '\(name)'" + (known.isEmpty ? "; there is no pinsets: section" : "; known pinsets: \(known.joined(separator: ", "))"))
            }
        }
        let mode = f["mode"].flatMap { choice($0, "mode", RuleMode.self, options: [.enforce, .report, .unpinned]) } ?? .enforce
        let trust = f["trust"].flatMap { self.trust($0, "trust") } ?? defaults?.trust ?? .system
        let expires = f["expires"].flatMap { date($0, "expires") }
        let onExpiry = f["on_expiry"].flatMap { choice($0, "on_expiry", ExpiryBehaviour.self, options: [.enforce, .report]) }
        let requireKeylog = f["require_keylog"].flatMap { boolean($0, "require_keylog") } ?? defaults?.requireKeylog ?? false

        let patternText = pattern?.description ?? "?"
        switch mode {
        case .unpinned:
            if !pins.isEmpty { fail(f["pins"] ?? f["pinset"], "the rule for '\(patternText)' is mode: unpinned, so its pins would never be checked; remove them or use mode: report") }
            if f["trust"] != nil { fail(f["trust"], "the rule for '\(patternText)' is mode: unpinned: no chain is checked, so 'trust' has no effect") }
            if f["require_keylog"] != nil { fail(f["require_keylog"], "the rule for '\(patternText)' is mode: unpinned: no chain is checked, so 'require_keylog' has no effect") }
        case .enforce, .report:
            if pins.isEmpty && errors.count == errorsBeforePins {
                fail(node, "the rule for '\(patternText)' has no pins; an \(mode.rawValue) rule needs at least one (pins: or pinset:), or write mode: unpinned to exclude the name")
            }
            if mode == .enforce, defaults?.requireBackup == .error, Set(pins.map(\.pin)).count < 2, !pins.isEmpty {
                fail(node, "the rule for '\(patternText)' has \(Set(pins.map(\.pin)).count) distinct pin; defaults.require_backup is 'error', so add a backup pin (a key kept offline, or the issuing CA)")
            }
        }
        if expires != nil, onExpiry == nil, f["expires"] != nil {
            fail(f["expires"], "'expires' needs 'on_expiry: enforce' or 'on_expiry: report' to say what happens after it")
        }
        if expires == nil, f["on_expiry"] != nil, f["expires"] == nil {
            fail(f["on_expiry"], "'on_expiry' only means something with 'expires'")
        }
        if expires != nil, mode != .enforce {
            fail(f["expires"], "'expires' applies to enforced rules only (this rule is mode: \(mode.rawValue))")
        }
        if let n = f["require_keylog"], requireKeylog, proxy.keylog == nil {
            fail(n, "the rule for '\(patternText)' has require_keylog: true, but there is no proxy.keylog for clients to write their key lines to; add proxy.keylog: { path: /run/pinproxy/keylog }")
        }
        guard let pattern else { return nil }
        let effective = mode == .unpinned ? false : requireKeylog
        return Rule(pattern: pattern, ports: ports, mode: mode, trust: trust, pins: pins, pinset: pinsetName,
                    expires: expires, onExpiry: onExpiry, requireKeylog: effective, line: line)
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

/// How deep a YAML text nests its collections, found by a scan of the text before Yams composes it.
/// Yams 6.2.2 compares mapping keys recursively when it checks for duplicates, which costs time
/// exponential in the nesting; a policy needs about 5 levels, so anything deeper than `limit` is
/// refused here, before Yams sees it.
///
/// The scan counts what YAML nests: flow brackets (`[`, `{`) outside quotes and comments, block
/// indentation levels, and the `- ` / `? ` markers that open a collection on a line. A level whose
/// first line starts with `- ` is itself the sequence; a `- ` line at the indentation of a mapping
/// opens a sequence inside it. Block scalars (`|`, `>`) and quoted text are skipped. For block and
/// flow styles this is the nesting depth; for exotic text (a multi-line plain scalar indented
/// deeper) it can only count more, never less.
struct NestingScan {
    static let limit = 16

    /// The first line (1-based) and column at which the nesting exceeds `limit`, if any.
    static func firstTooDeep(_ text: String) -> (line: Int, column: Int)? {
        // Each block indentation level, and what its first line made it: a sequence (`- `), a
        // mapping, or neither (a flow collection or a scalar standing alone, counted by its brackets).
        enum Kind { case sequence, mapping, other }
        var levels: [(indent: Int, kind: Kind)] = []
        var blockDepth: Int { levels.count(where: { $0.kind != .other }) }
        var flowDepth = 0
        var quote: Character?               // inside a quoted scalar that may span lines
        var blockScalarParent: Int?         // indentation of the line that opened a block scalar
        var lineNumber = 0
        for line in text.split(omittingEmptySubsequences: false, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            lineNumber += 1
            let chars = Array(line)
            let indent = chars.prefix { $0 == " " }.count
            let blank = chars.dropFirst(indent).allSatisfy { $0 == " " || $0 == "\t" }
            if let parent = blockScalarParent {
                if blank || indent > parent { continue }
                blockScalarParent = nil
            }
            var position = indent
            var depth = blockDepth          // the block collections around this line's content
            if quote == nil && flowDepth == 0 {
                if blank || chars[indent] == "#" { continue }
                if indent == 0 && (chars.starts(with: Array("---")) || chars.starts(with: Array("...")) || chars[0] == "%") { levels = []; continue }
                while let last = levels.last, last.indent > indent { levels.removeLast() }
                var markers = 0
                while position + 1 < chars.count, chars[position] == "-" || chars[position] == "?", chars[position + 1] == " " {
                    markers += 1
                    position += 2
                    while position < chars.count, chars[position] == " " { position += 1 }
                }
                if levels.last?.indent != indent {
                    let standsAlone = position < chars.count && (chars[position] == "[" || chars[position] == "{" || !isMappingEntry(chars[position...]))
                    levels.append((indent, markers > 0 ? .sequence : standsAlone ? .other : .mapping))
                    depth = blockDepth + max(markers - 1, 0)
                } else {
                    depth = blockDepth + (levels.last!.kind == .sequence ? max(markers - 1, 0) : markers)
                }
                if depth > limit { return (lineNumber, indent + 1) }
            }
            var previous: Character = " "
            while position < chars.count {
                let c = chars[position]
                if let open = quote {
                    if c == open {
                        if open == "'", position + 1 < chars.count, chars[position + 1] == "'" { position += 1 } else { quote = nil }
                    } else if open == "\"", c == "\\" {
                        position += 1
                    }
                } else if c == "#" && (previous == " " || previous == "\t") {
                    break
                } else if c == "\"" || c == "'" {
                    if previous == " " || previous == "\t" || "[{,:-?".contains(previous) || position == indent { quote = c }
                } else if c == "[" || c == "{" {
                    flowDepth += 1
                    if depth + flowDepth > limit { return (lineNumber, position + 1) }
                } else if c == "]" || c == "}" {
                    flowDepth = max(flowDepth - 1, 0)
                }
                previous = c
                position += 1
            }
            // A block scalar header (`key: |`, `- >-`) ends the line: what follows, indented more, is text.
            if quote == nil, flowDepth == 0 {
                let content = String(chars[..<min(position, chars.count)]).trimmingCharacters(in: .whitespaces)
                if let last = content.split(separator: " ").last, let first = last.first, first == "|" || first == ">",
                   last.dropFirst().allSatisfy({ $0 == "+" || $0 == "-" || $0.isNumber }) {
                    blockScalarParent = indent
                }
            }
        }
        return nil
    }

    /// Whether a line's content (after any `- ` markers) is `key: …` or `key:`, roughly: a colon
    /// followed by a space or the end, before any comment. A quoted key counts too. Saying yes
    /// when unsure only counts a level more.
    private static func isMappingEntry(_ content: ArraySlice<Character>) -> Bool {
        var previous: Character = " "
        var index = content.startIndex
        while index < content.endIndex {
            let c = content[index]
            if c == "#" && previous == " " { return false }
            if c == ":" && (index + 1 == content.endIndex || content[index + 1] == " " || content[index + 1] == "\t") { return true }
            previous = c
            index += 1
        }
        return false
    }
}

/// Where in the file a key stands, and the keys the loader accepts there: `fields` checks every
/// mapping's keys against exactly one of these, so this is the whole list of keys a policy may use
/// (and what pinproxy.yaml(5) must document: ManPageTests). The raw value is the key's path prefix
/// as the man page writes it (`proxy.keylog.wait`, `rules[].host`, `pins[].at`).
public enum PolicySection: String, CaseIterable, Sendable {
    case top = "", proxy = "proxy", dns = "proxy.dns", keylog = "proxy.keylog", defaults = "defaults",
         rule = "rules[]", pinEntry = "pins[]", debug = "debug"

    public var keys: [String] {
        switch self {
        case .top: PolicyReader.topKeys
        case .proxy: PolicyReader.proxyKeys
        case .dns: PolicyReader.dnsKeys
        case .keylog: PolicyReader.keylogKeys
        case .defaults: PolicyReader.defaultsKeys
        case .rule: PolicyReader.ruleKeys
        case .pinEntry: PolicyReader.pinKeys
        case .debug: PolicyReader.debugKeys
        }
    }

    /// Each key with its path: `version`, `proxy.listen`, `rules[].host`.
    public var paths: [String] { keys.map { rawValue.isEmpty ? $0 : "\(rawValue).\($0)" } }
}
