import Foundation
import PinPolicy

/// `pinproxy pin --from-log`: a ready rule for every host whose verified chain pinproxy logged,
/// most used first (trust on first use, over the window the log covers).
///
/// Only decision lines that carry a chain pinproxy verified and let through count: `tunnel_allowed`,
/// and `tunnel_bypassed` of a report-mode or expired rule, with `chain_verified=true` (an unpinned
/// tunnel is never probed, so it has no chain: put a host under a `mode: report` rule while
/// collecting). A chain the policy refused, or let through only by the debug bypass, is never
/// proposed: the policy says its keys are wrong; such hosts are named at the end.
struct FromLog {
    /// One chain as a rule pins it: the leaf key and the issuing CA's.
    struct Chain: Hashable {
        let leaf: Pin
        let leafSubject: String
        let leafIsAnchor: Bool
        let issuer: Pin?
        let issuerSubject: String?
    }

    struct Host {
        let name: String
        var connects = 0
        /// The rule's trust (`trust=` of the lines): a pasted rule needs it when it is not `system`.
        var trust: String?
        /// Every chain seen, in the order first seen, with how often; `latest` the last one.
        var chains: [(chain: Chain, count: Int)] = []
        var latest: Chain?
        /// Per port: the chains seen there (a host may serve another certificate on each port), and
        /// how many CONNECTs.
        var ports: [UInt16: (chains: Set<Chain>, latest: Chain, connects: Int)] = [:]

        /// A port that saw more than one chain: the chain changed during the window.
        var changed: Bool { ports.values.contains { $0.chains.count > 1 } }
    }

    private(set) var hosts: [String: Host] = [:]
    private(set) var used = 0
    /// Hosts with CONNECTs refused (or let through by the debug bypass) on a verified chain, and how many.
    private(set) var refused: [String: Int] = [:]

    mutating func add(_ record: [String: String]) {
        guard let event = record["event"], record["chain_verified"] == "true", let host = record["host"],
              let leaf = record["chain.0.spki"].flatMap({ try? Pin.parse($0).get() }) else { return }
        let letThrough = event == "tunnel_allowed" || (event == "tunnel_bypassed" && record["bypass"] != BypassBasis.debugBypass(until: .distantPast).code)
        guard letThrough else {
            if event == "tunnel_refused" || event == "tunnel_bypassed" { refused[host, default: 0] += 1 }
            return
        }
        let issuer = record["chain.1.spki"].flatMap { try? Pin.parse($0).get() }
        let chain = Chain(leaf: leaf, leafSubject: record["chain.0.subject"] ?? record["leaf_subject"] ?? "",
                          leafIsAnchor: record["chain.0.anchor"] == "true",
                          issuer: issuer, issuerSubject: issuer == nil ? nil : record["chain.1.subject"] ?? "")
        var entry = hosts[host] ?? Host(name: host)
        entry.connects += 1
        entry.trust = record["trust"] ?? entry.trust
        if let index = entry.chains.firstIndex(where: { $0.chain == chain }) {
            entry.chains[index].count += 1
        } else {
            entry.chains.append((chain, 1))
        }
        entry.latest = chain
        let port = record["port"].flatMap { UInt16($0) } ?? 0
        var seen = entry.ports[port] ?? (chains: [], latest: chain, connects: 0)
        seen.chains.insert(chain)
        seen.latest = chain
        seen.connects += 1
        entry.ports[port] = seen
        hosts[host] = entry
        used += 1
    }

    /// Most used first; the same count by name.
    var ranked: [Host] {
        hosts.values.sorted { ($0.connects, $1.name) > ($1.connects, $0.name) }
    }

    /// The rules, with a header saying what they rest on.
    func report(read: Int, skipped: Int) -> [String] {
        var lines = [
            "# pinproxy pin --from-log: \(hosts.count) host\(hosts.count == 1 ? "" : "s") from \(used) decision line\(used == 1 ? "" : "s") with a verified chain (\(read) record\(read == 1 ? "" : "s") read, \(skipped) line\(skipped == 1 ? "" : "s") not pinproxy's).",
            "# Trust on first use: these are the keys the servers presented during the window; take them only if that traffic",
            "# crossed a network you trust. Ready-to-paste rules (under rules:), most used first.",
        ]
        if skipped > 0 {
            lines.append("# The lines that were not pinproxy's may be journalctl's default view, which has no chain: read the journal with journalctl -u pinproxy -o json (or -o export).")
        }
        if hosts.isEmpty {
            lines.append("# No tunnel_allowed or report-mode tunnel_bypassed line with chain_verified=true: unpinned tunnels carry no chain; put the hosts under a mode: report rule while you collect.")
        }
        for host in ranked {
            lines.append("")
            lines += rule(for: host)
        }
        if !refused.isEmpty {
            lines.append("")
            lines.append("# Not proposed: chains the policy refused (or only the debug bypass let through): " +
                         refused.sorted { ($0.value, $1.key) > ($1.value, $0.key) }.map { "\($0.key) (\($0.value))" }.joined(separator: ", "))
        }
        return lines
    }

    private func rule(for host: Host) -> [String] {
        guard let latest = host.latest else { return [] }
        // Each port steady on a chain of its own: one rule per port, not a change.
        if !host.changed, host.chains.count > 1 {
            let ports = host.ports.sorted { ($0.value.connects, $1.key) > ($1.value.connects, $0.key) }
            var lines = ["# \(host.name): \(host.connects) CONNECTs on \(ports.count) ports, each port steady on a chain of its own: a rule per port"]
            for (port, seen) in ports {
                lines += ruleLines(host, chain: seen.latest, ports: [port], mode: nil)
            }
            return lines
        }
        var lines: [String]
        if host.chains.count == 1 {
            lines = ["# \(host.name): \(host.connects) CONNECT\(host.connects == 1 ? "" : "s"), one chain"]
        } else {
            lines = ["# \(host.name): \(host.connects) CONNECTs, CHAIN CHANGED during the window (\(host.chains.count) chains): the rule takes the latest in mode: report;",
                     "# confirm its keys out of band before you enforce it. Chains seen:"]
            for (chain, count) in host.chains {
                lines.append("#   \(count)×  leaf \(chain.leaf) (\(chain.leafSubject))" + (chain.issuer.map { ", issuer \($0) (\(chain.issuerSubject ?? ""))" } ?? ""))
            }
        }
        return lines + ruleLines(host, chain: latest, ports: nil, mode: host.chains.count == 1 ? nil : "report")
    }

    private func ruleLines(_ host: Host, chain: Chain, ports: [UInt16]?, mode: String?) -> [String] {
        let target = host.name.contains(":") || host.name.allSatisfy({ $0.isNumber || $0 == "." }) ? "ip: \"\(host.name)\"" : "host: \"\(host.name)\""
        let trust = host.trust.flatMap { $0 == "system" ? nil : $0 }
        // A self-signed leaf pinned as its own anchor has no issuer to back it up.
        let issuer = chain.leafIsAnchor ? nil : chain.issuer.map { ($0, chain.issuerSubject ?? "") }
        return CertificateReport.ruleLines(target: target, ports: ports, trust: trust, mode: mode,
                                           leaf: (chain.leaf, chain.leafSubject, false), issuer: issuer)
    }
}
