import Foundation
import Testing
import TestSupport

/// No process a test starts outlives it: not the helper, and not what the helper started. A user
/// found an `openssl s_server` (from ccm_server.py) still running after `swift test`: started from
/// the test runner, whose threads block SIGTERM, it had inherited the blocked signal, so the
/// script's SIGTERM on its way out did nothing, and the script exited without it (issue 29).
///
/// Each test starts processes, notes them and everything below them in /proc while they run, stops
/// them the way the tests do, and then asserts that none of those processes runs and that their
/// process groups are empty.
@Suite struct ProcessCleanupTests {
    static let sigterm = UInt64(1) << (UInt64(SIGTERM) - 1)

    /// `pid` and the processes below it, once at least `count` of them are there (bounded wait:
    /// a script starts its child before it prints its port, but a wrapper may still be exec'ing).
    static func tree(of pid: pid_t, atLeast count: Int, timeout: Double = 10) throws -> [ProcessEntry] {
        let deadline = Date().addingTimeInterval(timeout)
        var seen: [ProcessEntry] = []
        repeat {
            seen = [ProcessEntry(pid: pid)].compactMap { $0 } + ProcessEntry.descendants(of: pid)
            if seen.count >= count { return seen }
            usleep(20_000)
        } while Date() < deadline
        throw HelperError(message: "\(pid) has \(seen.count) processes in its tree, not \(count): \(seen)")
    }

    static func expectNoneRunning(_ seen: [ProcessEntry], group: pid_t, sourceLocation: SourceLocation = #_sourceLocation) {
        let running = seen.filter(\.isRunning)
        #expect(running.isEmpty, "still running after the stop: \(running)", sourceLocation: sourceLocation)
        #expect(!ChildProcesses.groupIsRunning(group), "group \(group): \(ProcessEntry.all().filter { $0.group == group })",
                sourceLocation: sourceLocation)
    }

    static func ccmServer() throws -> Helper {
        try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/ccm_server.py", "--cert", Paths.fixture("leaf-ec256.chain.pem"),
                                    "--key", Paths.fixture("leaf-ec256.key.pem"), "--suites", "TLS_AES_128_GCM_SHA256"])
    }

    static func nginxServer() throws -> Helper {
        try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/nginx_server.py", "--cert", Paths.fixture("leaf-ec256.chain.pem"),
                                    "--key", Paths.fixture("leaf-ec256.key.pem")])
    }

    /// The helpers that start a process of their own, stopped as every test stops them
    /// (`Helper.stop`): their stdin closed. The child ends with the script, and was started with
    /// SIGTERM unblocked.
    @Test(arguments: ["ccm_server.py", "nginx_server.py"])
    func aHelperScriptsChildEndsWithIt(script: String) throws {
        let helper = try script == "ccm_server.py" ? Self.ccmServer() : Self.nginxServer()
        let seen = try Self.tree(of: helper.process.processIdentifier, atLeast: 2)
        let child = try #require(seen.first { $0.commandLine.contains(script == "ccm_server.py" ? "s_server" : "nginx -c") }, "\(seen)")
        #expect(child.blockedSignals.map { $0 & Self.sigterm == 0 } == true, "\(child) blocks SIGTERM")
        helper.stop()
        Self.expectNoneRunning(seen, group: helper.process.processIdentifier)
    }

    /// The scripts stop their child themselves, before the Swift side kills anything: when their
    /// stdin closes, and on SIGTERM.
    @Test(arguments: ["ccm_server.py", "nginx_server.py"], [false, true])
    func aHelperScriptStopsItsChildOnStdinCloseAndOnSIGTERM(script: String, sigterm: Bool) throws {
        let helper = try script == "ccm_server.py" ? Self.ccmServer() : Self.nginxServer()
        defer { helper.stop() }
        let seen = try Self.tree(of: helper.process.processIdentifier, atLeast: 2)
        if sigterm {
            kill(helper.process.processIdentifier, SIGTERM)  // the script alone, not its group
        } else {
            helper.closeInput()
        }
        let deadline = Date().addingTimeInterval(10)
        while seen.contains(where: \.isRunning) && Date() < deadline { usleep(20_000) }
        // Nothing has been killed yet: the script ended its child.
        let running = seen.filter(\.isRunning)
        #expect(running.isEmpty, "\(running)")
    }

    /// A script killed outright (SIGKILL to it alone) cannot stop its child: the child is still in
    /// the script's process group, and `stop()` kills that.
    @Test func aChildOfAKilledScriptIsStoppedThroughItsGroup() throws {
        let helper = try Self.ccmServer()
        let seen = try Self.tree(of: helper.process.processIdentifier, atLeast: 2)
        kill(helper.process.processIdentifier, SIGKILL)
        let orphan = try #require(seen.first { $0.commandLine.contains("s_server") })
        usleep(200_000)
        #expect(orphan.isRunning, "s_server ended with its script: this test no longer shows the group kill")
        helper.stop()
        Self.expectNoneRunning(seen, group: helper.process.processIdentifier)
    }

    /// The other ways the tests run processes: a TLS upstream and an interceptor (Python helpers), a
    /// flood (`BackgroundRun`, stopped with SIGTERM), and pinproxy itself (`ProxyProcess`).
    @Test func upstreamsInterceptorsFloodsAndTheProxyEndWithTheirTest() throws {
        let upstream = try Upstream("leaf-ec256", name: "cleanup")
        let interceptor = try Interceptor(genuine: upstream.port, rogue: upstream.port, strategy: .none)
        let proxy = try ProxyProcess(config: policy(ports: [upstream.port]))
        let flood = try BackgroundRun("/usr/bin/env", ["python3", "\(Paths.scripts)/flood.py", "silent", String(proxy.port), "300", "10", "100"])
        // Each is looked at once it is under way (a wrapper on its way to exec may block signals
        // for a moment): the flood once it holds its connections.
        let holding = Date().addingTimeInterval(20)
        while !flood.outputSoFar.hasPrefix("HOLDING") && flood.isRunning && Date() < holding { usleep(20_000) }
        #expect(flood.outputSoFar.hasPrefix("HOLDING 10"), "\(flood.outputSoFar)")
        let leaders = [upstream.helper.process.processIdentifier, interceptor.helper.process.processIdentifier,
                       proxy.process.processIdentifier, flood.pid]
        let seen = try leaders.flatMap { try Self.tree(of: $0, atLeast: 1) }
        #expect(seen.allSatisfy { $0.blockedSignals.map { $0 & Self.sigterm == 0 } == true },
                "\(seen.map { "\($0): \(String($0.blockedSignals ?? 0, radix: 16))" })")
        _ = flood.stop(timeout: 10)
        #expect(proxy.stop() == 0)
        interceptor.stop()
        upstream.stop()
        for leader in leaders { Self.expectNoneRunning(seen.filter { $0.group == leader }, group: leader) }
    }

    /// `run` at its timeout ends the command and what it started; a command that exits leaving a
    /// process in the background does not leave it running either. (Foundation counts the command
    /// as running while anything it started holds the descriptor it watches, so `run` waits for
    /// its timeout then too.)
    @Test(arguments: [true, false])
    func aCommandsChildrenEndWithIt(commandOutlivesTimeout: Bool) throws {
        // A sleep no other process runs: found by its argument afterwards.
        let mark = "300.\(UInt32.random(in: 100_000...999_999))"
        let script = commandOutlivesTimeout ? "sleep \(mark) & sleep \(mark)" : "sleep \(mark) > /dev/null 2>&1 &"
        let result = try run("/bin/sh", ["-c", script], timeout: 2)
        if !commandOutlivesTimeout { #expect(result.status == 0, "\(result)") }
        let left = ProcessEntry.all().filter { $0.commandLine == "sleep \(mark)" && $0.isRunning }
        #expect(left.isEmpty, "\(left)")
    }
}
