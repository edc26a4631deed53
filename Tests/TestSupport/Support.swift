import Foundation
import ProxyCore

/// Paths and process helpers shared by the test targets. Every process a test starts is bounded in
/// time and stopped by the test, with what it started (`ChildProcesses`); all traffic stays on 127.0.0.1.
public enum Paths {
    public static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    public static let fixtures = repository.appendingPathComponent("Tests/TLSInspectionTests/Fixtures").path
    public static let scripts = repository.appendingPathComponent("Tests/TestSupport/scripts").path

    /// The built `pinproxy` next to the test bundle.
    public static let pinproxy: String = {
        let candidates = [
            URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("pinproxy").path,
            repository.appendingPathComponent(".build/debug/pinproxy").path,
        ]
        return candidates.first { FileManager.default.isExecutableFile(atPath: $0) } ?? candidates[0]
    }()

    public static func fixture(_ name: String) -> String { "\(fixtures)/\(name)" }

    /// The Python of the 2026 TLS peers' venv (pyOpenSSL on cryptography's OpenSSL ≥ 3.5,
    /// tlslite-ng, curl_cffi): `.build-peers/`, made by the README's set-up line and by .ci/run
    /// from `Tests/TestSupport/scripts/peers.txt`.
    public static let peersPython = repository.appendingPathComponent(".build-peers/bin/python").path

    /// `peersPython`, or an error that says how to make it: a test that needs the peers fails
    /// without them (it is never skipped).
    public static func requirePeers() throws -> String {
        guard FileManager.default.isExecutableFile(atPath: peersPython) else {
            throw HelperError(message: "the TLS peers' venv is missing: run `python3 -m venv .build-peers && .build-peers/bin/pip install -r Tests/TestSupport/scripts/peers.txt` in the repository (the README's set-up line does)")
        }
        return peersPython
    }
}

public struct Run: Sendable {
    public let status: Int32
    public let stdout: String
    public let stderr: String
}

/// Runs a command to completion (killed after `timeout` seconds) in the repository.
public func run(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, timeout: Double = 60) throws -> Run {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    process.currentDirectoryURL = Paths.repository
    if let environment { process.environment = environment }
    let directory = try temporaryDirectory()
    let outPath = directory + "/stdout", errPath = directory + "/stderr"
    FileManager.default.createFile(atPath: outPath, contents: nil)
    FileManager.default.createFile(atPath: errPath, contents: nil)
    process.standardOutput = FileHandle(forWritingAtPath: outPath)
    process.standardError = FileHandle(forWritingAtPath: errPath)
    process.standardInput = FileHandle.nullDevice
    try ChildProcesses.launch(process)
    let deadline = Date().addingTimeInterval(timeout)
    while process.isRunning && Date() < deadline { usleep(5_000) }
    if process.isRunning { process.terminate() }
    // 0.1 s after a SIGTERM at the timeout, SIGKILL to it and what it started; after its own end,
    // to what it left running.
    ChildProcesses.end(process, grace: 0.1)
    let out = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    let err = (try? String(contentsOfFile: errPath, encoding: .utf8)) ?? ""
    try? FileManager.default.removeItem(atPath: directory)
    return Run(status: process.terminationStatus, stdout: out, stderr: err)
}

public func temporaryDirectory() throws -> String {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("pinproxy-test-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url.path
}

/// A directory of its own on tmpfs (/dev/shm), for a key log: removed when the test process exits
/// (a test's own `defer` could race a pinproxy that puts its key log back in a directory being removed).
public func memoryDirectory() throws -> String {
    let path = "/dev/shm/pinproxy-test-\(getpid())-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    memoryDirectories.withLock { made in
        if made.isEmpty { atexit { memoryDirectories.withLock { $0 }.forEach { try? FileManager.default.removeItem(atPath: $0) } } }
        made.append(path)
    }
    return path
}

/// What `memoryDirectory` made in this process.
private let memoryDirectories = Locked<[String]>([])

public func temporaryFile(_ text: String, name: String = "policy.yaml") throws -> String {
    let path = try temporaryDirectory() + "/" + name
    try text.write(toFile: path, atomically: true, encoding: .utf8)
    return path
}

/// A helper process that prints `PORT <n>` and runs until its stdin closes (`stop()`).
public final class Helper: @unchecked Sendable {
    public let process = Process()
    public private(set) var port: UInt16 = 0
    /// What it reported after its port (`name=value`).
    public private(set) var reported: [String: String] = [:]
    private let stdin = Pipe()
    private let stdout = Pipe()

    public init(_ executable: String, _ arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardInput = stdin
        process.standardOutput = stdout
        process.standardError = FileHandle.nullDevice
        try ChildProcesses.launch(process)
        var text = ""
        while !text.contains("\n") {
            let data = stdout.fileHandleForReading.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
        }
        // `PORT <n>`, then optional `name=value` words (a second listener's port, say).
        let words = text.split(separator: "\n").first(where: { $0.hasPrefix("PORT ") })?.split(separator: " ") ?? []
        guard words.count >= 2, let port = UInt16(words[1]) else {
            stop()
            throw HelperError(message: "\(executable) \(arguments) did not report a port: \(text)")
        }
        self.port = port
        for word in words.dropFirst(2) {
            let pair = word.split(separator: "=", maxSplits: 1)
            if pair.count == 2 { reported[String(pair[0])] = String(pair[1]) }
        }
    }

    /// Closes its stdin, which every helper script takes as the word to stop (and to stop what it
    /// started); 5 s later SIGTERM, 2 s after that SIGKILL to it and its group. A script that logs as
    /// it ends gets to finish its log: the signals come only to one that did not end.
    public func stop() {
        closeInput()
        ChildProcesses.end(process, grace: 5, termGrace: 2)
    }

    /// Closes its stdin and nothing else (a test of how a script ends).
    public func closeInput() { try? stdin.fileHandleForWriting.close() }

    /// Writes `line` and a newline to its stdin, for a script that reads commands there.
    public func send(line: String) { try? stdin.fileHandleForWriting.write(contentsOf: Data((line + "\n").utf8)) }

    deinit { stop() }
}

/// A process that runs while the test goes on (clients streaming across a reload, say).
public final class BackgroundRun: @unchecked Sendable {
    private let process = Process()
    private let stdout = Stdout()

    /// Its stdout, read to the end by a thread of its own (which holds this, not the run, so the
    /// run's `deinit` still comes when the test lets go of it).
    private final class Stdout: @unchecked Sendable {
        private let lock = NSLock()
        private var data = Data()
        private let ended = DispatchSemaphore(value: 0)

        func read(_ handle: FileHandle) {
            while case let chunk = handle.availableData, !chunk.isEmpty {
                lock.lock()
                data.append(chunk)
                lock.unlock()
            }
            ended.signal()
        }

        var text: String {
            lock.lock()
            defer { lock.unlock() }
            return String(decoding: data, as: UTF8.self)
        }

        /// Waits (at most `timeout` seconds) for the end of the output.
        func waitForTheEnd(timeout: Double) {
            if ended.wait(timeout: .now() + timeout) == .success { ended.signal() }  // for the next caller
        }
    }

    public init(_ executable: String, _ arguments: [String]) throws {
        let pipe = Pipe()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = pipe
        process.standardError = FileHandle.nullDevice
        try ChildProcesses.launch(process)
        let handle = pipe.fileHandleForReading
        Thread { [stdout] in stdout.read(handle) }.start()
    }

    public var isRunning: Bool { process.isRunning }
    public var pid: pid_t { process.processIdentifier }

    /// What it has written to stdout so far.
    public var outputSoFar: String { stdout.text }

    /// Asks it to end (SIGTERM) and returns its stdout (waiting at most `timeout` seconds, then it
    /// and its group are killed).
    public func stop(timeout: Double = 30) -> String {
        if process.isRunning { process.terminate() }
        return output(timeout: timeout)
    }

    /// Waits for it to end (at most `timeout` seconds, then SIGKILL to it and its group) and
    /// returns its stdout, all of it (or what came within 10 s more, should a child of its own
    /// still hold the pipe).
    public func output(timeout: Double) -> String {
        ChildProcesses.end(process, grace: timeout)
        stdout.waitForTheEnd(timeout: 10)
        return stdout.text
    }

    deinit { ChildProcesses.end(process, grace: 0) }
}

public struct HelperError: Error, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { message }
}

/// A TLS (or deliberately broken) upstream server on 127.0.0.1.
public final class Upstream: @unchecked Sendable {
    public let helper: Helper
    public var port: UInt16 { helper.port }

    /// - Parameters:
    ///   - leaf: a fixture name such as `leaf-ec256`: serves `<leaf>.chain.pem` with `<leaf>.key.pem`.
    public convenience init(_ leaf: String = "leaf-ec256", name: String? = nil, tls: String = "any", mode: String = "https",
                            chain: String? = nil, port: UInt16 = 0, extra: [String] = []) throws {
        try self.init(chainPath: Paths.fixture(chain ?? "\(leaf).chain.pem"), keyPath: Paths.fixture("\(leaf).key.pem"),
                      name: name ?? leaf, tls: tls, mode: mode, port: port, extra: extra)
    }

    /// Serves the chain and key at these paths (a PKI a test made in a temporary directory).
    public init(chainPath: String, keyPath: String, name: String, tls: String = "any", mode: String = "https",
                port: UInt16 = 0, extra: [String] = []) throws {
        var args = ["\(Paths.scripts)/upstream.py", "--name", name, "--tls", tls, "--mode", mode, "--port", String(port)]
        args += ["--cert", chainPath, "--key", keyPath, "--ca", Paths.fixture("good-root.pem")] + extra
        helper = try Helper("/usr/bin/env", ["python3"] + args)
    }

    public func stop() { helper.stop() }
}

/// An attacker that relays a genuine server's chain without its key, then aborts the handshake
/// (scripts/replayer.py). With `then`, only the first connection is treated so and every later one
/// goes to that port (a rogue server): the on-path attacker who lets the probe through.
public final class Replayer: @unchecked Sendable {
    public let helper: Helper
    public var port: UInt16 { helper.port }

    /// `truncate`: later connections get that many bytes of the genuine answer, then a FIN;
    /// `cutAfterCertificate`: its records up to the one carrying the TLS 1.2 Certificate, then a FIN.
    /// `stall`: later connections are read and never answered.
    public init(genuine: UInt16, abort: String, then rogue: UInt16? = nil, truncate: Int? = nil, cutAfterCertificate: Bool = false,
                stall: Bool = false) throws {
        var args = ["\(Paths.scripts)/replayer.py", "--genuine", String(genuine), "--abort", abort]
        if stall { args += ["--then", "1", "--stall"] }
        if let rogue { args += ["--then", String(rogue)] }
        if let truncate { args += ["--then", "1", "--truncate", String(truncate)] }
        if cutAfterCertificate { args += ["--then", "1", "--cut-after-certificate"] }
        helper = try Helper("/usr/bin/env", ["python3"] + args)
    }
}

/// What curl saw.
public struct CurlResult: Sendable {
    public let exitCode: Int32
    /// The CONNECT response status (`%{http_connect}`), 0 when none.
    public let connectStatus: Int
    /// The final HTTP status through the tunnel.
    public let status: Int
    public let body: String
    public let stderr: String
}

/// `curl --proxy http://127.0.0.1:<proxy> --cacert both-roots.pem https://<host>:<port>/`
public func curl(proxy: UInt16, host: String, port: UInt16, cacert: String = Paths.fixture("both-roots.pem"), extra: [String] = [],
                 environment: [String: String] = [:]) throws -> CurlResult {
    let marker = "\n--pinproxy-test--"
    let r = try run("/usr/bin/curl", ["-sS", "--max-time", "20", "--proxy", "http://127.0.0.1:\(proxy)", "--cacert", cacert,
                                      "-w", "\(marker)%{http_connect} %{http_code}"] + extra + ["https://\(host):\(port)/"],
                    environment: environment.isEmpty ? nil : ProcessInfo.processInfo.environment.merging(environment) { $1 }, timeout: 30)
    let parts = r.stdout.components(separatedBy: marker)
    let codes = (parts.last ?? "").split(separator: " ").compactMap { Int($0) }
    return CurlResult(exitCode: r.status, connectStatus: codes.first ?? 0, status: codes.count > 1 ? codes[1] : 0,
                      body: parts.count > 1 ? parts.dropLast().joined() : "", stderr: r.stderr)
}

/// Python's urllib with HTTPS_PROXY set: prints `OK <status> <body>` or `ERROR <reason>`.
public func urllib(proxy: UInt16, host: String, port: UInt16, cacert: String = Paths.fixture("both-roots.pem"),
                   environment extra: [String: String] = [:]) throws -> String {
    var environment = ProcessInfo.processInfo.environment.merging(extra) { $1 }
    environment["HTTPS_PROXY"] = "http://127.0.0.1:\(proxy)"
    environment["https_proxy"] = "http://127.0.0.1:\(proxy)"
    environment["NO_PROXY"] = ""
    environment["no_proxy"] = ""
    let r = try run("/usr/bin/env", ["python3", "\(Paths.scripts)/clients.py", "get", "https://\(host):\(port)/", cacert], environment: environment)
    return r.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
}

/// Sends raw bytes to the proxy and returns everything it answers until it closes (bounded).
public func rawExchange(port: UInt16, send: [UInt8], timeout: Double = 15, readLimit: Int = 1 << 20) throws -> String {
    String(decoding: try rawExchangeBytes(port: port, send: send, timeout: timeout, readLimit: readLimit), as: UTF8.self)
}

/// `rawExchange`'s answer as bytes, for replies that are not text (a TLS alert, a SOCKS reply).
/// The proxy's answer up to the end of its response head (or the connection's end), for a CONNECT
/// whose tunnel then stays open: it returns as soon as the head is in, however long the probe took
/// on a loaded machine, instead of waiting for a read timeout that a slow probe could outlast.
public func rawResponseHead(port: UInt16, send: [UInt8], timeout: Double = 15) throws -> String {
    String(decoding: try rawExchangeBytes(port: port, send: send, timeout: timeout, stopAtHeadEnd: true), as: UTF8.self)
}

public func rawExchangeBytes(port: UInt16, send: [UInt8], timeout: Double = 15, readLimit: Int = 1 << 20, stopAtHeadEnd: Bool = false) throws -> [UInt8] {
    let fd = try connectedSocket(port: port)
    defer { close(fd) }
    // SO_RCVTIMEO of zero means "block forever": keep the fraction.
    var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1_000_000))
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    if !send.isEmpty { _ = send.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65536)
    while received.count < readLimit {
        let n = recv(fd, &buffer, buffer.count, 0)
        if n <= 0 { break }
        received += buffer[0..<n]
        if stopAtHeadEnd && received.count >= 4 && received.indices.dropLast(3).contains(where: { received[$0..<$0 + 4].elementsEqual([13, 10, 13, 10]) }) { break }
    }
    return received
}

/// Whether the tests run under AddressSanitizer (`.ci/sanitizers`): then the test process exports
/// the ASan runtime's `__asan_init`, and the `pinproxy` beside it is built the same way. ASan pads
/// every allocation with redzones, keeps 1/8 more as shadow and holds freed memory in a quarantine,
/// so the tests that bound the proxy's RSS widen their bounds by `memoryFactor` and
/// `memorySlackKiB` in such a run; everywhere else both are neutral.
public enum AddressSanitizer {
    public static let isActive = dlsym(nil, "__asan_init") != nil
    public static let memoryFactor = isActive ? 2 : 1
    public static let memorySlackKiB = isActive ? 32 * 1024 : 0
}

/// RFC 3339 timestamps for policy files (`debug.until`, `expires`), relative to now.
public enum RFC3339Text {
    public static func inSeconds(_ seconds: Double) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        return formatter.string(from: Date().addingTimeInterval(seconds))
    }
}
