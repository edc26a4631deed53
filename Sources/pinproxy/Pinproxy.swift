import ArgumentParser
import ProxyCore

@main
struct Pinproxy: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pinproxy",
        abstract: "A local HTTPS forward proxy that enforces certificate pins for programs that cannot pin.",
        discussion: """
            Point a tool at it with HTTPS_PROXY=http://127.0.0.1:3128. For every CONNECT it checks the \
            upstream's certificate chain against the pin policy and tunnels or refuses with a reason. It \
            never decrypts traffic.

            Start with `pinproxy pin --cert FILE` (or `pinproxy pin HOST`) to get a rule, add it to the \
            policy, and check the file with `pinproxy check`.

            Shell completions: pinproxy --generate-completion-script bash|zsh|fish
            """,
        version: BuildInfo.version,
        subcommands: [RunCommand.self, CheckCommand.self, PinCommand.self, CTListCommand.self, QuarantineCommand.self])
}

/// Where the policy file is unless --config says otherwise.
let defaultConfigPath = "/etc/pinproxy/pinproxy.yaml"
