import ArgumentParser
import Foundation
import PinPolicy
import ProxyCore
import TLSInspection

struct PinCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pin",
        abstract: "Print the pins of a server's chain or of certificate files, and a ready-to-paste rule.",
        discussion: """
            pinproxy pin HOST[:PORT]     probes the server the way the proxy does (honouring --config's \
            resolve:, dns and the trust of the rule for HOST, or --connect-to) and prints the verified chain.
            With --config, it also says whether the chain MATCHES the policy's rule for HOST or DOES NOT MATCH it.
            pinproxy pin --cert FILE...  reads certificates (PEM, one or more, or DER) or public keys (PEM or DER).
            pinproxy pin --from-log FILE|-   reads pinproxy's own log (logfmt or JSON lines, journalctl -o json \
            or -o export) and prints a rule for every host whose verified chain it logged, most used first; \
            a host whose chain changed during the window is marked and its rule is mode: report.
            pinproxy pin --export okhttp|nsc|trustkit|curl [RULE...]   prints the pins of the --config \
            policy's rules (each named as the log names it: api.example.com, **.example.com:8443; default: \
            every rule with pins) as OkHttp CertificatePinner code, an Android network_security_config.xml, \
            a TrustKit configuration or curl --pinnedpubkey commands.
            pinproxy pin --import nsc FILE   prints policy rules from an Android network_security_config.xml's <pin-set>s.

            Discovery must happen on a network you trust: on an intercepted network the pins printed are \
            the attacker's. The SPKI pin equals the value of
              openssl x509 -pubkey -noout -in FILE | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64
            """)

    @Argument(help: ArgumentHelp("The server to probe (port 443 when omitted); with --export, the rules; with --import, the file.",
                                 valueName: "HOST[:PORT]"))
    var arguments: [String] = []

    @Option(name: .long, parsing: .upToNextOption, help: ArgumentHelp("Certificate or public-key files (PEM or DER).", valueName: "FILE"))
    var cert: [String] = []

    @Option(name: .long, help: "The policy file whose resolve:, dns and trust apply (default: none; system trust and DNS), or whose rules --export prints (default: \(defaultConfigPath)).")
    var config: String?

    @Option(name: .customLong("connect-to"), help: ArgumentHelp("Connect to this address instead of resolving HOST.", valueName: "ADDR"))
    var connectTo: String?

    @Option(name: .customLong("from-log"), help: ArgumentHelp("pinproxy's log to turn into rules ('-': standard input).", valueName: "FILE"))
    var fromLog: String?

    @Option(name: .long, help: ArgumentHelp("Print the policy's pins in this format.", valueName: "okhttp|nsc|trustkit|curl"))
    var export: ExportFormat?

    @Option(name: .customLong("import"), help: ArgumentHelp("Read pins in this format from the FILE argument.", valueName: "nsc"))
    var importFormat: ImportFormat?

    enum ImportFormat: String, ExpressibleByArgument { case nsc }

    private var target: String? { cert.isEmpty && fromLog == nil && export == nil && importFormat == nil ? arguments.first : nil }

    /// `--connect-to` as an address (`192.0.2.1`, `2001:db8::1` or `[2001:db8::1]`).
    private var connectAddress: IPAddress? {
        guard let connectTo, case .success(.ip(let address)) = Authority.parseHost(connectTo) else { return nil }
        return address
    }

    func validate() throws {
        let modes = [!cert.isEmpty, fromLog != nil, export != nil, importFormat != nil].filter { $0 }.count
        if modes > 1 { throw ValidationError("give one of --cert, --from-log, --export and --import") }
        if modes == 0 && arguments.isEmpty {
            throw ValidationError("give HOST[:PORT] to probe a server, or --cert FILE... to read certificate or public-key files (or --from-log, --export, --import)")
        }
        if !cert.isEmpty && !arguments.isEmpty { throw ValidationError("give HOST[:PORT] or --cert FILE..., not both") }
        if modes == 0 && arguments.count > 1 { throw ValidationError("give one HOST[:PORT] to probe") }
        if fromLog != nil && !arguments.isEmpty { throw ValidationError("--from-log reads one log: give no HOST or RULE") }
        if importFormat != nil && arguments.count != 1 { throw ValidationError("--import nsc reads one FILE") }
        if connectTo != nil && target == nil { throw ValidationError("--connect-to goes with HOST[:PORT]") }
        if connectTo != nil && connectAddress == nil { throw ValidationError("--connect-to takes an IP address") }
    }

    func run() throws {
        if let fromLog { return try onboard(fromLog) }
        if let export { return try exportPins(export) }
        if importFormat != nil { return try importPins(arguments[0]) }
        if let target { try probe(target) } else { try files() }
    }

    /// `--from-log FILE|-`.
    private func onboard(_ path: String) throws {
        let bytes: [UInt8]
        if path == "-" {
            bytes = Array(FileHandle.standardInput.readDataToEndOfFile())
        } else {
            do {
                bytes = try PlainFile.contents(of: path, limit: 1 << 30)
            } catch {
                Output.err("pinproxy pin --from-log: \(error)")
                throw ExitCode(1)
            }
        }
        var seen = FromLog()
        let counts = DecisionLog.read(bytes) { seen.add($0) }
        for line in seen.report(read: counts.read, skipped: counts.skipped) { Output.out(line) }
    }

    /// `--export FORMAT [RULE...]`.
    private func exportPins(_ format: ExportFormat) throws {
        let path = config ?? defaultConfigPath
        let policy: Policy
        do {
            policy = try PolicyLoader.load(file: path, pinFiles: PinFiles.loader)
        } catch {
            Output.loadErrors(error)
            throw ExitCode(1)
        }
        let pinned = policy.rules.filter { !$0.pins.isEmpty }
        var chosen: [Rule] = []
        for name in arguments {
            guard let rule = pinned.first(where: { $0.name == name || $0.pattern.description == name }) else {
                Output.err("pinproxy pin --export: no rule with pins named '\(name)' in \(path); its rules: \(pinned.map(\.name).joined(separator: ", "))")
                throw ExitCode(1)
            }
            if !chosen.contains(rule) { chosen.append(rule) }
        }
        Output.out(PinExport.render(format, rules: arguments.isEmpty ? pinned : chosen))
    }

    /// `--import nsc FILE`.
    private func importPins(_ path: String) throws {
        do {
            let bytes = try PlainFile.contents(of: path, limit: 16 << 20)
            let out = Output.Lines()
            try NetworkSecurityConfigImport.write(bytes, file: path, line: out.append)
            out.flush()
        } catch let error as PlainFile.ReadError {
            Output.err("pinproxy pin --import: \(error)")
            throw ExitCode(1)
        } catch {
            Output.err("pinproxy pin --import: \(path): \(error)")
            throw ExitCode(1)
        }
    }

    private func files() throws {
        var all: [CertificateFacts] = []
        var keys: [(path: String, pin: Pin)] = []
        for path in cert {
            let certificates: [Certificate]
            do {
                certificates = try Certificate.load(file: path)
            } catch let error as FileError {
                Output.err("pinproxy pin: \(path): \(error)")  // cannot read it: strerror and the errno
                throw ExitCode(1)
            } catch {
                // A public key (PEM `PUBLIC KEY` or DER SubjectPublicKeyInfo): what the policy's
                // `file:` pins accept, and what an offline backup key usually is.
                if let key = try? PinFiles.read(path: path, kind: .spki) {
                    keys.append((path, key.pin))
                    Output.out("# \(path): a public key (no certificate)")
                    Output.out("spki pin:  \(key.pin)")
                    Output.out("")
                    continue
                }
                Output.err("pinproxy pin: \(path): \(Self.neitherMessage(path))")
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
        if !all.isEmpty { Output.out(CertificateReport.suggestedRule(for: all)) }
        if !keys.isEmpty {
            if !all.isEmpty { Output.out("") }
            // `at: leaf`: a spare kept offline, or the server's own key, is a leaf key; said, it lets
            // `check` tell it from a CA pin in the served chain (BackupRule).
            Output.out("# Pin entries for a rule's pins: (a key without a certificate: a backup, or the key itself):")
            for key in keys {
                let name = (key.path as NSString).lastPathComponent
                Output.out("    - { pin: \"\(key.pin)\", at: leaf, label: \"\(CertificateReport.escape(name))\" }   # or { file: \(key.path), at: leaf }")
            }
        }
    }

    /// What a file that holds neither a certificate nor a public key is told: a private key gets the
    /// command that takes its public half.
    static func neitherMessage(_ path: String) -> String {
        let text = (try? PlainFile.contents(of: path, limit: 1 << 20)).map { String(decoding: $0, as: UTF8.self) } ?? ""
        if text.contains("PRIVATE KEY-----") {
            return "a private key; pin --cert reads certificates and public keys (PEM or DER). Pin its public key: openssl pkey -in \(shellWord(path)) -pubout -out key.pub.pem"
        }
        return "holds neither a certificate nor a public key; pin --cert reads PEM 'BEGIN CERTIFICATE' or 'BEGIN PUBLIC KEY' blocks, or one DER certificate or public key"
    }

    private func probe(_ text: String) throws {
        let authority: Authority
        switch Authority.parse(text.contains(":") && !text.hasSuffix("]") ? text : (text + ":443")) {
        case .success(let a): authority = a
        case .failure(let problem):
            Output.err("pinproxy pin: \(text): \(problem)")
            throw ExitCode(1)
        }
        let policy: Policy
        do {
            policy = try config.map { try PolicyLoader.load(file: $0, pinFiles: PinFiles.loader) } ?? Policy(defaults: PolicyDefaults(unpinned: .allow))
        } catch let error as PolicyLoadError {
            Output.loadErrors(error)
            throw ExitCode(1)
        }
        let forced = connectAddress.map { [$0] }
        let seen: OneShotProbe.Seen
        do {
            seen = try OneShotProbe.run(authority, policy: policy, connectTo: forced)
        } catch {
            Output.err("pinproxy pin: \(authority): \(error)")
            throw ExitCode(1)
        }
        let rule = policy.rule(for: authority)
        let trust = rule?.trust ?? policy.defaults.trust
        let snapshot = try PolicySnapshot(policy: policy, systemStore: TrustStore.system())
        let validation = snapshot.validate(seen.presented, for: authority.target, trust: trust, pins: rule?.pins ?? [])
        Output.out("# pinproxy pin \(authority): \(seen.address.ip) answered with \(seen.tlsVersion)" + (seen.proof == .handshakeCompleted ? "" : " (it proved its key, then asked for a client certificate)"))
        Output.out("# Take these pins only on a network you trust: behind an interception proxy they are the attacker's.")
        let chain: [CertificateFacts]
        switch validation {
        case .verified(let verified):
            Output.out("# The chain is valid under trust \(trust) for \(authority.target).")
            chain = verified.certificates.map(\.facts)
        case .failed(let failure, let presented):
            Output.out("# WARNING: the chain does NOT validate under trust \(trust): \(failure.detail). Shown as presented.")
            chain = presented
        }
        Output.out("")
        for (position, facts) in chain.enumerated() {
            Output.out(CertificateReport.describe(facts, position: position))
            Output.out("")
        }
        if let rule { Output.out(comparison(seen, with: rule, snapshot: snapshot, target: authority.target)) }
        for line in portAdvice(authority.port, policy: policy) { Output.out(line) }
        let oneAtATime = concurrencyAdvice(authority, seen, rule: rule, policy: policy)
        let pastedTrust = trustForPastedRule(seen, target: authority.target, ruleTrust: trust, ruleValidation: validation, policy: policy, snapshot: snapshot)
        if let note = pastedTrust.note { Output.out(note) }
        Output.out(CertificateReport.suggestedRule(for: chain, host: authority.target, trust: pastedTrust.trust, oneAtATime: oneAtATime))
    }

    /// TLS 1.3 tunnels get the mirror check, a second connection beside the client's: a server that
    /// serves one connection at a time never answers it, and every such tunnel is refused
    /// `mirror_lost`. Two handshakes tell; true when the rule to paste needs `mirror_checks: 0`.
    private func concurrencyAdvice(_ authority: Authority, _ seen: OneShotProbe.Seen, rule: Rule?, policy: Policy) -> Bool {
        guard seen.isTLS13 else { return false }  // no mirror below TLS 1.3
        switch ConcurrencyProbe.run(authority, at: seen.address, settings: policy.proxy) {
        case .concurrent:
            return false
        case .oneAtATime:
            Output.out("# \(seen.address) serves one connection at a time: a second TLS connection made while a first was open got no answer until the first closed.")
            Output.out("# pinproxy's mirror check opens a second connection beside each TLS 1.3 client's, so every TLS 1.3 tunnel to it without a key log")
            Output.out("# would be refused \(StreamReason.mirrorLost.code); with mirror_checks: 0 those tunnels rest on pinproxy's own probe (verify=probe-only).")
            if let rule, rule.checksChain(under: policy), rule.mirrorChecks > 0 {
                Output.out("# Add to the rule at line \(rule.line): mirror_checks: 0")
            }
            return true
        case .undetermined(let why):
            Output.out("# Could not tell whether \(seen.address) answers a second connection while a first is open (\(why)); if its TLS 1.3 tunnels are refused \(StreamReason.mirrorLost.code), give its rule mirror_checks: 0.")
            return false
        }
    }

    /// Whether what the server presented now passes the policy's rule for it: the question to answer
    /// before pasting anything, since on a changed chain the pins printed may be an attacker's.
    private func comparison(_ seen: OneShotProbe.Seen, with rule: Rule, snapshot: PolicySnapshot, target: Target) -> String {
        guard rule.mode != .unpinned else {
            return "# The policy's rule for this target is at line \(rule.line) ('\(rule.name)', mode: unpinned): it checks no pins."
        }
        let (validation, evaluation) = snapshot.judge(seen.presented, target: target, rule: rule, at: Date(), debugBypassEnabled: false,
                                                  delivered: seen.delivered)
        switch evaluation.verdict {
        case .allowed(let match):
            let matches = "# MATCHES rule at line \(rule.line) (pin \(match.entry.pin) at position \(match.position))."
            guard evaluation.warnings.contains(.noRealBackup) else { return matches }
            return matches + "\n# warning[\(RuntimeWarning.noRealBackup.code)]: \(RuntimeWarning.noRealBackup.detail(onExpiry: nil)); \(BackupRule.advice)"
        case .refused(let reason), .bypassed(let reason, _):
            return "# DOES NOT MATCH rule at line \(rule.line) (\(reason.rawValue)\(validation.failureDetail)) — do not paste these pins unless you have confirmed the change out of band."
        case .unpinned:
            return "# The policy's rule for this target is at line \(rule.line) ('\(rule.name)'): it checks no pins."
        }
    }

    /// A port outside `proxy.allowed_ports` is refused before any rule (403 `port_not_allowed`).
    private func portAdvice(_ port: UInt16, policy: Policy) -> [String] {
        let allowed = policy.proxy.allowedPorts
        guard !allowed.contains(port) else { return [] }
        return [
            "# Port \(port) is not in proxy.allowed_ports, so every CONNECT to it is refused (\(Refusal.policy(.portNotAllowed, detail: "").status) \(RefusalReason.portNotAllowed.rawValue)); allow it:",
            "#   proxy:",
            "#     allowed_ports: [\((allowed + [port]).map(String.init).joined(separator: ", "))]",
        ]
    }

    /// The `trust:` the suggested rule needs: none when the chain validates under the trust a pasted
    /// rule inherits (`defaults.trust`), else the rule's own trust when that one validates it, else
    /// `pins-only` (the pinned certificates become the anchors). A certificate that does not name
    /// the host fails under any trust; the note says so.
    private func trustForPastedRule(_ seen: OneShotProbe.Seen, target: Target, ruleTrust: Trust, ruleValidation: ChainValidation,
                                    policy: Policy, snapshot: PolicySnapshot) -> (trust: Trust?, note: String?) {
        let inherited = policy.defaults.trust
        let underInherited = ruleTrust == inherited ? ruleValidation : snapshot.validate(seen.presented, for: target, trust: inherited, pins: [])
        guard case .failed(let failure, _) = underInherited else { return (nil, nil) }
        if failure.reason == .hostnameMismatch {
            return (nil, "# The certificate does not name \(target): no trust: setting makes a rule for it pass (\(RefusalReason.hostnameMismatch.rawValue)).")
        }
        if ruleTrust != inherited, case .verified = ruleValidation {
            return (ruleTrust, "# The chain validates only under trust \(ruleTrust) (the rule's), not under defaults.trust \(inherited): the rule says trust: \(ruleTrust).")
        }
        return (.pinsOnly, "# The chain does not validate under trust \(inherited) (\(failure.detail)): the rule says trust: pins-only, so the pinned certificates are its anchors (signatures, dates and the name are still checked).")
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

    /// A rule that pins the leaf key and, when present, the issuing CA's key; `mirror_checks: 0` for
    /// a server that serves one connection at a time.
    static func suggestedRule(for chain: [CertificateFacts], host known: Target? = nil, trust: Trust? = nil, oneAtATime: Bool = false) -> String {
        // A probed chain's leaf is its position 0, whatever its basic constraints say (a self-signed
        // server certificate often says CA:TRUE); of files, the first certificate that is not a CA.
        guard let leaf = known != nil ? chain.first : chain.first(where: { !$0.isCA }) ?? chain.first else { return "" }
        // Only CA certificates given, none naming a host (`pin --cert ca.pem`): the rule pins the CA, where a CA sits.
        let onlyCA = known == nil && leaf.isCA && leaf.subjectAltNames.isEmpty
        let host = leaf.subjectAltNames.first { $0.hasPrefix("DNS:") }.map { String($0.dropFirst(4)) }
        let ip = leaf.subjectAltNames.first { $0.hasPrefix("IP:") }.map { String($0.dropFirst(3)) }
        let target: String
        switch known {
        case .name(let name)?: target = "host: \"\(name)\""
        case .ip(let address)?: target = "ip: \"\(address)\""
        case nil: target = host.map { "host: \"\($0)\"" } ?? ip.map { "ip: \"\($0)\"" } ?? "host: \"REPLACE.example.com\""
        }
        let issuer = onlyCA ? nil : chain.first(where: { $0.isCA && $0.subject == leaf.issuer && $0.spki != leaf.spki })
        return (["# Ready-to-paste rule (under rules:). Confirm these pins from a network you trust."]
                + ruleLines(target: target, trust: trust.map { "\($0)" }, oneAtATime: oneAtATime, leaf: (leaf.spki, leaf.subject, onlyCA),
                            issuer: issuer.map { ($0.spki, $0.subject) })).joined(separator: "\n")
    }

    /// The rule itself, shared with `--from-log`: the leaf key (or a lone CA's, where a CA sits)
    /// and, as its backup (BackupRule), the issuing CA marked `backup: true`.
    static func ruleLines(target: String, ports: [UInt16]? = nil, trust: String?, mode: String? = nil, oneAtATime: Bool = false,
                          leaf: (spki: Pin, subject: String, isCA: Bool), issuer: (spki: Pin, subject: String)?) -> [String] {
        var lines = ["- \(target)"]
        if let ports { lines.append("  ports: [\(ports.map(String.init).joined(separator: ", "))]") }
        if let trust { lines.append("  trust: \"\(trust)\"") }
        if let mode { lines.append("  mode: \(mode)") }
        if oneAtATime { lines.append("  mirror_checks: 0                  # it serves one connection at a time") }
        lines += [
            "  pins:",
            "    - { pin: \"\(leaf.spki)\", at: \(leaf.isCA ? "ca" : "leaf"), label: \"\(escape(leaf.subject))\" }",
        ]
        if let issuer {
            // BackupRule: the issuing CA is in the served chain, so it is a backup only when marked.
            lines.append("    - { pin: \"\(issuer.spki)\", at: ca, label: \"\(escape(issuer.subject))\", backup: true }")
            lines.append("    # backup: true accepts the issuing CA as the backup: any key it certifies for the name passes.")
            lines.append("    # Stricter: replace that line with a spare key not in use yet, kept offline: { file: next-key.pub.pem, at: leaf, label: backup }")
        } else {
            lines.append("    # add a backup: \(BackupRule.advice)")
        }
        return lines
    }

    static func escape(_ s: String) -> String {
        s.replacingOccurrences(of: "\\", with: "\\\\").replacingOccurrences(of: "\"", with: "\\\"")
    }
}
