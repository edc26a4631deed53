import Foundation
import Testing
import TestSupport

/// TLS 1.3 0-RTT as servers really answer it: nginx (`ssl_early_data on`) accepts openssl
/// s_client's early data (an HTTP request with `Connection: close`), and sends its whole flight,
/// the response and its close at once — before the mirror (a full handshake of its own, the PSK
/// being the client's alone) has spoken. The close waits behind the held flight for the verdict;
/// the flight, the response and the close reach the client once the mirror has passed. Before,
/// the close found the flight held and the tunnel was refused `tls_protocol_error` ("the upstream
/// closed before its first flight was complete") in most tries.
@Suite(.serialized) struct EarlyDataTests {
    /// openssl s_client through pinproxy; with `earlyData`, the request goes as 0-RTT data.
    static func sClient(proxy: UInt16, port: UInt16, directory: String, earlyData: Bool) throws -> String {
        let session = directory + "/session.pem", request = directory + "/request.txt"
        var command = "openssl s_client -proxy 127.0.0.1:\(proxy) -connect api.pinproxy.test:\(port) -servername api.pinproxy.test "
            + "-CAfile '\(Paths.fixture("both-roots.pem"))' "
        // -ign_eof: s_client reads to the server's close (nginx closes after its answer) instead of
        // quitting at its own empty stdin, which raced the answer's arrival.
        command += earlyData ? "-sess_in '\(session)' -early_data '\(request)' -ign_eof </dev/null" : "-sess_out '\(session)' -ign_eof < '\(request)'"
        let r = try run("/bin/sh", ["-c", command], timeout: 20)
        return r.stdout + r.stderr
    }

    @Test func aServerThatAnswersEarlyDataAndClosesPasses() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try "GET / HTTP/1.1\r\nHost: api.pinproxy.test\r\nConnection: close\r\n\r\n".write(toFile: directory + "/request.txt", atomically: true, encoding: .utf8)
        let server = try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/nginx_server.py", "--early-data",
                                                 "--cert", Paths.fixture("leaf-ec256.chain.pem"), "--key", Paths.fixture("leaf-ec256.key.pem")])
        defer { server.stop() }
        let port = server.port
        let proxy = try ProxyProcess(config: policy(ports: [port], rules: MirrorCheckTests.apiPinned))
        let first = try Self.sClient(proxy: proxy.port, port: port, directory: directory, earlyData: false)
        #expect(first.contains("New, TLSv1.3") && first.contains("hello from nginx"), "\(first)")
        #expect(proxy.events("tunnel_closed", count: 1).first?["verify"] == "probe+mirror")
        let tries = 6
        for attempt in 1...tries {
            let resumed = try Self.sClient(proxy: proxy.port, port: port, directory: directory, earlyData: true)
            #expect(resumed.contains("Reused, TLSv1.3") && resumed.contains("Early data was accepted") && resumed.contains("hello from nginx"),
                    "attempt \(attempt): \(resumed)")
        }
        let closed = proxy.events("tunnel_closed", count: tries + 1)
        #expect(closed.count == tries + 1 && closed.dropFirst().allSatisfy { $0["verify"] == "resumption-unverified" }, "\(closed)")
        #expect(proxy.events("tunnel_refused").isEmpty, "\(proxy.events("tunnel_refused"))")
    }
}
