import ArgumentParser
import Foundation
import PinPolicy
import ProxyCore
import TLSInspection

struct QuarantineCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "quarantine",
        abstract: "List or lift the quarantines of a running pinproxy (through proxy.control_socket).",
        discussion: """
            A host:port is quarantined when a check catches an interception (interception_suspected). \
            These commands ask the running proxy through its control socket: --socket PATH, else the \
            policy's proxy.control_socket. The socket is mode 0600: run them as root or as pinproxy's user.
            """,
        subcommands: [List.self, Lift.self])

    /// Where the control socket is: `--socket`, else the config's `proxy.control_socket`.
    struct SocketOptions: ParsableArguments {
        @Option(name: .long, help: ArgumentHelp("The control socket (default: the policy's proxy.control_socket).", valueName: "PATH"))
        var socket: String?

        @Option(name: .long, help: ArgumentHelp("The policy file that names the control socket.", valueName: "FILE"))
        var config: String = defaultConfigPath

        /// The socket's path, or a message and exit 1.
        func path() throws -> String {
            if let socket { return socket }
            let policy: Policy
            do {
                policy = try PolicyLoader.load(file: config, pinFiles: PinFiles.loader)
            } catch {
                Output.loadErrors(error)
                Output.err("\(config): the policy was not loaded, so its proxy.control_socket is not known; fix it, or name the socket with --socket PATH")
                throw ExitCode(1)
            }
            guard let path = policy.proxy.controlSocket else {
                Output.err("\(config) sets no proxy.control_socket: pinproxy serves no control socket; add 'control_socket: /run/pinproxy/control.sock' under proxy: and restart it, or name the socket with --socket PATH")
                throw ExitCode(1)
            }
            return path
        }

        /// Prints the server's answer; exit 1 when it could not be asked or answered `error …`.
        func ask(_ request: String) throws {
            let path = try path()
            let answer: String
            do {
                answer = try ControlClient.ask(request, socket: path)
            } catch {
                Output.err("pinproxy quarantine: \(error)")
                throw ExitCode(1)
            }
            let lines = answer.split(separator: "\n").map(String.init)
            if lines.first?.hasPrefix("error ") == true {
                for line in lines { Output.err(line) }
                throw ExitCode(1)
            }
            for line in lines { Output.out(line) }
        }
    }

    struct List: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "Print one line per quarantined host:port (nothing when there is none).",
            discussion: "host=HOST port=PORT since=RFC3339 until=RFC3339 rule=RULE: since the catch, until it ends by itself.")

        @OptionGroup var options: SocketOptions

        func run() throws { try options.ask("quarantine list") }
    }

    struct Lift: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "lift",
            abstract: "End a quarantine now (logged quarantine_lifted reason=operator).",
            discussion: """
                Prints 'lifted host=… port=…', or 'not_quarantined host=… port=…' when none was in force \
                (exit 0 both). --all lifts every quarantine, one 'lifted' line each.
                """)

        @Argument(help: ArgumentHelp("The quarantined host:port ([IPv6]:PORT for an IPv6 address).", valueName: "HOST:PORT"))
        var target: String?

        @Flag(name: .long, help: "Lift every quarantine.")
        var all = false

        @OptionGroup var options: SocketOptions

        func validate() throws {
            switch (target, all) {
            case (nil, false): throw ValidationError("name the HOST:PORT to lift, or --all")
            case (_?, true): throw ValidationError("HOST:PORT or --all, not both")
            case (let target?, false):
                if case .failure(let problem) = Authority.parse(target) { throw ValidationError("\(target) is not HOST:PORT: \(problem)") }
            default: break
            }
        }

        func run() throws { try options.ask(all ? "quarantine lift --all" : "quarantine lift \(target ?? "")") }
    }
}
