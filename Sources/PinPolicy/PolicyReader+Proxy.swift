import Foundation
import Yams

/// The `proxy:` section (listen addresses, limits, timeouts, upstream proxy, DNS, metrics).
extension PolicyReader {
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
            ("client_hello_timeout", \.clientHelloTimeout),
            ("idle_timeout", \.idleTimeout), ("verify_cache_ttl", \.verifyCacheTTL), ("drain_timeout", \.drainTimeout),
            ("stats_interval", \.statsInterval),
        ]
        for (key, path) in durations {
            guard let n = f[key], let seconds = duration(n, "proxy.\(key)") else { continue }
            if seconds == 0 && !["verify_cache_ttl", "stats_interval", "drain_timeout"].contains(key) {
                fail(n, "proxy.\(key) must be more than 0")
                continue
            }
            if key == "client_hello_timeout" && seconds > 60 {
                fail(n, "proxy.client_hello_timeout is at most 60s: a tunnel waiting for its client's first bytes holds its mirror connections")
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
        settings.ct = readCT(f)
        if let n = f["control_socket"] { settings.controlSocket = readControlSocket(n) }
        readTransparent(f, into: &settings)  // transparent mode (PolicyReader+Transparent.swift)
        for address in settings.listen where !AddressSet.parse(["loopback"])!.contains(address.ip) && !settings.allowClientsExplicit {
            fail(f["listen"], "listening on \(address) (beyond loopback) needs an explicit proxy.allow_clients list, so that pinproxy is never an open proxy by accident")
        }
        return settings
    }

    /// `proxy.ct_log_list` and its companions. The list itself is read with the trust stores (the
    /// snapshot), where its signature can be checked; here only the keys' shapes.
    func readCT(_ f: Fields) -> CTSettings {
        var ct = CTSettings()
        if let n = f["ct_log_list"], let text = string(n, "proxy.ct_log_list") {
            ct.logList = path(text)
            ct.logListLine = n.mark?.line ?? 0
            ct.logListColumn = n.mark?.column ?? 0
        }
        if let n = f["ct_log_list_key"], let text = string(n, "proxy.ct_log_list_key") {
            if ct.logList == nil { fail(n, "proxy.ct_log_list_key verifies the signature of proxy.ct_log_list, which is not set") }
            ct.logListKey = path(text)
        }
        if let n = f["ct_list_max_age"], let seconds = duration(n, "proxy.ct_list_max_age") {
            if seconds < 86400 || seconds > 366 * 86400 {
                fail(n, "proxy.ct_list_max_age must be from 1d to 366d (Chrome's is 70d)")
            } else {
                ct.maxAge = seconds
            }
        }
        if let n = f["ct_stale_list"], let v = choice(n, "proxy.ct_stale_list", CTStaleList.self, options: [.report, .refuse]) { ct.staleList = v }
        return ct
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

    /// `proxy.control_socket: PATH`: absolute (the CLI and the service must agree on it whatever
    /// their working directories), short enough for a Unix socket address, and not a directory.
    /// Whether a file already there is a live socket, a stale one or something else is the start's
    /// business: the loader only reads.
    func readControlSocket(_ node: Node) -> String? {
        guard let text = string(node, "proxy.control_socket") else { return nil }
        guard text.hasPrefix("/") else {
            fail(node, "proxy.control_socket must be an absolute path, e.g. /run/pinproxy/control.sock, not '\(text)'")
            return nil
        }
        guard !text.hasSuffix("/") else {
            fail(node, "proxy.control_socket names a directory ('\(text)'); name the socket file in it, e.g. \(text)control.sock")
            return nil
        }
        guard text.utf8.count <= Self.maxSocketPathBytes else {
            fail(node, "proxy.control_socket is \(text.utf8.count) bytes long; a Unix socket path holds at most \(Self.maxSocketPathBytes)")
            return nil
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: text, isDirectory: &isDirectory), isDirectory.boolValue {
            fail(node, "proxy.control_socket \(text) is a directory; name the socket file in it, e.g. \(text)/control.sock")
            return nil
        }
        return text
    }

    /// `sun_path` is 108 bytes on Linux, the last one the terminating NUL.
    static let maxSocketPathBytes = 107

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
}
