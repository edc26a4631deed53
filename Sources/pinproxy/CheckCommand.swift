import ArgumentParser
import Foundation
import PinPolicy
import ProxyCore
import TLSInspection

struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate and lint the policy file, like nginx -t.",
        discussion: """
            Prints every error with file:line:column and exits 1, or prints a summary and the lint \
            warnings and exits 0. --explain HOST:PORT shows which rule applies to that CONNECT target \
            and which pins it accepts. --probe connects to every pinned host with a concrete name (or IP) \
            on each port its rule covers (its ports:, else proxy.allowed_ports; --port picks one) and reports \
            whether its chain matches today; a port where nothing listens is said so and is no failure; it \
            exits 1 when an enforced rule would refuse a chain, or a server that listens could not be probed.
            """)

    @Flag(name: .long, help: "Probe every pinned host now and report whether its chain matches.")
    var probe = false

    @Option(name: .long, help: "The policy file.")
    var config: String = defaultConfigPath

    @Flag(name: .long, help: "Exit 1 when there are warnings too.")
    var strict = false

    @Option(name: .long, help: ArgumentHelp("Explain the decision for a CONNECT target.", valueName: "HOST:PORT"))
    var explain: [String] = []

    @Option(name: .long, help: ArgumentHelp("With --probe: probe only this port (default: each rule's ports, or proxy.allowed_ports for a rule without).", valueName: "PORT"))
    var port: UInt16?

    func validate() throws {
        if port != nil && !probe { throw ValidationError("--port goes with --probe") }
    }

    func run() throws {
        let policy: Policy
        do {
            policy = try PolicyLoader.load(file: config, pinFiles: PinFiles.loader)
        } catch {
            Output.loadErrors(error)
            Output.err("\(config): \(error.errors.count) error\(error.errors.count == 1 ? "" : "s"); the policy was not loaded")
            throw ExitCode(1)
        }
        let list = try loadLogList(policy)
        let warnings = policy.lint(at: Date()) + (list.map { policy.lint($0, at: Date()) } ?? [])
        Output.out("\(config): OK")
        Output.out(Self.summary(policy))
        for w in warnings { Output.out("\(config):\(w.line): warning[\(w.code)]: \(w.message)") }

        for target in explain {
            Output.out("")
            switch Authority.parse(target) {
            case .success(let authority):
                for line in policy.explain(authority) { Output.out(line) }
                if let line = Self.ctLine(policy, authority, list: list) { Output.out(line) }
            case .failure(let problem):
                Output.err("--explain \(target): \(problem) (a CONNECT with this target is refused with 400)")
                throw ExitCode(1)
            }
        }
        if probe && !probeRules(policy) {
            throw ExitCode(1)
        }
        if strict && !warnings.isEmpty {
            Output.err("\(warnings.count) warning\(warnings.count == 1 ? "" : "s") with --strict")
            throw ExitCode(1)
        }
    }

    /// The CT log list as the proxy loads it (read, signature, JSON: the proxy's own errors, exit 1),
    /// nil when the policy names none.
    func loadLogList(_ policy: Policy) throws -> CTLogList? {
        guard let path = policy.proxy.ct.logList else { return nil }
        do {
            _ = try PolicySnapshot(policy: policy, systemStore: TrustStore.system())
        } catch let error as PolicyLoadError {
            Output.loadErrors(error)
            Output.err("\(config): \(error.errors.count) error\(error.errors.count == 1 ? "" : "s"); the policy was not loaded")
            throw ExitCode(1)
        }
        // It loaded just now; read again for the lint (PolicySnapshot keeps its list to itself).
        return try? CTLogList.load(PlainFile.contents(of: path, limit: CTListCommand.sizeLimit), at: Date())
    }

    /// `ct: require (defaults)` or `ct: off (rule at line N)`, and the log list, for a target whose
    /// CONNECT reaches a rule or the defaults (nil when it is refused before: port, destination,
    /// `unpinned: deny`).
    static func ctLine(_ policy: Policy, _ authority: Authority, list: CTLogList?) -> String? {
        guard policy.proxy.allowedPorts.contains(authority.port) else { return nil }
        if case .ip(let address) = authority.target, policy.proxy.denyDestinations.entry(containingAnyFormOf: address) != nil { return nil }
        let rule = policy.rule(for: authority)
        if rule == nil, policy.defaults.unpinned == .deny { return nil }
        let mode = policy.ctMode(under: rule)
        var line = "ct: \(mode.rawValue) (\(rule.flatMap { r in r.ct.map { _ in "rule at line \(r.line)" } } ?? "defaults"))"
        switch (policy.proxy.ct.logList, list) {
        case (nil, _):
            line += "; no log list (proxy.ct_log_list is not set)"
        case (let path?, let list?):
            let maxAge = policy.proxy.ct.maxAge
            line += "; log list \(path) published \(RFC3339.format(list.timestamp))"
            switch list.freshness(at: Date(), maxAge: maxAge) {
            case .fresh(let age):
                line += ", \(CTLogList.days(age)) days old"
            case .stale(let age):
                line += ", \(CTLogList.days(age)) days old: stale"
                if mode == .require { line += policy.proxy.ct.staleList == .report ? ", so require is enforced as report (ct_stale_list: report)" : ", still enforced (ct_stale_list: refuse)" }
            }
        case (let path?, nil):
            line += "; log list \(path)"
        }
        if mode != .off { line += rule.map { $0.mode == .unpinned ? "; no pins: only CT is checked" : "; both the pins and CT must hold" } ?? "; no rule: only CT is checked" }
        return line
    }

    /// One line per probed rule; false when an enforced rule would refuse.
    func probeRules(_ policy: Policy) -> Bool {
        Output.out("")
        let snapshot: PolicySnapshot
        do {
            snapshot = try PolicySnapshot(policy: policy, systemStore: TrustStore.system())  // stores loaded once
        } catch {
            Output.err("--probe: \(error)")
            return false
        }
        var healthy = true
        for rule in policy.rules where rule.checksChain(under: policy) {
            let target: Target
            switch rule.pattern {
            case .host(.exact(let name)): target = .name(name)
            case .ip(let cidr) where cidr.prefixLength == cidr.network.bytes.count * 8: target = .ip(cidr.network)
            default:
                Output.out("line \(rule.line) \(rule.name): skipped (a pattern names no single host; probe one with pinproxy pin HOST)")
                continue
            }
            // Every port a CONNECT can reach the rule on: its `ports:`, else every allowed port (a
            // server may present another chain on each, or nothing may listen there).
            let covered = rule.ports ?? policy.proxy.allowedPorts
            let ports = port.map { covered.contains($0) ? [$0] : [] } ?? covered
            if ports.isEmpty {
                Output.out("line \(rule.line) \(rule.name): skipped (it does not cover port \(port ?? 0))")
                continue
            }
            if rule.ports == nil, port == nil, ports.count > 1 {
                Output.out("line \(rule.line) \(rule.name): no ports:, so it applies on every port of proxy.allowed_ports; probing \(ports.map(String.init).joined(separator: ", ")) (--port N probes one)")
            }
            for port in ports where !probeOne(rule, Authority(target: target, port: port), policy: policy, snapshot: snapshot) {
                healthy = false
            }
        }
        return healthy
    }

    /// One line for one rule and port; false when an enforced rule would refuse.
    private func probeOne(_ rule: Rule, _ authority: Authority, policy: Policy, snapshot: PolicySnapshot) -> Bool {
        let target = authority.target
        let prefix = "line \(rule.line) \(authority):"
        var healthy = true
        do {
            let seen = try OneShotProbe.run(authority, policy: policy)
            let (validation, evaluation) = snapshot.judge(seen.presented, target: target, rule: rule, at: Date(), debugBypassEnabled: false,
                                                  delivered: seen.delivered)
            // What a refusal or a bypass found: CT's shortfall, or what the chain's validation said.
            func detail(_ reason: RefusalReason) -> String {
                reason == .ctNotCompliant ? (evaluation.ctShortfall.map { ": \($0)" } ?? "") : validation.failureDetail
            }
            switch evaluation.verdict {
            case .allowed(let match):
                Output.out("\(prefix) matches (\(match.entry.pin) at position \(match.position)) via \(seen.address.ip) \(seen.tlsVersion)")
            case .refused(let reason):
                Output.out("\(prefix) would be REFUSED: \(reason.rawValue)\(detail(reason)) via \(seen.address.ip)")
                healthy = false
            case .bypassed(let reason, let basis):
                let by = basis == .ctReport ? "ct: report" : basis == .ctStaleList ? "a stale CT log list" : "mode: report"
                Output.out("\(prefix) does not match (\(reason.rawValue)\(detail(reason))); \(by) lets it through")
            case .unpinned:  // a rule checked for CT only, which the chain meets
                if case .judged(let finding)? = evaluation.ct, finding.isCompliant {
                    Output.out("\(prefix) meets the CT policy (\(finding.counted.count) SCTs counted) via \(seen.address.ip) \(seen.tlsVersion)")
                }
            }
            // A chain the rule refuses is said above; one it lets through may still meet a server the
            // mirror check cannot work with.
            let refused = if case .refused = evaluation.verdict { true } else { false }
            if !refused, !probeSecondConnection(rule, authority, seen, policy: policy, prefix: prefix) {
                healthy = false
            }
            // What the log says of this chain, in its words: the rule's own expiry is linted above.
            for warning in evaluation.warnings {
                switch warning {
                case .noRealBackup:  // BackupRule
                    Output.out("\(prefix) warning[\(warning.code)]: \(warning.detail(onExpiry: nil)); \(BackupRule.advice)")
                case .leafExpiresSoon:
                    Output.out("\(prefix) warning[\(warning.code)]: \(warning.detail(onExpiry: nil))")
                case .ruleExpired, .ruleExpiresSoon:
                    break
                }
            }
        } catch where error.nothingListens {
            // No server there is no verdict on the policy: a CONNECT to it would get 502
            // connection_refused whatever the rule says.
            Output.out("\(prefix) nothing listens on \(authority) (\(error)): no chain to judge, not a failure of the policy")
        } catch {
            Output.out("\(prefix) could not be probed: \(error)")
            if rule.mode == .enforce { healthy = false }
        }
        return healthy
    }

    /// A rule with mirrors, on a TLS 1.3 server: does it answer a second connection while a first is
    /// open? One that serves one at a time has every TLS 1.3 tunnel without a key log refused
    /// `mirror_lost`; false then for an enforced rule (as for any refusal).
    private func probeSecondConnection(_ rule: Rule, _ authority: Authority, _ seen: OneShotProbe.Seen, policy: Policy, prefix: String) -> Bool {
        guard rule.mirrorChecks > 0, seen.isTLS13 else { return true }
        switch ConcurrencyProbe.run(authority, at: seen.address, settings: policy.proxy) {
        case .concurrent:
            return true
        case .oneAtATime:
            Output.out("\(prefix) serves one connection at a time (a second TLS connection got no answer until the first closed): every TLS 1.3 tunnel without a key log would be REFUSED: \(StreamReason.mirrorLost.code) (the mirror check's connection waits behind the client's); add to the rule at line \(rule.line): mirror_checks: 0")
            return rule.mode != .enforce
        case .undetermined(let why):
            Output.out("\(prefix) could not tell whether it answers a second connection while a first is open (\(why))")
            return true
        }
    }

    static func summary(_ policy: Policy) -> String {
        let count = { (mode: RuleMode) in policy.rules.filter { $0.mode == mode }.count }
        var parts = [
            "\(policy.rules.count) rule\(policy.rules.count == 1 ? "" : "s") (\(count(.enforce)) enforced, \(count(.report)) report, \(count(.unpinned)) unpinned)",
            "\(policy.pinsets.count) pinset\(policy.pinsets.count == 1 ? "" : "s")",
            "\(policy.deny.count) deny-listed key\(policy.deny.count == 1 ? "" : "s")",
            "unpinned hosts: \(policy.defaults.unpinned.rawValue)",
            "listen: \(policy.proxy.listen.map(\.description).joined(separator: " "))",
        ]
        if let debug = policy.debug { parts.append("debug bypass section until \(RFC3339.format(debug.until))") }
        return parts.joined(separator: "; ")
    }
}

extension ChainValidation {
    var failureDetail: String {
        if case .failed(let failure, _) = self { return " (\(failure.detail))" }
        return ""
    }
}
