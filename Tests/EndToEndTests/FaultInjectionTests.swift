import Foundation
import Testing
import TestSupport

/// Fail closed: each stage of verification made to fail (debug builds read PINPROXY_TEST_FAULTS)
/// ends in a refusal — in `enforce` and in `report` mode alike. Only the debug bypass turns a
/// refusal into a tunnel, and then the line says so; a failure before any chain was seen is never
/// bypassed.
@Suite(.serialized) struct FaultInjectionTests {
    enum Setup: String, CaseIterable { case enforce, report, debugBypass }

    static let cases: [(String, Setup, String, String)] = [
        ("dns", .enforce, "HTTP/1.1 502 DNS Error", "dns_error"),
        ("connect", .enforce, "HTTP/1.1 502 Connection Failed", "connection_refused"),
        ("handshake", .enforce, "HTTP/1.1 502 TLS Handshake Failed", "tls_protocol_error"),
        ("validation", .enforce, "HTTP/1.1 502 Certificate Invalid", "chain_invalid"),
        ("evaluation", .enforce, "HTTP/1.1 500 Proxy Internal Error", "internal_error"),
        ("dns", .report, "HTTP/1.1 502 DNS Error", "dns_error"),
        ("connect", .report, "HTTP/1.1 502 Connection Failed", "connection_refused"),
        ("handshake", .report, "HTTP/1.1 502 TLS Handshake Failed", "tls_protocol_error"),
        ("validation", .report, "HTTP/1.1 502 Certificate Invalid", "chain_invalid"),
        ("evaluation", .report, "HTTP/1.1 500 Proxy Internal Error", "internal_error"),
        ("dns", .debugBypass, "HTTP/1.1 502 DNS Error", "dns_error"),
        ("connect", .debugBypass, "HTTP/1.1 502 Connection Failed", "connection_refused"),
        ("handshake", .debugBypass, "HTTP/1.1 502 TLS Handshake Failed", "tls_protocol_error"),
        ("evaluation", .debugBypass, "HTTP/1.1 500 Proxy Internal Error", "internal_error"),
    ]

    @Test(arguments: cases)
    func aFailureInsideVerificationRefuses(fault: String, setup: Setup, status: String, reason: String) throws {
        let server = try Upstream("leaf-ec256", name: "faulty")
        let proxy = try Self.proxy(server: server, fault: fault, setup: setup)
        let response = try connectResponse(proxy: proxy.port, target: "api.pinproxy.test:\(server.port)")
        #expect(statusLine(response) == status)
        let line = try #require(proxy.waitForConn("tunnel_refused"))
        #expect(line["reason"] == reason)
        #expect(line["detail"]?.contains("injected test fault") == true, "\(line)")
        #expect(proxy.events("tunnel_allowed").isEmpty && proxy.events("tunnel_bypassed").isEmpty)
    }

    /// The stream reader made to fail: the open tunnel is closed before a byte crosses, in report
    /// mode and under a debug bypass too (nothing was judged, so nothing may pass).
    @Test(arguments: [Setup.enforce, .report, .debugBypass])
    func aStreamReaderFailureClosesTheTunnel(setup: Setup) throws {
        let server = try Upstream("leaf-ec256", name: "faulty", tls: "1.2")
        let proxy = try Self.proxy(server: server, fault: "stream", setup: setup)
        let result = try curl(proxy: proxy.port, host: "api.pinproxy.test", port: server.port)
        #expect(result.connectStatus == 200 && result.exitCode != 0 && result.body.isEmpty)
        let line = try #require(proxy.waitFor("tunnel_refused"))
        #expect(line["stage"] == "stream" && line.refusal == .stream(.malformedTLS) && line["bytes_up"] == "0" && line["bytes_down"] == "0")
        #expect(line["detail"]?.contains("injected test fault") == true)
    }

    /// The one way through: an active debug bypass over a chain that failed validation. The tunnel
    /// opens, and its line says it was bypassed and what would have refused it.
    @Test func onlyAnExplicitBypassTunnelsAFailedValidationAndSaysSo() throws {
        let server = try Upstream("leaf-ec256", name: "faulty")
        let proxy = try Self.proxy(server: server, fault: "validation", setup: .debugBypass)
        let response = try rawResponseHead(port: proxy.port, send: Array("CONNECT api.pinproxy.test:\(server.port) HTTP/1.1\r\n\r\n".utf8))
        #expect(statusLine(response) == "HTTP/1.1 200 Connection established")
        let line = try #require(proxy.waitFor("tunnel_bypassed"))
        #expect(line["level"] == "warning" && line["would_refuse"] == "true" && line.refusal == .policy(.chainInvalid) && line["bypass"] == "debug_bypass")
    }

    static func proxy(server: Upstream, fault: String, setup: Setup) throws -> ProxyProcess {
        var environment = ProcessInfo.processInfo.environment
        environment["PINPROXY_TEST_FAULTS"] = fault
        let mode = setup == .report ? "    mode: report\n" : ""
        let debug = setup == .debugBypass ? "debug:\n  until: \"\(RFC3339Text.inSeconds(3600))\"\n  hosts: [api.pinproxy.test]" : ""
        return try ProxyProcess(config: policy(ports: [server.port], rules: apiRule(mode + pinsLine(Pins.leafEC)), extra: debug),
                                arguments: setup == .debugBypass ? ["--debug-bypass"] : [], environment: environment)
    }
}
