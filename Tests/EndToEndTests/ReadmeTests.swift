import Foundation
import Testing
import TestSupport

/// The README's first steps, run the way a user runs them: its own command lines, in order, with the
/// ports and paths it names. Each run has a network namespace of its own (its loopback is the only
/// interface, so 8443 and 3129 are free whatever the machine runs) and a private tmpfs on
/// /tmp/pinproxy-try (a user's own try-it files are never touched). The one change: the README's
/// `.build/release/pinproxy` is the binary under test.
@Suite(.serialized) struct ReadmeTests {
    static var readme: String { (try? String(contentsOf: Paths.repository.appendingPathComponent("README.md"), encoding: .utf8)) ?? "" }

    /// The first ```sh block after `heading`, as its lines.
    static func commands(after heading: String) throws -> [String] {
        let text = readme
        let section = try #require(text.range(of: "\n\(heading)\n"), "README has no '\(heading)'")
        let rest = text[section.upperBound...]
        let open = try #require(rest.range(of: "```sh\n"))
        let close = try #require(rest[open.upperBound...].range(of: "```"))
        return rest[open.upperBound..<close.lowerBound].split(separator: "\n").map(String.init)
    }

    /// Runs `lines` as one bash script in a namespace of its own; before a line that starts curl,
    /// waits (at most 10 s) for every loopback port the lines name to listen, as a user reads the
    /// server's and pinproxy's first words before typing on. Background jobs are killed at the end.
    static func runAsAUser(_ lines: [String], timeout: Double = 60) throws -> Run {
        let ports = Set(lines.joined(separator: " ").matches(of: /127\.0\.0\.1:(\d+)/).map { String($0.1) }).sorted()
        var script = [
            "set -u",
            // SIGKILL: what the test runner starts inherits its blocked SIGTERM.
            "trap 'kill -KILL $(jobs -p) 2>/dev/null; wait' EXIT",
            "ip link set lo up",
            "mkdir -p /tmp/pinproxy-try && mount -t tmpfs tmpfs /tmp/pinproxy-try",
            "listening() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return; sleep 0.1; done; echo \"nothing listens on $1\" >&2; }",
        ]
        for line in lines where !line.hasPrefix("#") && !line.isEmpty {
            if line.hasPrefix("curl") { script += ports.map { "listening \($0)" } }
            script.append(line.replacingOccurrences(of: ".build/release/pinproxy", with: Paths.pinproxy))
        }
        return try run("/usr/bin/unshare", ["--net", "--mount", "bash", "-c", script.joined(separator: "\n")], timeout: timeout)
    }

    /// "Try it against a local server": curl prints 200, and pinproxy logs what the README says
    /// it logs — the backup warning, the allowed tunnel with the try-it pin's label, and its close
    /// line resting on the probe (the rule's `mirror_checks: 0`, since s_server serves one
    /// connection at a time).
    @Test func tryItPrints200AndLogsWhatTheReadmeSays() throws {
        let lines = try Self.commands(after: "### Try it against a local server")
        #expect(lines.contains { $0.hasPrefix("curl ") } && lines.contains { $0.contains("openssl s_server") })
        let r = try Self.runAsAUser(lines)
        #expect(r.stdout == "200\n", "stdout: \(r.stdout)\nstderr: \(r.stderr)")
        let log = r.stderr.split(separator: "\n").map { parseLogfmt(String($0)) }
        #expect(log.contains { $0["event"] == "policy_warning" && $0["detail"]?.contains("has only one distinct pin") == true }, "\(r.stderr)")
        let allowed = try #require(log.first { $0["event"] == "tunnel_allowed" }, "\(r.stderr)")
        #expect(allowed["host"] == "local.test" && allowed["port"] == "8443" && allowed["pin_label"] == "try-it server key", "\(allowed)")
        let closed = try #require(log.first { $0["event"] == "tunnel_closed" && $0["host"] == "local.test" }, "\(r.stderr)")
        #expect(closed["verify"] == "probe-only" && closed["close_reason"] == "eof", "\(closed)")
        #expect(!log.contains { $0["event"] == "tunnel_refused" }, "\(r.stderr)")
    }

    /// The same steps without the try-it rule's `mirror_checks: 0`: what the README says happens
    /// then — curl fails fast, and the log names the line to add.
    @Test func tryItWithoutMirrorChecksZeroIsRefusedFastSayingWhy() throws {
        let yaml = try String(contentsOf: Paths.repository.appendingPathComponent("config/examples/try-local.yaml"), encoding: .utf8)
        #expect(yaml.contains("\n    mirror_checks: 0\n"))
        let policy = try temporaryFile(yaml.replacingOccurrences(of: "\n    mirror_checks: 0\n", with: "\n"), name: "try-local.yaml")
        let lines = try Self.commands(after: "### Try it against a local server").map {
            $0.replacingOccurrences(of: "config/examples/try-local.yaml", with: policy)
        }
        let r = try Self.runAsAUser(lines)
        #expect(r.stdout == "000\n" && r.stderr.contains("SSL_ERROR_SYSCALL"), "stdout: \(r.stdout)\nstderr: \(r.stderr)")
        let log = r.stderr.split(separator: "\n").map { parseLogfmt(String($0)) }
        let refused = try #require(log.first { $0["event"] == "tunnel_refused" }, "\(r.stderr)")
        #expect(refused["reason"] == "mirror_lost" && refused["stage"] == "mirror", "\(refused)")
        #expect(refused["detail"]?.contains("serves one connection at a time does that (give its rule mirror_checks: 0)") == true, "\(refused)")
    }
}
