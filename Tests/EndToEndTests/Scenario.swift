import Foundation
import Testing
import TestSupport

/// A policy for the tests: the given upstream ports allowed, loopback reachable (tests only talk
/// to 127.0.0.0/8), no DNS beyond what a test names, and both the good and the rogue root trusted
/// by the proxy the way a machine's store trusts every CA in it.
func policy(ports: [UInt16], rules: String = "rules: []", unpinned: String = "allow", resolve: String = "  api.pinproxy.test: 127.0.0.1",
            proxy: String = "", extra: String = "") -> String {
    """
    version: 1
    proxy:
      allowed_ports: [\(ports.map(String.init).joined(separator: ", "))]
      deny_destinations: [link-local, unspecified, multicast]
      dns: { nameservers: [], hosts_file: none }
    \(proxy.contains("stats_interval") ? "" : "  stats_interval: 0")
    \(proxy.split(separator: "\n").map { "  " + $0 }.joined(separator: "\n"))
    defaults:
      unpinned: \(unpinned)
      trust: "ca-file:\(Paths.fixture("both-roots.pem"))"
      require_backup: off
    resolve:
    \(resolve)
    \(rules)
    \(extra)
    """
}

/// One rule for api.pinproxy.test.
func apiRule(_ lines: String) -> String { "rules:\n  - host: api.pinproxy.test\n\(lines)" }

func pinsLine(_ pins: String...) -> String { "    pins: [\(pins.map { "\"\($0)\"" }.joined(separator: ", "))]" }

/// The status line and headers of a refusal, through a raw socket.
func connectResponse(proxy: UInt16, target: String, headers: String = "") throws -> String {
    try rawExchange(port: proxy, send: Array("CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n\(headers)\r\n".utf8))
}

func statusLine(_ response: String) -> String { String(response.split(separator: "\r\n").first ?? "") }

func header(_ name: String, in response: String) -> String? {
    response.components(separatedBy: "\r\n\r\n").first?.split(separator: "\r\n")
        .first { $0.lowercased().hasPrefix(name.lowercased() + ":") }
        .map { String($0.dropFirst(name.count + 1)).trimmingCharacters(in: .whitespaces) }
}
