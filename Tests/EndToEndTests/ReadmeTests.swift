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
            "trap 'kill -KILL 0' EXIT",
            "ip link set lo up",
            "mkdir -p /tmp/pinproxy-try && mount -t tmpfs tmpfs /tmp/pinproxy-try",
            // Asks the kernel, without connecting (a connection would be a line in pinproxy's log).
            "listening() { for _ in $(seq 100); do [ -n \"$(ss -Hltn \"sport = :$1\")\" ] && return; sleep 0.1; done; echo \"nothing listens on $1\" >&2; }",
        ]
        for line in lines where !line.hasPrefix("#") && !line.isEmpty {
            if line.hasPrefix("curl") { script += ports.map { "listening \($0)" } }
            script.append(line.replacingOccurrences(of: ".build/release/pinproxy", with: "pinproxy"))
        }
        script.append("sleep 0.5")  // the lines pinproxy logs as a tunnel closes, before the end kills it
        // The mount point is made in the machine's /tmp: removed after, unless it was there before.
        let mountPoint = "/tmp/pinproxy-try"
        let hadMountPoint = FileManager.default.fileExists(atPath: mountPoint)
        defer { if !hadMountPoint { rmdir(mountPoint) } }
        // `pinproxy` on the PATH is the binary under test, as an installed one would be.
        let bin = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: bin) }
        try FileManager.default.createSymbolicLink(atPath: bin + "/pinproxy", withDestinationPath: Paths.pinproxy)
        script.insert("PATH=\(bin):$PATH", at: 0)
        // A process group of its own, which the script kills whole as it ends (a background
        // job's children too), and SIGTERM unblocked as in a user's shell (the test runner blocks it,
        // and `kill %1` must work).
        // (Already a process group's leader, as the runner starts its children, it keeps that group.)
        let asAUser = """
            import os, signal, sys
            if os.getpgid(0) != os.getpid(): os.setsid()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
            os.execvp(sys.argv[1], sys.argv[1:])
            """
        return try run("/usr/bin/env", ["python3", "-c", asAUser, "unshare", "--net", "--mount", "bash", "-c", script.joined(separator: "\n")],
                       timeout: timeout)
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

    // MARK: the worked example

    /// One `$ command` of the worked example and the output the README shows for it.
    struct Step {
        let command: String
        let output: [String]
    }

    /// The worked example's section of the README.
    static func workedExample() throws -> Substring {
        let text = readme
        let start = try #require(text.range(of: "\n## A worked example\n"))
        let end = try #require(text[start.upperBound...].range(of: "\n## "))
        return text[start.upperBound..<end.lowerBound]
    }

    /// The fenced blocks of `section`, with their info string (`yaml`, or empty).
    static func blocks(_ section: Substring) -> [(info: String, lines: [String])] {
        var blocks: [(info: String, lines: [String])] = [], current: (info: String, lines: [String])?
        for line in section.split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("```") {
                if let open = current { blocks.append(open); current = nil } else { current = (String(line.dropFirst(3)), []) }
            } else if current != nil {
                current!.lines.append(line)
            }
        }
        return blocks
    }

    /// The `$ ` commands of the unlabelled blocks, each with the lines up to the next command.
    static func steps(_ blocks: [(info: String, lines: [String])]) -> [Step] {
        var steps: [Step] = []
        for block in blocks where block.info.isEmpty && block.lines.first?.hasPrefix("$ ") == true {
            var command: String?, output: [String] = []
            for line in block.lines {
                if line.hasPrefix("$ ") {
                    if let command { steps.append(Step(command: command, output: output)) }
                    command = String(line.dropFirst(2))
                    output = []
                } else {
                    output.append(line)
                }
            }
            if let command { steps.append(Step(command: command, output: output)) }
        }
        return steps
    }

    /// The log lines of the blocks that start with `ts=`, each joined from its wrapped lines.
    static func logLines(_ blocks: [(info: String, lines: [String])]) -> [[String: String]] {
        blocks.filter { $0.info.isEmpty && $0.lines.first?.hasPrefix("ts=") == true }.flatMap { block in
            var joined: [String] = []
            for line in block.lines where !line.isEmpty {
                if line.hasPrefix("  "), !joined.isEmpty { joined[joined.count - 1] += " " + line.trimmingCharacters(in: .whitespaces) } else { joined.append(line) }
            }
            return joined.map(parseLogfmt)
        }
    }

    /// What differs from run to run: keys, certificate hashes and fingerprints, times and dates.
    static func normalized(_ line: String) -> String {
        line.replacing(/(spki|cert)-sha256:[A-Za-z0-9+\/]{43}=/, with: "PIN")
            .replacing(/([0-9A-F]{2}:){31}[0-9A-F]{2}/, with: "FINGERPRINT")
            .replacing(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/, with: "TIME")
    }

    /// A log line's keys whose values differ from run to run.
    static func volatile(_ key: String) -> Bool {
        ["ts", "client", "conn", "worker", "pin", "leaf_not_after", "duration_ms"].contains(key)
            || key.hasSuffix(".spki") || key.hasSuffix(".cert") || key.hasSuffix(".not_after") || key.hasSuffix(".pin")
    }

    /// "A worked example", every command as the README writes it (`pinproxy` the binary under test),
    /// in order, after the try-it server's first two lines, in /tmp/pinproxy-try: each prints what
    /// the README says it printed (keys, hashes and times aside), and pinproxy logs the lines the
    /// README shows, key for key.
    @Test func theWorkedExamplePrintsWhatTheReadmeShows() throws {
        let section = try Self.workedExample()
        let blocks = Self.blocks(section)
        let steps = Self.steps(blocks)
        #expect(steps.count >= 6, "\(steps.map(\.command))")
        let policy = try #require(blocks.first { $0.info == "yaml" }?.lines.joined(separator: "\n"))
        let runLine = try #require(section.firstMatch(of: /\(`(pinproxy run [^`]+)`\)/)?.1)
        let tryIt = try Self.commands(after: "### Try it against a local server").filter { !$0.hasPrefix("#") }
        var script = [
            tryIt[0],
            // The try-it server alone, as job %1 (the worked example runs with its proxy stopped).
            try #require(tryIt[1].components(separatedBy: " & ").first) + " &",
            "listening 8443",
            "cd /tmp/pinproxy-try",
        ]
        var stepIndex = 0, proxyStarted = false
        for step in steps {
            // The policy is written (with the pin step 1 printed) before the check that reads it.
            if step.command.hasPrefix("pinproxy check") {
                script.append("sed \"s|\(Self.firstPin(in: steps[0].output))|$(sed -n 's/^spki pin:  //p' step0.out)|\" > pinproxy.yaml <<'YAML'\n\(policy)\nYAML")
            }
            if step.command.hasPrefix("curl"), !proxyStarted {
                proxyStarted = true
                let command = runLine.hasSuffix("&") ? String(runLine.dropLast()).trimmingCharacters(in: .whitespaces) : String(runLine)
                script.append("\(command) 2> proxy.log &")
            }
            if step.command.hasPrefix("curl") { script += ["listening 8443", "listening 3129"] }
            if step.command.hasSuffix("&") {  // a server started in the background: nothing to show
                script += [step.command, "touch step\(stepIndex).out"]
            } else {
                script.append("{ \(step.command) ; } > step\(stepIndex).out 2>&1")
            }
            script.append("echo '@@@ \(stepIndex)'; cat step\(stepIndex).out")
            stepIndex += 1
        }
        script.append("sleep 0.5; echo '@@@ log'; cat proxy.log")
        let r = try Self.runAsAUser(script, timeout: 120)
        var outputs: [String: [String]] = [:], current = ""
        for line in r.stdout.replacingOccurrences(of: "\r\n", with: "\n").split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if line.hasPrefix("@@@ ") { current = String(line.dropFirst(4)); outputs[current] = [] } else { outputs[current, default: []].append(line) }
        }
        for (index, step) in steps.enumerated() {
            let got = (outputs["\(index)"] ?? []).map(Self.normalized).filter { !$0.isEmpty }
            let want = step.output.map(Self.normalized).filter { !$0.isEmpty }
            #expect(got == want, "$ \(step.command)\n--- the README shows:\n\(want.joined(separator: "\n"))\n--- it printed:\n\(got.joined(separator: "\n"))")
        }
        let logged = (outputs["log"] ?? []).map(parseLogfmt)
        #expect(Self.logLines(blocks).map { $0["event"] ?? "?" } == ["tunnel_allowed", "tunnel_refused"])
        for shown in Self.logLines(blocks) {
            let event = shown["event"] ?? "?"
            let match = logged.first { $0["event"] == event && $0["host"] == shown["host"] }
            let got = try #require(match, "no \(event) line in:\n\((outputs["log"] ?? []).joined(separator: "\n"))")
            let keys = Set(shown.keys).union(got.keys).filter { !Self.volatile($0) }
            for key in keys.sorted() where Self.normalized(shown[key] ?? "(none)") != Self.normalized(got[key] ?? "(none)") {
                Issue.record("\(event) \(key): the README shows \(shown[key] ?? "(none)"), pinproxy logged \(got[key] ?? "(none)")")
            }
        }
    }

    /// The first SPKI pin of an output.
    static func firstPin(in lines: [String]) -> String {
        lines.lazy.compactMap { $0.firstMatch(of: /spki-sha256:[A-Za-z0-9+\/]{43}=/).map { String($0.0) } }.first ?? "none"
    }
}
