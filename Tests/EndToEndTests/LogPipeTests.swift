import Foundation
import Testing
import TestSupport

@Suite(.serialized) struct LogPipeTests {
    /// A log reader that stops reading costs log lines, never tunnels. The proxy's stderr is a pipe
    /// the test stops reading; 1000 rejected requests (a line each) fill the 64 KiB pipe and the
    /// 16 KiB log queue behind it. Then 50 pinned tunnels in a row still carry their body, while
    /// the lines they log are dropped. Once the test drains the pipe, one `log_lines_dropped` line
    /// counts exactly the lines that never arrived, the proxy is still running, and it stops with 0.
    @Test func aStalledLogReaderCostsLinesNotTunnels() throws {
        let server = try Upstream("leaf-ec256", name: "stalled-log")
        let pipe = Pipe()
        let proxy = try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(pinsLine(Pins.leafEC))),
                                     arguments: ["--log-queue-bytes", "16384"], stderrPipe: pipe)

        // While the log is read: one tunnel, to learn how many lines a tunnel logs.
        let first = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port)
        #expect(first.status == 200 && first.body == "hello from stalled-log\n", "\(first)")
        let firstClosed = try #require(proxy.readPipe(until: "tunnel_closed"))
        let linesPerTunnel = proxy.lines.filter { $0["conn"] == firstClosed["conn"] }.count
        #expect(linesPerTunnel >= 2)  // tunnel_allowed, tunnel_closed

        // From here on nobody reads the pipe.
        let rejected = 1000
        for index in 0..<rejected {
            let response = try rawExchange(port: proxy.port, send: Array("GET / HTTP/1.1\r\n\r\n".utf8), timeout: 5)
            try #require(statusLine(response).hasPrefix("HTTP/1.1 400 "), "request \(index): \(response)")
        }
        let tunnels = 50
        for index in 0..<tunnels {
            let r = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port)
            try #require(r.exitCode == 0 && r.status == 200 && r.body == "hello from stalled-log\n", "tunnel \(index): \(r)")
        }
        #expect(proxy.process.isRunning)

        // Drain: the report arrives once the lines queued before the drops are through.
        let report = try #require(proxy.readPipe(until: "log_lines_dropped", timeout: 15))
        #expect(report["level"] == "warning")
        #expect(proxy.process.isRunning)
        proxy.signal(SIGTERM)
        let stopped = try #require(proxy.readPipe(until: "stopped", timeout: 20))
        #expect(proxy.waitForExit() == 0)

        let accepted = 1 + rejected + tunnels
        #expect(stopped["accepted"] == "\(accepted)" && stopped["rejected"] == "\(rejected)" && stopped["allowed"] == "\(1 + tunnels)")
        let lines = proxy.lines
        let reports = lines.filter { $0["event"] == "log_lines_dropped" }
        #expect(reports.count == 1, "\(reports)")  // the queue never had room until the test read
        let dropped = Int(report["dropped"] ?? "") ?? 0
        let connLines = lines.filter { $0["conn"] != nil }
        let expectedConnLines = (1 + tunnels) * linesPerTunnel + rejected
        #expect(dropped > 0 && dropped == expectedConnLines - connLines.count,
                "dropped=\(dropped), expected \(expectedConnLines) connection lines, got \(connLines.count)")
        // The 50 tunnels opened while the writer was blocked: none of their `tunnel_allowed` lines
        // (logged before the body flows) got through. The last `tunnel_closed` may race the drain.
        let tunnelConns = (accepted - tunnels + 1)...accepted
        #expect(!connLines.contains { $0["event"] == "tunnel_allowed" && tunnelConns.contains(Int($0["conn"] ?? "") ?? 0) })
        #expect(lines.last?["event"] == "stopped")
    }
}
