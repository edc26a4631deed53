import ArgumentParser
import Foundation
import PinPolicy
import TLSInspection

struct CheckCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check",
        abstract: "Validate and lint the policy file, like nginx -t.",
        discussion: """
            Prints every error with file:line:column and exits 1, or prints a summary and the lint \
            warnings and exits 0. --explain HOST:PORT shows which rule applies to that CONNECT target \
            and which pins it accepts.
            """)

    @Option(name: .long, help: "The policy file.")
    var config: String = defaultConfigPath

    @Flag(name: .long, help: "Exit 1 when there are warnings too.")
    var strict = false

    @Option(name: .long, help: ArgumentHelp("Explain the decision for a CONNECT target.", valueName: "HOST:PORT"))
    var explain: [String] = []

    func run() throws {
        let policy: Policy
        do {
            policy = try PolicyLoader.load(file: config, pinFiles: PinFiles.loader)
        } catch {
            for e in error.errors { Output.err("\(e.file):\(e.line):\(e.column): error: \(e.message)") }
            Output.err("\(config): \(error.errors.count) error\(error.errors.count == 1 ? "" : "s"); the policy was not loaded")
            throw ExitCode(1)
        }
        let warnings = policy.lint(at: Date())
        Output.out("\(config): OK")
        Output.out(Self.summary(policy))
        for w in warnings { Output.out("\(config):\(w.line): warning[\(w.code)]: \(w.message)") }

        for target in explain {
            Output.out("")
            switch Authority.parse(target) {
            case .success(let authority):
                for line in policy.explain(authority) { Output.out(line) }
            case .failure(let problem):
                Output.err("--explain \(target): \(problem) (a CONNECT with this target is refused with 400)")
                throw ExitCode(1)
            }
        }
        if strict && !warnings.isEmpty {
            Output.err("\(warnings.count) warning\(warnings.count == 1 ? "" : "s") with --strict")
            throw ExitCode(1)
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
