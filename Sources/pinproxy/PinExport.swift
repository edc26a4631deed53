import ArgumentParser
import Foundation
import PinPolicy

/// `pinproxy pin --export FORMAT RULE…`: the policy's pins in a pinning library's own form, so that
/// one canonical pin list feeds every client. What a format cannot say is a comment where the rule
/// would be, never silently dropped: certificate pins (every format here takes SPKI hashes only),
/// one-label wildcards where the format has none, CA pins for curl (which compares the server's own
/// key only), IP rules for libraries that pin host names.
enum ExportFormat: String, CaseIterable, ExpressibleByArgument {
    case okhttp, nsc, trustkit, curl
}

enum PinExport {
    static func render(_ format: ExportFormat, rules: [Rule]) -> String {
        switch format {
        case .okhttp: return okhttp(rules)
        case .nsc: return networkSecurityConfig(rules)
        case .trustkit: return trustKit(rules)
        case .curl: return curl(rules)
        }
    }

    /// The base64 SHA-256 of the SPKI, as every one of these formats writes it.
    static func spki(_ rule: Rule, leafOnly: Bool = false) -> (pins: [String], skipped: [String]) {
        var pins: [String] = []
        var skipped: [String] = []
        for entry in rule.pins {
            let text = entry.pin.description
            if entry.pin.kind == .cert {
                skipped.append("\(text) (a certificate pin; this format takes public-key pins only)")
            } else if leafOnly && entry.position == .ca {
                skipped.append("\(text) (at: ca; curl compares the server's own key only)")
            } else {
                let b64 = String(text.dropFirst("spki-sha256:".count))
                if !pins.contains(b64) { pins.append(b64) }
            }
        }
        return (pins, skipped)
    }

    /// What a rule is to a format that pins domain names (Android's config, TrustKit): a domain,
    /// or why it has none here. A name a rule before it took is a duplicate: both formats refuse a
    /// domain named twice (rules for one name on other ports).
    enum Domain {
        case domain(name: String, subdomains: Bool)
        case oneLabelWildcard, ipRule
        case duplicate(String)
    }

    static func domains(_ rules: [Rule]) -> [(rule: Rule, domain: Domain)] {
        var seen: Set<String> = []
        return rules.map { rule in
            let (name, subdomains): (String, Bool)
            switch rule.pattern {
            case .host(.exact(let exact)): (name, subdomains) = (exact, false)
            case .host(.anyDepth(let suffix)): (name, subdomains) = (suffix, true)
            case .host(.oneLabel): return (rule, .oneLabelWildcard)
            case .ip: return (rule, .ipRule)
            }
            return (rule, seen.insert(name).inserted ? .domain(name: name, subdomains: subdomains) : .duplicate(name))
        }
    }

    /// OkHttp's CertificatePinner (Kotlin). Its patterns are ours: `*.` one label, `**.` any depth.
    /// OkHttp matches a pin anywhere in the verified chain (`at:` has no counterpart).
    static func okhttp(_ rules: [Rule]) -> String {
        var lines = ["// OkHttp CertificatePinner, from pinproxy's policy. OkHttp accepts a pin anywhere in the chain.",
                     "val certificatePinner = CertificatePinner.Builder()"]
        for rule in rules {
            guard case .host(let pattern) = rule.pattern else {
                lines.append("    // \(rule.name): an IP rule; OkHttp pins host names only")
                continue
            }
            let (pins, skipped) = spki(rule)
            if rule.mode == .report { lines.append("    // \(rule.name): mode: report in the policy; OkHttp enforces these pins") }
            for pin in pins { lines.append("    .add(\"\(pattern)\", \"sha256/\(pin)\")") }
            for s in skipped { lines.append("    // \(rule.name): skipped \(s)") }
        }
        lines.append("    .build()")
        return lines.joined(separator: "\n")
    }

    /// Android's res/xml/network_security_config.xml: one `<domain-config>` per rule, its `expires`
    /// as the pin-set's `expiration` (after which Android stops checking the pins). Android matches a
    /// pin anywhere in the chain and has no backup mark: a pin's `at:` other than `any`, and
    /// `backup: true`, go in a comment beside it, which `pin --import nsc` reads back (BackupRule: an
    /// imported CA pin without its mark would have `check` and the log say `no_real_backup`).
    static func networkSecurityConfig(_ rules: [Rule]) -> String {
        var lines = ["<?xml version=\"1.0\" encoding=\"utf-8\"?>",
                     "<!-- From pinproxy's policy. Android checks these pins on top of the system's trust, anywhere in the chain; -->",
                     "<!-- where pinproxy's rule lets a pin match (at:), and its backup mark, are in a comment beside it, for pinproxy's import. -->",
                     "<network-security-config>"]
        for (rule, domain) in domains(rules) {
            switch domain {
            case .domain: break
            case .oneLabelWildcard: lines.append("    <!-- \(xml(rule.name)): a one-label wildcard has no network_security_config form; skipped -->")
            case .ipRule: lines.append("    <!-- \(xml(rule.name)): an IP rule; network_security_config pins domains only; skipped -->")
            case .duplicate(let name):
                lines.append("    <!-- \(xml(rule.name)): \(xml(name)) has a domain-config already (pins are per domain, not per port); skipped -->")
            }
            guard case .domain(let name, let subdomains) = domain else { continue }
            let (pins, skipped) = spki(rule)
            if rule.mode == .report { lines.append("    <!-- \(xml(rule.name)): mode: report in the policy; Android enforces these pins -->") }
            lines.append("    <domain-config>")
            lines.append("        <domain includeSubdomains=\"\(subdomains)\">\(xml(name))</domain>")
            let expiration = rule.expires.map { " expiration=\"\(String(RFC3339.format($0).prefix(10)))\"" } ?? ""
            lines.append("        <pin-set\(expiration)>")
            for pin in pins {
                // The first entry with this key says where it sits (`spki` deduplicates the same way).
                let entry = rule.pins.first { $0.pin.kind == .spki && $0.pin.description == "spki-sha256:" + pin }
                let placement = entry.map { $0.acceptedBackup ? "at: ca, backup: true" : $0.position == .any ? "" : "at: \($0.position.rawValue)" } ?? ""
                lines.append("            <pin digest=\"SHA-256\">\(pin)</pin>" + (placement.isEmpty ? "" : " <!-- \(placement) -->"))
            }
            lines.append("        </pin-set>")
            for s in skipped { lines.append("        <!-- skipped \(xml(s)) -->") }
            lines.append("    </domain-config>")
        }
        lines.append("</network-security-config>")
        return lines.joined(separator: "\n")
    }

    /// TrustKit's configuration dictionary (Swift). TrustKit wants two hashes at least (a backup).
    static func trustKit(_ rules: [Rule]) -> String {
        var lines = ["// TrustKit configuration, from pinproxy's policy: TrustKit.initSharedInstance(withConfiguration: trustKitConfig)",
                     "let trustKitConfig: [String: Any] = [",
                     "    kTSKSwizzleNetworkDelegates: false,",
                     "    kTSKPinnedDomains: ["]
        for (rule, domain) in domains(rules) {
            switch domain {
            case .domain: break
            case .oneLabelWildcard: lines.append("        // \(rule.name): a one-label wildcard has no TrustKit form; skipped")
            case .ipRule: lines.append("        // \(rule.name): an IP rule; TrustKit pins domains only; skipped")
            // A dictionary literal with a key twice traps at run time.
            case .duplicate(let name): lines.append("        // \(rule.name): \"\(name)\" is configured already (pins are per domain, not per port); skipped")
            }
            guard case .domain(let name, let subdomains) = domain else { continue }
            let (pins, skipped) = spki(rule)
            lines.append("        \"\(name)\": [")
            lines.append("            kTSKIncludeSubdomains: \(subdomains),")
            lines.append("            kTSKEnforcePinning: \(rule.mode == .enforce),")
            if let expires = rule.expires { lines.append("            kTSKExpirationDate: \"\(String(RFC3339.format(expires).prefix(10)))\",") }
            lines.append("            kTSKPublicKeyHashes: [")
            for pin in pins { lines.append("                \"\(pin)\",") }
            lines.append("            ],")
            if pins.count < 2 { lines.append("            // TrustKit refuses fewer than two hashes: add a backup key") }
            for s in skipped { lines.append("            // skipped \(s)") }
            lines.append("        ],")
        }
        lines += ["    ],", "]"]
        return lines.joined(separator: "\n")
    }

    /// curl's `--pinnedpubkey`, one command per rule. curl compares the server's own (leaf) key
    /// only, so `at: ca` pins cannot be said.
    static func curl(_ rules: [Rule]) -> String {
        var lines = ["# curl --pinnedpubkey, from pinproxy's policy. curl compares the server's own key only (not a CA's)."]
        for rule in rules {
            let (pins, skipped) = spki(rule, leafOnly: true)
            let host: String
            switch rule.pattern {
            case .host(.exact(let name)): host = name
            case .host(let pattern): host = "HOST.\(pattern.literalSuffix)"
            case .ip(let cidr): host = cidr.prefixLength == cidr.network.bytes.count * 8 ? cidr.network.description : "ADDRESS"
            }
            let port = rule.ports?.first.map { $0 == 443 ? "" : ":\($0)" } ?? ""
            lines.append("# \(rule.name)")
            for s in skipped { lines.append("#   skipped \(s)") }
            if pins.isEmpty {
                lines.append("#   no pin curl can check")
                continue
            }
            let url = "https://\(host.contains(":") ? "[\(host)]" : host)\(port)/"
            lines.append("curl --pinnedpubkey \"\(pins.map { "sha256//\($0)" }.joined(separator: ";"))\" \(url)")
        }
        return lines.joined(separator: "\n")
    }

    static func xml(_ s: String) -> String {
        s.replacingOccurrences(of: "&", with: "&amp;").replacingOccurrences(of: "<", with: "&lt;")
            .replacingOccurrences(of: ">", with: "&gt;").replacingOccurrences(of: "\"", with: "&quot;")
    }
}
