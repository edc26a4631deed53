import Foundation
import Testing
import TestSupport

/// Out of file descriptors is pinproxy's own limit, not the upstream's fault: the client gets a 503
/// with Retry-After (`out_of_file_descriptors`), accepting pauses with one log line per 10 s, and
/// the proxy recovers when descriptors are free again. The limit is lowered at runtime with
/// `prlimit`, to exactly where the next descriptor fails, so nothing here depends on timing.
@Suite(.serialized) struct FileDescriptorTests {
    /// The RLIMIT_NOFILE under which exactly `free` more descriptors can be opened. A new
    /// descriptor takes the lowest free number and fails with EMFILE when that number is not below
    /// the limit, so the limit is the (free + 1)th free number: this counts numbers, not open
    /// descriptors (the proxy may hold one with a high number, such as one inherited from the test
    /// runner).
    static func limit(leaving free: Int, open: [Int32]) -> Int {
        let taken = Set(open)
        var number = 0, skipped = 0
        while true {  // ends: past the highest open descriptor every number is free
            if !taken.contains(Int32(number)) {
                if skipped == free { return number }
                skipped += 1
            }
            number += 1
        }
    }

    /// Waits (bounded) until the proxy holds `count` descriptors; returns what it holds then.
    static func waitForDescriptors(_ proxy: ProxyProcess, count: Int, timeout: Double = 10) -> [Int32] {
        let deadline = Date().addingTimeInterval(timeout)
        var open = proxy.openDescriptors
        while open.count != count && Date() < deadline {
            usleep(20_000)
            open = proxy.openDescriptors
        }
        return open
    }

    /// K CONNECTs whose probes wait on a silent upstream hold 2 descriptors each (the client's and
    /// the probe's socket); the limit leaves room for them and one more accept, so the next
    /// CONNECT is accepted and its probe's `socket()` fails with EMFILE: 503, and no second address
    /// is tried. When the held connections are gone the proxy serves again and its descriptor
    /// count returns to where it started.
    @Test func outOfDescriptorsIs503AndTheProxyRecovers() throws {
        let k = 6
        let good = try Upstream("leaf-ec256", name: "good")
        let silent = try Upstream("leaf-ec256", name: "silent", mode: "silent")
        let resolve = (0...k).map { "  h\($0).pinproxy.test: [127.0.0.1, 127.0.0.2]" }.joined(separator: "\n") + "\n  api.pinproxy.test: 127.0.0.1"
        let rules = "rules:\n  - host: \"**.pinproxy.test\"\n" + pinsLine(Pins.leafEC)
        // Each name is its own probe (probes are shared per name, port and addresses); the probes
        // stay pending for the whole test.
        let proxy = try ProxyProcess(config: policy(ports: [good.port, silent.port], rules: rules, resolve: resolve, proxy: "probe_timeout: 120s"))
        let before = proxy.openDescriptors
        let limit = Self.limit(leaving: 2 * k + 1, open: before)
        try proxy.limitDescriptors(soft: limit, hard: limit)

        let held = try (0..<k).map { try OpenConnection(port: proxy.port, send: "CONNECT h\($0).pinproxy.test:\(silent.port) HTTP/1.1\r\n\r\n") }
        let holding = Self.waitForDescriptors(proxy, count: before.count + 2 * k)
        try #require(holding.count == before.count + 2 * k, "\(before) → \(holding)")

        let response = try connectResponse(proxy: proxy.port, target: "h\(k).pinproxy.test:\(silent.port)")
        #expect(statusLine(response) == "HTTP/1.1 503 Out of File Descriptors")
        #expect(header("Proxy-Status", in: response) == "pinproxy; error=connection_limit_reached; details=\"out_of_file_descriptors\"")
        #expect(header("Retry-After", in: response) == "1")
        let refused = try #require(proxy.waitForConn("tunnel_refused", host: "h\(k).pinproxy.test"))
        #expect(refused.refusal == .network(.outOfFileDescriptors) && refused["status"] == "503")
        #expect(refused["detail"] == "no socket for 127.0.0.1:\(silent.port): Too many open files, pinproxy's limit (EMFILE); retry when tunnels have closed")
        #expect(refused["hint"]?.contains("LimitNOFILE") == true)

        // Recovery, under the same limit. A probe outlives a client that leaves (ProbeHub keeps the
        // flight until the handshake ends or probe_timeout), so the silent upstream goes too: its
        // sockets close and the pending probes end now.
        held.forEach { $0.close() }
        silent.stop()
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: good.port)
        #expect(result.connectStatus == 200 && result.body == "hello from good\n", "\(result.stderr)")
        #expect(proxy.waitFor("tunnel_closed") { $0["host"] == "api.pinproxy.test" } != nil)
        let after = Self.waitForDescriptors(proxy, count: before.count)
        #expect(after == before)
    }

    /// When `accept()` itself fails for want of descriptors, the waiting client is not left to its
    /// connect timeout: pinproxy gives up its reserve descriptor for a moment, takes the client off
    /// the backlog and answers 503 at once. One `accept_failed` line per 10 s says how many were so
    /// answered. Once descriptors are back, clients are served as before.
    @Test func outOfDescriptorsAtAcceptIsA503AtOnceAndAcceptingGoesOn() throws {
        let proxy = try ProxyProcess(config: policy(ports: [443]))
        let soft = try #require(Self.softLimit(of: proxy))
        try proxy.limitDescriptors(soft: Self.limit(leaving: 0, open: proxy.openDescriptors), hard: nil)

        for _ in 0..<3 {
            let waiting = try OpenConnection(port: proxy.port, send: "CONNECT api.pinproxy.test:443 HTTP/1.1\r\n\r\n")
            defer { waiting.close() }
            let response = waiting.receive(timeout: 10)
            #expect(statusLine(response) == "HTTP/1.1 503 Out of File Descriptors")
            #expect(header("Proxy-Status", in: response) == "pinproxy; error=connection_limit_reached; details=\"out_of_file_descriptors\"")
            #expect(header("Retry-After", in: response) == "1")
        }
        let failed = try #require(proxy.waitFor("accept_failed"))
        #expect(failed["detail"] == "Too many open files" && failed["suppressed"] == "0" && failed["answered_503"] == "1")
        #expect(proxy.events("accept_failed").count == 1)  // the next two are in the next line's count

        try proxy.limitDescriptors(soft: soft, hard: nil)
        let served = try OpenConnection(port: proxy.port, send: "GET / HTTP/1.1\r\n\r\n")
        defer { served.close() }
        #expect(statusLine(served.receive(timeout: 10)) == "HTTP/1.1 400 Bad Request")  // origin-form: not a proxy request
        #expect(proxy.waitFor("request_rejected")?.refusal == .network(.badRequest))
    }

    /// The soft "Max open files" from /proc/PID/limits.
    static func softLimit(of proxy: ProxyProcess) -> Int? {
        let limits = (try? String(contentsOfFile: "/proc/\(proxy.process.processIdentifier)/limits", encoding: .utf8)) ?? ""
        let line = limits.split(separator: "\n").first { $0.hasPrefix("Max open files") }
        return line.flatMap { Int($0.dropFirst("Max open files".count).split(separator: " ").first ?? "") }
    }
}
