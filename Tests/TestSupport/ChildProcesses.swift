import Foundation
import ProxyCore

/// How the tests start and end processes, so that none outlives its test — not a helper script, and
/// not what the script started (`openssl s_server` under ccm_server.py, nginx under nginx_server.py).
///
/// Foundation's `Process` makes each child the leader of a process group of its own, and what that
/// child starts stays in the group unless it leaves on purpose (none of the helpers does). So a
/// process is ended by its group: asked first (its stdin closed, or SIGTERM), then after a bounded
/// wait SIGKILL to the whole group; and once the leader has ended, SIGKILL once more to the group
/// for any child it left behind. Every group started is noted, and one still noted when the test
/// process exits (a test let go of its process without stopping it) is killed then.
///
/// The test runner's threads block nearly every signal (Swift's cooperative pool does), and a child
/// inherits the mask of the thread that spawned it: a helper started from there ignored SIGTERM, and
/// so did every process it started in turn (an `openssl s_server` outlived the suite that way).
/// `launch` spawns with only SIGPIPE blocked.
public enum ChildProcesses {
    /// Starts `process` with no signal blocked but SIGPIPE, and notes its group.
    public static func launch(_ process: Process) throws {
        // Foundation spawns on the calling thread, which hands its mask to the child. SIGPIPE stays
        // blocked: one raised on this thread while it was blocked may be pending here, and would
        // end the test runner if we let it through.
        var spawnMask = sigset_t()
        sigemptyset(&spawnMask)
        sigaddset(&spawnMask, SIGPIPE)
        var saved = sigset_t()
        pthread_sigmask(SIG_SETMASK, &spawnMask, &saved)
        defer { pthread_sigmask(SIG_SETMASK, &saved, nil) }
        try process.run()
        let pid = process.processIdentifier
        // A group is only ever killed when the child leads it (a child that has already exited has
        // no group left to kill).
        let group = getpgid(pid)
        guard group == pid || group == -1 else {
            kill(pid, SIGKILL)
            process.waitUntilExit()
            throw HelperError(message: "\(process.executableURL?.path ?? "?") was not started in a process group of its own (group \(group), pid \(pid))")
        }
        noted.withLock { book in
            if !book.atExitInstalled {
                atexit { ChildProcesses.noted.withLock { $0.groups }.forEach { ChildProcesses.killGroup($0, SIGKILL) } }
                book.atExitInstalled = true
            }
            book.groups.insert(pid)
        }
    }

    /// Ends `process` and its group. The caller has asked it to end (closed its stdin, sent
    /// SIGTERM) or `grace` is 0. After `grace` seconds, if `termGrace` is given, it gets SIGTERM
    /// and that much longer; then it and its group get SIGKILL. Once it has ended, whatever is left
    /// of its group gets SIGKILL: a helper that stops its own children has done so before it exits.
    public static func end(_ process: Process, grace: Double, termGrace: Double? = nil) {
        let pid = process.processIdentifier
        guard pid > 1 else { return }  // never started: there is no group, and kill(0) or kill(-1) would hit ours
        waitForEnd(process, seconds: grace)
        if let termGrace, process.isRunning {
            kill(pid, SIGTERM)
            waitForEnd(process, seconds: termGrace)
        }
        if process.isRunning { killGroup(pid, SIGKILL) }
        process.waitUntilExit()
        killGroup(pid, SIGKILL)
        // A signal is delivered after kill() returns: wait (bounded) until the group has ended.
        let deadline = Date().addingTimeInterval(5)
        while groupIsRunning(pid) && Date() < deadline { usleep(10_000) }
        noted.withLock { _ = $0.groups.remove(pid) }
    }

    private static func waitForEnd(_ process: Process, seconds: Double) {
        let deadline = Date().addingTimeInterval(seconds)
        while process.isRunning && Date() < deadline { usleep(10_000) }
    }

    /// Whether a process of the group `leader` led still runs. One that has ended and waits to be
    /// reaped does not count: an orphan's new parent is init, which may take seconds to reap it.
    public static func groupIsRunning(_ leader: pid_t) -> Bool {
        guard leader > 1, kill(-leader, 0) == 0 else { return false }
        return ProcessEntry.all().contains { $0.group == leader && $0.state != "Z" }
    }

    /// Sends `signal` to the group `leader` leads (never to ours, or to every process).
    public static func killGroup(_ leader: pid_t, _ signal: Int32) {
        guard leader > 1, leader != getpgrp() else { return }
        kill(-leader, signal)
    }

    /// The groups launched and not yet ended, and whether the exit handler that kills them is in place.
    private struct Book {
        var groups: Set<pid_t> = []
        var atExitInstalled = false
    }
    private static let noted = Locked(Book())
}

/// A process as /proc shows it, for the tests that check nothing is left behind.
public struct ProcessEntry: Sendable, Equatable, CustomStringConvertible {
    public let pid: pid_t
    public let parent: pid_t
    public let group: pid_t
    /// Clock ticks after boot at which it started: with the pid, it names one process even if the
    /// number is used again.
    public let startTicks: UInt64
    /// `R`, `S`, `Z` (ended, not yet reaped), …
    public let state: Character
    public let commandLine: String

    public var description: String { "\(pid) (parent \(parent), group \(group), \(state)) \(commandLine)" }

    /// Every process /proc lists now.
    public static func all() -> [ProcessEntry] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
        return names.compactMap { pid_t($0) }.compactMap(ProcessEntry.init(pid:))
    }

    /// `pid` now, or nil when it has gone.
    public init?(pid: pid_t) {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let nameEnd = stat.range(of: ") ", options: .backwards) else { return nil }
        // After the name: state, ppid, pgrp, session, tty, tpgid, flags, 4 fault counts, utime,
        // stime, cutime, cstime, priority, nice, threads, itrealvalue, starttime (the 20th).
        let fields = stat[nameEnd.upperBound...].split(separator: " ")
        guard fields.count > 19, let state = fields[0].first, let parent = pid_t(fields[1]), let group = pid_t(fields[2]),
              let start = UInt64(fields[19]) else { return nil }
        let raw = (try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline"))) ?? Data()
        self.pid = pid
        self.parent = parent
        self.group = group
        self.startTicks = start
        self.state = state
        self.commandLine = raw.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }.joined(separator: " ")
    }

    /// The same process is still there and has not ended (a zombie has ended: only its parent's
    /// wait is missing).
    public var isRunning: Bool {
        guard let now = ProcessEntry(pid: pid), now.startTicks == startTicks else { return false }
        return now.state != "Z"
    }

    /// The processes below `pid` (its children, theirs, …) now.
    public static func descendants(of pid: pid_t) -> [ProcessEntry] {
        let everyone = all()
        var found: [ProcessEntry] = []
        var frontier: Set<pid_t> = [pid]
        // Bounded: a process tree is far shallower than this.
        for _ in 0..<64 where !frontier.isEmpty {
            let next = everyone.filter { frontier.contains($0.parent) }
            found += next
            frontier = Set(next.map(\.pid))
        }
        return found
    }

    /// Which signals it has blocked (`SigBlk` in /proc/PID/status, bit N-1 for signal N); nil when gone.
    public var blockedSignals: UInt64? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigBlk:") }) else { return nil }
        return UInt64(line.dropFirst("SigBlk:".count).trimmingCharacters(in: .whitespaces), radix: 16)
    }
}
