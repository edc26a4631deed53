import Foundation
import Testing
import TestSupport

/// journald as a sink: when stderr is the journal's stream (`JOURNAL_STREAM` names its device and
/// inode), every event is one native-protocol entry with its priority and its keys as fields. A
/// datagram socket of the test's stands in for journald (`PINPROXY_TEST_JOURNAL_SOCKET`, read by
/// debug builds only).
@Suite(.serialized) struct JournalTests {
    /// pinproxy with stderr to a file, `JOURNAL_STREAM` set to that file's device and inode (or to
    /// another inode when `matching` is false), and the journal's socket moved to `journal`.
    final class JournalledProxy {
        let process = Process()
        let stderrPath: String
        let configPath: String

        init(config: String, journal: String, matching: Bool = true) throws {
            let directory = try temporaryDirectory()
            stderrPath = directory + "/stderr.log"
            configPath = directory + "/pinproxy.yaml"
            try config.write(toFile: configPath, atomically: true, encoding: .utf8)
            FileManager.default.createFile(atPath: stderrPath, contents: nil)
            let stderr = FileHandle(forWritingAtPath: stderrPath)!
            var facts = stat()
            fstat(stderr.fileDescriptor, &facts)
            var environment = ProcessInfo.processInfo.environment
            environment["JOURNAL_STREAM"] = "\(facts.st_dev):\(matching ? facts.st_ino : facts.st_ino + 1)"
            environment["PINPROXY_TEST_JOURNAL_SOCKET"] = journal
            process.executableURL = URL(fileURLWithPath: Paths.pinproxy)
            process.arguments = ["run", "--config", configPath, "--listen", "127.0.0.1:0"]
            process.environment = environment
            process.standardError = stderr
            process.standardOutput = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            try ChildProcesses.launch(process)
        }

        var stderr: String { (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? "" }

        func stop() -> Int32 {
            kill(process.processIdentifier, SIGTERM)
            ChildProcesses.end(process, grace: 20)
            return process.terminationStatus
        }

        /// A test that threw before `stop()` leaves no proxy running.
        deinit { ChildProcesses.end(process, grace: 0) }
    }

    @Test func eventsAreJournalEntriesWithPriorityAndFields() throws {
        let good = try Upstream("leaf-ec256", name: "good")
        let rogue = try Upstream("rogue-leaf", name: "rogue", port: good.port, extra: ["--bind", "127.0.0.2"])
        let directory = try temporaryDirectory()
        let journal = try JournalListener(path: directory + "/journal")
        let config = policy(ports: [good.port], rules: apiRule(pinsLine(Pins.leafEC)),
                            resolve: "  api.pinproxy.test: 127.0.0.1\n  evil.api.pinproxy.test: 127.0.0.2",
                            extra: "  - host: evil.api.pinproxy.test\n\(pinsLine(Pins.leafEC))")
        let proxy = try JournalledProxy(config: config, journal: directory + "/journal")
        let started = try #require(journal.entry { $0["PINPROXY_EVENT"] == "started" })
        #expect(started["PRIORITY"] == "6")
        #expect(started["SYSLOG_IDENTIFIER"] == "pinproxy")
        #expect(started["PINPROXY_VERSION"]?.isEmpty == false)
        let port = try #require(started["PINPROXY_LISTEN"]?.split(separator: ":").last.flatMap { UInt16($0) })

        let allowed = try curl(proxy: port, host: "api.pinproxy.test", port: good.port)
        #expect(allowed.body == "hello from good\n")
        let refused = try connectResponse(proxy: port, target: "evil.api.pinproxy.test:\(good.port)")
        #expect(statusLine(refused) == "HTTP/1.1 502 Certificate Pin Mismatch")

        let tunnel = try #require(journal.entry { $0["PINPROXY_EVENT"] == "tunnel_allowed" })
        #expect(tunnel["PRIORITY"] == "6")
        #expect(tunnel["MESSAGE"] == "tunnel_allowed api.pinproxy.test:\(good.port)")
        #expect(tunnel["PINPROXY_PIN"] == Pins.leafEC)
        let refusal = try #require(journal.entry { $0["PINPROXY_EVENT"] == "tunnel_refused" })
        #expect(refusal["PRIORITY"] == "4")
        #expect(refusal["MESSAGE"] == "tunnel_refused evil.api.pinproxy.test:\(good.port): pin_mismatch")
        #expect(refusal["PINPROXY_HOST"] == "evil.api.pinproxy.test")
        #expect(refusal["PINPROXY_PORT"] == String(good.port))
        #expect(refusal["PINPROXY_REASON"] == "pin_mismatch")
        #expect(refusal["PINPROXY_VERDICT"] == "refused")
        #expect(refusal["PINPROXY_STATUS"] == "502")
        #expect(refusal["PINPROXY_CHAIN_0_SPKI"] == Pins.rogueLeaf)
        #expect(refusal["PINPROXY_EXPECTED_0_PIN"] == Pins.leafEC)
        #expect(refusal["PINPROXY_HINT"]?.contains("pinproxy pin evil.api.pinproxy.test:\(good.port)") == true)

        #expect(proxy.stop() == 0)
        let stopped = try #require(journal.entry { $0["PINPROXY_EVENT"] == "stopped" })
        #expect(stopped["PINPROXY_ALLOWED"] == "1" && stopped["PINPROXY_REFUSED"] == "1")
        #expect(stopped["PINPROXY_VERSION"] == started["PINPROXY_VERSION"])
        #expect(proxy.stderr.isEmpty, "\(proxy.stderr)")  // nothing went to the stream as well
        _ = rogue
    }

    /// A policy that does not load is reported to the journal at error priority, one entry per error.
    @Test func loadErrorsAreErrorPriority() throws {
        let directory = try temporaryDirectory()
        let journal = try JournalListener(path: directory + "/journal")
        let proxy = try JournalledProxy(config: "version: 1\ndefaults: {unpinned: maybe}\n", journal: directory + "/journal")
        proxy.process.waitUntilExit()
        #expect(proxy.process.terminationStatus == 1)
        let failed = try #require(journal.entry { $0["PINPROXY_EVENT"] == "policy_load_failed" })
        #expect(failed["PRIORITY"] == "3")
        #expect(failed["PINPROXY_LINE"] == "2")
        #expect(failed["MESSAGE"]?.hasPrefix("policy_load_failed: ") == true)
    }

    /// The journal's stream without journald's socket (journald stopped): lines on the stream, which
    /// journald still reads when it comes back, rather than entries sent nowhere.
    @Test func withoutTheJournalSocketLinesGoToTheStream() throws {
        let directory = try temporaryDirectory()
        let proxy = try JournalledProxy(config: policy(ports: [443]), journal: directory + "/no-journald")
        let deadline = Date().addingTimeInterval(15)
        while !proxy.stderr.contains("event=started") && Date() < deadline { usleep(20_000) }
        #expect(proxy.stop() == 0)
        #expect(proxy.stderr.split(separator: "\n").map { parseLogLine(String($0))["event"] ?? "?" } == ["policy_loaded", "started", "stopping", "stopped"])
    }

    /// stderr redirected elsewhere (its inode is not the one `JOURNAL_STREAM` names): lines on stderr,
    /// nothing to the journal.
    @Test func aStderrThatIsNotTheJournalStreamGetsLines() throws {
        let directory = try temporaryDirectory()
        let journal = try JournalListener(path: directory + "/journal")
        let proxy = try JournalledProxy(config: policy(ports: [443]), journal: directory + "/journal", matching: false)
        let deadline = Date().addingTimeInterval(15)
        while !proxy.stderr.contains("event=started") && Date() < deadline { usleep(20_000) }
        #expect(proxy.stop() == 0)
        let lines = proxy.stderr.split(separator: "\n").map { parseLogLine(String($0)) }
        #expect(lines.map { $0["event"] ?? "?" } == ["policy_loaded", "started", "stopping", "stopped"])
        #expect(journal.entries(waiting: 0.3).isEmpty)
    }
}
