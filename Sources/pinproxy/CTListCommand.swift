import ArgumentParser
import Foundation
import PinPolicy
import TLSInspection

struct CTListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "ct-list",
        abstract: "Check a Certificate Transparency log list, and install it where the policy reads it.",
        discussion: """
            Loads FILE as strictly as the proxy does (Google's v3 log_list.json; an error names the JSON \
            path; every log key must parse, and the list may be stamped at most 1 day in the future) and \
            prints its age, each operator with its logs, and a summary, control characters escaped. A list older than \
            proxy.ct_list_max_age (70 days unless --config says otherwise), or with fewer than 2 operators \
            having a usable or qualified log, is a warning: printed, exit 0. With --key the detached \
            signature (--signature, default FILE with its extension replaced by .sig) must verify. \
            --install copies FILE (and its signature) atomically to the policy's proxy.ct_log_list; it \
            refuses a list that does not load or verify, or that is older than the one installed.
            """)

    @Argument(help: ArgumentHelp("The log list (Google's v3 log_list.json).", valueName: "FILE"))
    var file: String

    @Option(name: .long, help: ArgumentHelp("The list's detached signature (default: FILE with its extension replaced by .sig).", valueName: "FILE"))
    var signature: String?

    @Option(name: .long, help: ArgumentHelp("The PEM public key the signature must verify with.", valueName: "PEM"))
    var key: String?

    @Flag(name: .long, help: "Copy the list (and its signature) atomically to the policy's proxy.ct_log_list.")
    var install = false

    @Option(name: .long, help: ArgumentHelp("The policy file: its ct_list_max_age, and where --install puts the list (default: \(defaultConfigPath) with --install, else none).", valueName: "FILE"))
    var config: String?

    func validate() throws {
        if signature != nil && key == nil { throw ValidationError("--signature goes with --key: a signature is only checked against a key") }
    }

    func run() throws {
        let policy: Policy? = install || config != nil ? try loadPolicy(config ?? defaultConfigPath) : nil
        let bytes = try read(file)
        let signaturePath = signature ?? CTSettings.signaturePath(forList: file)
        // The keys the signature must verify with: --key, and with --install the policy's own, which
        // the proxy will check it with at its next load.
        let keys = Array(Set([key, install ? policy?.proxy.ct.logListKey : nil].compactMap { $0 })).sorted()
        let signatureBytes = keys.isEmpty ? nil : try read(signaturePath)
        for keyPath in keys {
            let keyBytes = try read(keyPath)
            do {
                try CTListSignature.verify(list: bytes, signature: signatureBytes ?? [], publicKey: keyBytes)
            } catch {
                Output.err("\(file): error: signature \(signaturePath), key \(keyPath): \(error)")
                throw ExitCode(1)
            }
        }
        let now = Date()
        let list: CTLogList
        do {
            list = try CTLogList.load(bytes, at: now)
        } catch {
            Output.err("\(file): error: \(error)")
            throw ExitCode(1)
        }
        let maxAge = policy?.proxy.ct.maxAge ?? CTLogList.defaultMaxAge
        for line in Self.report(list, file: file, maxAge: maxAge, at: now) { Output.out(line) }
        for keyPath in keys { Output.out("signature \(signaturePath) verifies with \(keyPath)") }
        for warning in list.warnings(at: now, maxAge: maxAge) {
            Output.out("\(file): warning[\(warning.code)]: \(warning)")
        }
        if install, let policy {
            try installList(bytes, list, signature: signatureBytes, policy: policy, at: now)
        }
    }

    /// The policy file, or its errors and exit 1 (`check`'s form).
    private func loadPolicy(_ path: String) throws -> Policy {
        do {
            return try PolicyLoader.load(file: path, pinFiles: PinFiles.loader)
        } catch {
            Output.loadErrors(error)
            Output.err("\(path): \(error.errors.count) error\(error.errors.count == 1 ? "" : "s"); the policy was not loaded")
            throw ExitCode(1)
        }
    }

    /// Copies the list (and its signature) over `proxy.ct_log_list`, unless the list installed there
    /// is newer. Both files are staged before either replaces anything; the signature goes first, so
    /// that once the new list is in place its signature is too.
    private func installList(_ bytes: [UInt8], _ list: CTLogList, signature: [UInt8]?, policy: Policy, at now: Date) throws {
        guard let target = policy.proxy.ct.logList else {
            Output.err("\(policy.source): error: proxy.ct_log_list is not set; --install copies the list where it points (e.g. /var/lib/pinproxy/ct/log_list.json)")
            throw ExitCode(1)
        }
        // A list older than the one in place is refused: replaying an old signed list would bring
        // back a log distrusted since. One that does not load (one stamped in the future among them)
        // is replaced.
        if let installed = try? CTLogList.load(PlainFile.contents(of: target, limit: Self.sizeLimit), at: now), list.timestamp < installed.timestamp {
            Output.err("\(file): error: published \(RFC3339.format(list.timestamp)), before the list installed in \(target) (\(RFC3339.format(installed.timestamp))); "
                + "an older list could bring back a log distrusted since. To go back on purpose, remove \(target) first")
            throw ExitCode(1)
        }
        let signatureTarget = CTSettings.signaturePath(forList: target)
        var staged: [StagedFile] = []
        do {
            if let signature { staged.append(try StagedFile.stage(signatureTarget, with: signature)) }
            staged.append(try StagedFile.stage(target, with: bytes))
            for file in staged { try file.commit() }
        } catch {
            for file in staged { file.discard() }  // what was committed is gone already; the rest is left as it was
            Output.err("\(file): error: \(error)")
            throw ExitCode(1)
        }
        Output.out("installed \(target)\(signature == nil ? "" : " and \(signatureTarget)"); reload pinproxy to use it (systemctl reload pinproxy)")
    }

    /// The file's bytes, or its read error in `file: error:` form and exit 1.
    private func read(_ path: String) throws -> [UInt8] {
        do {
            return try PlainFile.contents(of: path, limit: Self.sizeLimit)
        } catch {
            Output.err("\(path): error: \(error)")
            throw ExitCode(1)
        }
    }

    /// The proxy's own limit for the list (Google's is about 100 KiB): a list ct-list accepts, the
    /// proxy reads.
    static let sizeLimit = 8 << 20

    /// The list as `ct-list` prints it: a heading, one block per operator, a summary line; what the
    /// list says (its descriptions, operator names) escaped so that it cannot break a line or move
    /// the terminal's cursor.
    static func report(_ list: CTLogList, file: String, maxAge: TimeInterval, at now: Date) -> [String] {
        let age: TimeInterval
        switch list.freshness(at: now, maxAge: maxAge) {
        case .fresh(let a), .stale(let a): age = a
        }
        var lines = ["\(file): OK: version \(list.version ?? "(none)"), published \(RFC3339.format(list.timestamp)), "
            + "\(CTLogList.days(age)) days old (ct_list_max_age: \(CTLogList.days(maxAge)) days)"]
        for op in list.operators {
            lines.append("operator '\(op.name)'\(op.email.isEmpty ? "" : " <\(op.email.joined(separator: ", "))>"): \(op.logs.count) log\(op.logs.count == 1 ? "" : "s")")
            for log in op.logs {
                var line = "  \(log.state.name) since \(RFC3339.format(log.state.since)): \(log.description.isEmpty ? "(no description)" : log.description), log_id \(log.id)"
                if let interval = log.temporalInterval {
                    line += ", temporal_interval [\(RFC3339.format(interval.startInclusive)), \(RFC3339.format(interval.endExclusive)))"
                }
                lines.append(line)
            }
        }
        let logs = list.operators.flatMap(\.logs)
        let byState = ["usable", "qualified", "readonly", "retired", "pending", "rejected"].compactMap { state in
            let n = logs.filter { $0.state.name == state }.count
            return n == 0 ? nil : "\(n) \(state)"
        }
        lines.append("\(list.operators.count) operator\(list.operators.count == 1 ? "" : "s"), \(logs.count) log\(logs.count == 1 ? "" : "s")"
            + (byState.isEmpty ? "" : " (\(byState.joined(separator: ", ")))")
            + "; \(list.operatorsInService.count) operator\(list.operatorsInService.count == 1 ? "" : "s") with a usable or qualified log")
        return lines.map(Printable.oneLine)
    }
}
