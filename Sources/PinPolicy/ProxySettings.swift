/// A listening or nameserver address: IP and port (`127.0.0.1:3128`, `[::1]:3128`). Port 0 asks
/// the kernel for an ephemeral one (tests use it).
public struct SocketAddress: Hashable, Sendable, CustomStringConvertible {
    public let ip: IPAddress
    public let port: UInt16

    public init(ip: IPAddress, port: UInt16) {
        self.ip = ip
        self.port = port
    }

    public static func parse(_ text: String, defaultPort: UInt16? = nil) -> SocketAddress? {
        if let ip = IPAddress(text), let defaultPort { return SocketAddress(ip: ip, port: defaultPort) }
        if text.hasPrefix("["), text.hasSuffix("]"), let defaultPort, let ip = IPAddress(String(text.dropFirst().dropLast())) {
            return SocketAddress(ip: ip, port: defaultPort)
        }
        guard let colon = text.lastIndex(of: ":") else { return nil }
        var host = String(text[..<colon])
        let portText = text[text.index(after: colon)...]
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
        } else if host.contains(":") {
            return nil
        }
        guard let ip = IPAddress(host) else { return nil }
        if portText == "0" { return SocketAddress(ip: ip, port: 0) }
        guard case .success(let port) = Authority.parsePort(portText) else { return nil }
        return SocketAddress(ip: ip, port: port)
    }

    public var description: String { "\(ip.authorityText):\(port)" }
}

public enum LogFormat: String, Hashable, Sendable {
    case text, json
}

/// `proxy.relay`: how a tunnel's bytes move once the stream check is done with both sides.
public enum RelayMethod: String, Hashable, Sendable {
    /// `read`/`write` of up to 256 KiB through one buffer the loop shares.
    case copy
    /// `splice(2)` through a pipe per direction, taken from a small pool only while bytes are in flight.
    case splice
}

/// `proxy.dns`.
public struct DNSSettings: Hashable, Sendable {
    public enum Nameservers: Hashable, Sendable {
        /// From /etc/resolv.conf.
        case system
        case list([SocketAddress])
    }

    public var nameservers: Nameservers = .system
    /// nil: `none`.
    public var hostsFile: String? = "/etc/hosts"

    public init() {}
}

/// `proxy.upstream_proxy`: a parent HTTP proxy that every probe and tunnel CONNECTs through.
public struct UpstreamProxy: Hashable, Sendable, CustomStringConvertible {
    public let address: SocketAddress
    /// The `Proxy-Authorization` value (`Basic …`) made from the credentials file; never logged.
    public let authorization: String?

    public init(address: SocketAddress, authorization: String? = nil) {
        self.address = address
        self.authorization = authorization
    }

    /// The parent as the config names it, without its credentials.
    public var description: String { "http://\(address)" }
}

/// The `proxy:` section, with the defaults pinproxy.yaml(5) documents. Durations are in seconds.
public struct ProxySettings: Hashable, Sendable {
    public var listen: [SocketAddress] = [SocketAddress(ip: IPAddress("127.0.0.1")!, port: 3128)]
    public var allowClients: AddressSet = AddressSet.parse(["loopback"])!
    /// Whether `allow_clients` was written in the file (needed to listen beyond loopback).
    public var allowClientsExplicit = false
    public var allowedPorts: [UInt16] = [443]
    public var denyDestinations: AddressSet = AddressSet.parse(["loopback", "link-local", "unspecified", "multicast"])!
    public var dns = DNSSettings()
    public var maxTunnels = 1024
    public var maxRequestBytes = 8192
    public var headerTimeout: Double = 10
    public var dnsTimeout: Double = 5
    public var connectTimeout: Double = 3
    public var connectTotalTimeout: Double = 10
    public var probeTimeout: Double = 10
    /// How long a pinned tunnel waits, after its `200`, for the client's ClientHello: until then it
    /// holds the tunnel's and the mirrors' upstream connections for nothing.
    public var clientHelloTimeout: Double = 10
    public var idleTimeout: Double = 300
    public var verifyCacheTTL: Double = 60
    public var drainTimeout: Double = 15
    public var logFormat: LogFormat = .text
    public var statsInterval: Double = 60
    /// `keylog`: nil when absent (off).
    public var keylog: KeyLogSettings?
    /// nil: connect to upstreams directly.
    public var upstreamProxy: UpstreamProxy?
    public var relay: RelayMethod = .copy
    /// `metrics_listen`: where `GET /metrics` is served (loopback only); nil: off.
    public var metricsListen: SocketAddress?
    /// `plain_http`: forward absolute-form `http://` requests, or refuse them.
    public var plainHTTP: PlainHTTPMode = .forward
    /// `allowed_plain_ports`: the ports a plain-HTTP request may name.
    public var allowedPlainPorts: [UInt16] = [80]
    /// `workers`: how many worker loops (threads) carry the sessions; nil means one per online core.
    public var workers: Int?
    /// `ct_log_list`, `ct_log_list_key`, `ct_list_max_age`, `ct_stale_list`.
    public var ct = CTSettings()
    /// `control_socket`: the absolute path of the Unix socket where `pinproxy quarantine` lists and
    /// lifts quarantines; nil: no control socket.
    public var controlSocket: String?
    /// `transparent_listen`, `transparent_mark` (TransparentSettings.swift).
    public var transparent = TransparentSettings()

    public init() {}
}

/// `proxy.plain_http`.
public enum PlainHTTPMode: String, Hashable, Sendable {
    /// Forward plain-HTTP requests like an HTTP/1.1 proxy (never to a host a rule pins).
    case forward
    /// Answer every plain-HTTP request with a refusal.
    case refuse
}

public enum UnpinnedDecision: String, Hashable, Sendable {
    case allow, deny
}

public enum BackupRequirement: String, Hashable, Sendable {
    case warn, error, off
}

/// The `defaults:` section.
public struct PolicyDefaults: Hashable, Sendable {
    public var unpinned: UnpinnedDecision
    public var trust: Trust = .system
    public var requireBackup: BackupRequirement = .warn
    /// `require_keylog`: refuse a pinned TLS 1.3 tunnel whose client wrote no key line in time.
    public var requireKeylog = false
    /// `quarantine`: how long a host:port stays quarantined after a caught interception (0: off).
    public var quarantine: TimeInterval = Rule.defaultQuarantine
    /// `mirror_checks`: mirror connections per pinned tunnel (0: none).
    public var mirrorChecks = 1
    /// `ct`: Certificate Transparency for hosts whose rule does not say (and hosts no rule matches).
    public var ct: CTMode = .off

    public init(unpinned: UnpinnedDecision) { self.unpinned = unpinned }
}

/// The `debug:` section: inert unless the process runs with `--debug-bypass`.
public struct DebugBypass: Hashable, Sendable {
    public let until: Date
    public let hosts: [HostPattern]
    public let line: Int

    public init(until: Date, hosts: [HostPattern], line: Int = 0) {
        self.until = until
        self.hosts = hosts
        self.line = line
    }

    public func covers(_ target: Target) -> Bool {
        guard case .name(let name) = target else { return false }
        return hosts.contains { $0.matches(name) }
    }
}

import Foundation
