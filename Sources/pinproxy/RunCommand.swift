import ArgumentParser
import Foundation
import PinPolicy
import TLSInspection

struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run the proxy.")

    @Option(name: .long, help: "The policy file.")
    var config: String = defaultConfigPath

    func run() throws {
        do {
            let policy = try PolicyLoader.load(file: config, pinFiles: PinFiles.loader)
            Output.err("pinproxy: \(config) is valid (\(CheckCommand.summary(policy))); the proxy itself is not built yet")
        } catch {
            for e in error.errors { Output.err("\(e.file):\(e.line):\(e.column): error: \(e.message)") }
            throw ExitCode(1)
        }
    }
}
