import ArgumentParser
import Foundation
import PinPolicy
import TLSInspection

struct PinCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Print the pins of certificates and a ready-to-paste policy rule.",
        discussion: """
            pinproxy pin --cert FILE...  reads PEM (one or more certificates) or DER files.

            The SPKI pin equals the value of
              openssl x509 -pubkey -noout -in FILE | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64
            Take pins only from certificates you obtained over a network you trust.
            """)

    @Option(name: .long, parsing: .upToNextOption, help: ArgumentHelp("Certificate files (PEM or DER).", valueName: "FILE"))
    var cert: [String] = []

    func validate() throws {
        if cert.isEmpty { throw ValidationError("give --cert FILE... (probing a live HOST arrives with the proxy)") }
    }

    func run() throws {
        var all: [CertificateFacts] = []
        for path in cert {
            let certificates: [Certificate]
            do {
                certificates = try Certificate.load(file: path)
            } catch {
                Output.err("pinproxy pin: \(path): \(error)")
                throw ExitCode(1)
            }
            for (index, certificate) in certificates.enumerated() {
                let facts = certificate.facts
                all.append(facts)
                Output.out("# \(path), certificate \(index + 1) of \(certificates.count)")
                Output.out(CertificateReport.describe(facts))
                Output.out("")
            }
        }
        Output.out(CertificateReport.suggestedRule(for: all))
    }
}

/// How `pin` prints certificates and a rule (shared by `pin --cert` and `pin HOST`).
enum CertificateReport {
    static func describe(_ facts: CertificateFacts, position: Int? = nil) -> String {
        var lines: [String] = []
        if let position { lines.append("position:  \(position)\(position == 0 ? " (leaf)" : " (CA)")") }
        lines += [
            "subject:   \(facts.subject)",
            "issuer:    \(facts.issuer)",
            "validity:  \(RFC3339.format(facts.notBefore)) to \(RFC3339.format(facts.notAfter))",
            "key:       \(facts.key)\(facts.isCA ? " (CA certificate)" : "")",
        ]
        if !facts.subjectAltNames.isEmpty { lines.append("names:     \(facts.subjectAltNames.joined(separator: ", "))") }
        lines.append("spki pin:  \(facts.spki)")
        lines.append("cert pin:  \(facts.certificate)")
        lines.append("sha256 fingerprint: \(facts.certificate.colonHex)")
        return lines.joined(separator: "\n")
    }

    /// A rule that pins the leaf key and, when present, the issuing CA's key.
    static func suggestedRule(for chain: [CertificateFacts]) -> String {
        guard let leaf = chain.first(where: { !$0.isCA }) ?? chain.first else { return "" }
        let host = leaf.subjectAltNames.first { $0.hasPrefix("DNS:") }.map { String($0.dropFirst(4)) }
        let ip = leaf.subjectAltNames.first { $0.hasPrefix("IP:") }.map { String($0.dropFirst(3)) }
        let target = host.map { "host: \"\($0)\"" } ?? ip.map { "ip: \($0)" } ?? "host: \"REPLACE.example.com\""
        var lines = [
            "# Ready-to-paste rule (under rules:). Confirm these pins from a network you trust.",
            "- \(target)",
            "  pins:",
            "    - { pin: \"\(leaf.spki)\", at: leaf, label: \"\(escape(leaf.subject))\" }",
        ]
        if let issuer = chain.first(where: { $0.isCA && $0.subject == leaf.issuer }) {
            lines.append("    - { pin: \"\(issuer.spki)\", at: ca, label: \"\(escape(issuer.subject))\" }")
        }
        lines.append("    # add a backup pin: the SPKI of a key you keep offline (file: backup.pub.pem) or of the issuing CA")
        return lines.joined(separator: "\n")
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}
