import Foundation

// `pinproxy run` as a test's process (ProxyProcess), and the readers of pinproxy's log lines, logfmt
// or JSON, which ProxyProcess and the tests use.

/// Parses one logfmt line into its keys and values.
public func parseLogfmt(_ line: String) -> [String: String] {
    var out: [String: String] = [:]
    let chars = Array(line.unicodeScalars)
    var i = 0
    while i < chars.count {
        while i < chars.count && chars[i] == " " { i += 1 }
        var key = ""
        while i < chars.count && chars[i] != "=" && chars[i] != " " { key.unicodeScalars.append(chars[i]); i += 1 }
        guard i < chars.count, chars[i] == "=" else { break }
        i += 1
        var value = ""
        if i < chars.count && chars[i] == "\"" {
            i += 1
            while i < chars.count && chars[i] != "\"" {
                if chars[i] == "\\" && i + 1 < chars.count {
                    i += 1
                    switch chars[i] {
                    case "n": value += "\n"
                    case "t": value += "\t"
                    case "u":
                        let hex = String(String.UnicodeScalarView(chars[(i + 1)..<min(i + 5, chars.count)]))
                        if let v = UInt32(hex, radix: 16), let s = Unicode.Scalar(v) { value.unicodeScalars.append(s) }
                        i += 4
                    default: value.unicodeScalars.append(chars[i])
                    }
                } else {
                    value.unicodeScalars.append(chars[i])
                }
                i += 1
            }
            i += 1
        } else {
            while i < chars.count && chars[i] != " " { value.unicodeScalars.append(chars[i]); i += 1 }
        }
        out[key] = value
    }
    return out
}

/// A text (logfmt) or JSON log line, flattened the same way: arrays of objects become `key.N.field`.
public func parseLogLine(_ line: String) -> [String: String] {
    guard line.hasPrefix("{") else { return parseLogfmt(line) }
    guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return [:] }
    var out: [String: String] = [:]
    func text(_ value: Any) -> String {
        if let b = value as? Bool, type(of: value) == type(of: true as NSNumber) || "\(type(of: value))" == "__NSCFBoolean" { return b ? "true" : "false" }
        return "\(value)"
    }
    for (key, value) in object {
        if let list = value as? [[String: Any]] {
            for (index, item) in list.enumerated() {
                for (field, inner) in item { out["\(key).\(index).\(field)"] = text(inner) }
            }
        } else {
            out[key] = text(value)
        }
    }
    return out
}

/// `pinproxy run` as a process, with its log lines.
public final class ProxyProcess: @unchecked Sendable {
    public let process = Process()
    public let logPath: String
    public let configPath: String
    public private(set) var port: UInt16 = 0

    /// The proxy's stderr when the test asked for a pipe; nil when stderr goes straight to `logPath`.
    public let stderrPipe: Pipe?
    /// Appends what `readPipe` takes from `stderrPipe` to `logPath`.
    private let pipeLog: FileHandle?

    /// Starts `pinproxy run --config <yaml> --listen 127.0.0.1:0` and waits for its `started` line.
    ///
    /// - Parameter stderrPipe: when given, the proxy's stderr is this pipe instead of the log file.
    ///   The init reads it until the `started` line and then leaves it alone: later lines reach `log`
    ///   only through `readPipe`, so a test can play a log reader that stalls.
    public init(config yaml: String, arguments: [String] = [], listen: [String] = ["127.0.0.1:0"],
                environment: [String: String]? = nil, stderrPipe: Pipe? = nil) throws {
        let directory = try temporaryDirectory()
        configPath = directory + "/pinproxy.yaml"
        logPath = directory + "/stderr.log"
        try yaml.write(toFile: configPath, atomically: true, encoding: .utf8)
        FileManager.default.createFile(atPath: logPath, contents: nil)
        self.stderrPipe = stderrPipe
        pipeLog = stderrPipe == nil ? nil : FileHandle(forWritingAtPath: logPath)
        process.executableURL = URL(fileURLWithPath: Paths.pinproxy)
        process.arguments = ["run", "--config", configPath] + listen.flatMap { ["--listen", $0] } + arguments
        if let environment { process.environment = environment }
        process.standardError = stderrPipe ?? FileHandle(forWritingAtPath: logPath)
        process.standardOutput = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try ChildProcesses.launch(process)
        guard let started = stderrPipe == nil ? waitFor("started", timeout: 20) : readPipe(until: "started", timeout: 20) else {
            terminate()
            throw HelperError(message: "pinproxy did not start: \(log)")
        }
        let listenText = started["listen"] ?? ""
        port = UInt16(listenText.split(separator: ",").first?.split(separator: ":").last ?? "") ?? 0
    }

    public var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The whole lines of `log`: a pipe may have handed over the start of a line without its end.
    public var lines: [[String: String]] {
        log.split(separator: "\n", omittingEmptySubsequences: false).dropLast().filter { !$0.isEmpty }.map { parseLogLine(String($0)) }
    }

    public func events(_ event: String) -> [[String: String]] { lines.filter { $0["event"] == event } }

    /// Waits (bounded) for a line with this event that satisfies `matching`.
    @discardableResult
    public func waitFor(_ event: String, timeout: Double = 15, matching: ([String: String]) -> Bool = { _ in true }) -> [String: String]? {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if let line = events(event).first(where: matching) { return line }
            if !process.isRunning { return events(event).first(where: matching) }
            usleep(20_000)
        } while Date() < deadline
        return nil
    }

    /// Moves what the proxy wrote to `stderrPipe` into `log` until a whole line with this event that
    /// satisfies `matching` has arrived, and returns it. Bounded by `timeout`; nil without a pipe, at
    /// the timeout, or when the pipe ends (the proxy exited) without such a line.
    @discardableResult
    public func readPipe(until event: String, timeout: Double = 15, matching: ([String: String]) -> Bool = { _ in true }) -> [String: String]? {
        guard let stderrPipe, let pipeLog else { return nil }
        let fd = stderrPipe.fileHandleForReading.fileDescriptor
        let deadline = Date().addingTimeInterval(timeout)
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            if let line = events(event).first(where: matching) { return line }
            let remaining = deadline.timeIntervalSinceNow
            guard remaining > 0 else { return nil }
            var ready = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&ready, 1, Int32(min(remaining, 0.1) * 1000) + 1) > 0 else { continue }
            let n = read(fd, &buffer, buffer.count)
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return events(event).first(where: matching) }
            pipeLog.write(Data(buffer[0..<n]))
        }
    }

    /// The lines of an event once there are `count` of them (bounded wait): log lines are written
    /// by the proxy's writer thread, so a line can trail the response it belongs to.
    public func events(_ event: String, count: Int, timeout: Double = 10) -> [[String: String]] {
        let deadline = Date().addingTimeInterval(timeout)
        while events(event).count < count && Date() < deadline { usleep(20_000) }
        return events(event)
    }

    /// The line for one connection's end (`tunnel_refused`, `tunnel_closed`, `request_rejected`).
    public func waitForConn(_ event: String, host: String? = nil, timeout: Double = 15) -> [String: String]? {
        waitFor(event, timeout: timeout) { host == nil || $0["host"] == host }
    }

    public func signal(_ sig: Int32) { kill(process.processIdentifier, sig) }

    /// Writes `config` as the proxy's policy file and asks for a reload (SIGHUP). What the reload
    /// did (`policy_reloaded`, `policy_reload_failed`, `restart_required`) is the caller's to wait for.
    public func reload(_ config: String) throws {
        try config.write(toFile: configPath, atomically: true, encoding: .utf8)
        signal(SIGHUP)
    }

    /// SIGTERM, then waits (bounded) for the exit status.
    public func stop(timeout: Double = 20) -> Int32 {
        signal(SIGTERM)
        return waitForExit(timeout: timeout)
    }

    /// Waits (bounded; then SIGKILL) for the process to exit and returns its status.
    public func waitForExit(timeout: Double = 20) -> Int32 {
        ChildProcesses.end(process, grace: timeout)
        return process.terminationStatus
    }

    /// SIGKILL, at once.
    public func terminate() { ChildProcesses.end(process, grace: 0) }

    /// The proxy's open file descriptors (their numbers, ascending), from /proc/PID/fd.
    public var openDescriptors: [Int32] {
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.processIdentifier)/fd")) ?? []
        return entries.compactMap { Int32($0) }.sorted()
    }

    /// Changes the running proxy's RLIMIT_NOFILE with util-linux `prlimit --pid PID --nofile=SOFT:HARD`;
    /// a nil `hard` changes only the soft limit (which can then be raised again).
    public func limitDescriptors(soft: Int, hard: Int?) throws {
        let r = try run("/usr/bin/prlimit", ["--pid", String(process.processIdentifier), "--nofile=\(soft):\(hard.map(String.init) ?? "")"], timeout: 10)
        guard r.status == 0 else { throw HelperError(message: "prlimit failed: \(r.stderr)") }
    }

    /// Resident memory of the proxy in KiB, from /proc.
    public var rssKiB: Int {
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
    }

    /// How many file descriptors the proxy holds, from /proc.
    public var openFileDescriptors: Int {
        (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(process.processIdentifier)/fd").count) ?? -1
    }

    /// The CPU time the proxy uses (user and system, all its threads) while the caller waits
    /// `seconds`; infinity when `/proc` cannot tell (the proxy is gone), so that a bound on it fails.
    public func cpuSeconds(whileWaiting seconds: Double) -> Double {
        let before = cpuSeconds
        usleep(UInt32(seconds * 1_000_000))
        let after = cpuSeconds
        return before < 0 || after < 0 ? .infinity : after - before
    }

    /// The CPU time the proxy has used so far (`/proc/PID/stat`'s utime and stime); -1 when it
    /// cannot be read.
    private var cpuSeconds: Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
              let afterName = stat.range(of: ") ", options: .backwards) else { return -1 }
        let fields = stat[afterName.upperBound...].split(separator: " ")  // fields from the 3rd (state) on
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return -1 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    deinit { terminate() }
}
