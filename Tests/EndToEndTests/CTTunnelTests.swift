import Foundation
import Testing
import TestSupport

/// Certificate Transparency on the paths beside the leaf's own SCTs (issue 19): SCTs by TLS
/// extension and stapled OCSP on the probe, and the selective server that shows the probe a logged
/// chain and the tunnel an unlogged one with the same name, caught in the TLS 1.2 stream, with the
/// client's key log and by the mirror check on TLS 1.3.
@Suite(.serialized) struct CTTunnelTests {
    let ct: CTFixtures
    init() throws { ct = try CTFixtures.made() }

    // MARK: SCTs by TLS extension and OCSP (openssl s_server: one connection at a time, so mirror_checks: 0)

    static let sServerRule = "rules:\n  - host: no-sct.ct.pinproxy.test\n    ct: require\n    mirror_checks: 0"

    /// The probe asks for the SCT extension: a leaf without embedded SCTs whose server sends two from
    /// two operators in its ServerHello (TLS 1.2) or its leaf's CertificateEntry (TLS 1.3) is compliant.
    @Test(arguments: ["1.2", "1.3"])
    func sctsByTLSExtensionOnTheProbe(tls: String) throws {
        let info = tls == "1.2" ? ct.serverinfo : ct.serverinfoV2
        let server = try OpenSSLWebServer(certificate: ct.certificate("no-sct"), issuer: ct.path("ct-root.pem"), key: ct.key("no-sct"), ["-tls\(tls == "1.2" ? "1_2" : "1_3")", "-serverinfo", info])
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], rules: Self.sServerRule))
        let result = try ct.get(proxy, "no-sct", port: server.port)
        #expect(result.connectStatus == 200 && result.status == 200, "\(result) \(proxy.log)")
        let line = try #require(proxy.waitFor("tunnel_unpinned"), "\(proxy.log)")
        try #expect(line["ct"] == "compliant" && line["ct_scts"] == (try ct.scts(["a1", "b1"], "tls_extension")), "\(line)")
    }

    /// The same server with every check on (upstream.py serves concurrently, so the mirror runs):
    /// the client's connection shows the probe's chain byte for byte, judged as the probe judged it,
    /// with the SCTs the probe asked for, on the stream, the key log or the mirror.
    @Test(arguments: [("1.2", false, "probe+stream"), ("1.3", false, "probe+mirror"), ("1.3", true, "probe+keylog")])
    func sctsByTLSExtensionWithEveryCheckOn(tls: String, keyLog: Bool, verify: String) throws {
        let path = try memoryDirectory() + "/keylog"
        let server = try Upstream(chainPath: ct.chain("no-sct"), keyPath: ct.key("no-sct"), name: "no-sct", tls: tls,
                                  extra: ["--serverinfo", tls == "1.2" ? ct.serverinfo : ct.serverinfoV2])
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], proxy: "  keylog: { path: \(path), wait: 2s }"))
        let result = try ct.get(proxy, "no-sct", port: server.port, environment: keyLog ? ["SSLKEYLOGFILE": path] : [:])
        #expect(result.exitCode == 0 && result.body == "hello from no-sct\n", "\(result.stderr) \(proxy.log)")
        let line = try #require(proxy.waitFor("tunnel_unpinned"), "\(proxy.log)")
        try #expect(line["ct"] == "compliant" && line["ct_scts"] == (try ct.scts(["a1", "b1"], "tls_extension")), "\(line)")
        let closed = try #require(proxy.waitFor("tunnel_closed"), "\(proxy.log)")
        #expect(closed["verify"] == verify && closed["tls"] == "TLSv\(tls)", "\(closed)")
    }

    /// The probe asks for OCSP stapling: SCTs in the stapled response (a2 and b1) count.
    @Test(arguments: ["1.2", "1.3"])
    func stapledOCSPSCTs(tls: String) throws {
        let server = try OpenSSLWebServer(certificate: ct.certificate("no-sct"), issuer: ct.path("ct-root.pem"), key: ct.key("no-sct"),
                                          ["-tls\(tls == "1.2" ? "1_2" : "1_3")", "-status_file", ct.ocspResponse])
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], rules: Self.sServerRule))
        let result = try ct.get(proxy, "no-sct", port: server.port)
        #expect(result.connectStatus == 200 && result.status == 200, "\(result) \(proxy.log)")
        let line = try #require(proxy.waitFor("tunnel_unpinned"), "\(proxy.log)")
        try #expect(line["ct"] == "compliant" && line["ct_scts"] == (try ct.scts(["a2", "b1"], "ocsp")), "\(line)")
    }

    /// SCTs by TLS extension replayed from another certificate (an interceptor copying a real
    /// server's) do not verify for the one served: refused, each SCT named.
    @Test(arguments: ["1.2", "1.3"])
    func sctsByTLSExtensionForAnotherCertificateAreRefused(tls: String) throws {
        let info = tls == "1.2" ? ct.serverinfo : ct.serverinfoV2
        let server = try OpenSSLWebServer(certificate: ct.certificate("two-operators-unlogged"), issuer: ct.path("ct-root.pem"),
                                          key: ct.key("two-operators-unlogged"), ["-tls\(tls == "1.2" ? "1_2" : "1_3")", "-serverinfo", info])
        let rules = "rules:\n  - host: two-operators.ct.pinproxy.test\n    ct: require\n    mirror_checks: 0"
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], rules: rules))
        let raw = try connectResponse(proxy: proxy.port, target: "two-operators.ct.pinproxy.test:\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        let refused = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        let (a1, b1) = (try ct.logID("a1"), try ct.logID("b1"))
        #expect(refused["ct_detail"] == "0 valid SCTs by TLS extension or OCSP from 0 operators; 2 SCTs needed and 2 operators needed (ignored: "
                + "SCT from \(a1): its signature does not verify for this certificate; SCT from \(b1): its signature does not verify for this certificate)",
                "\(refused)")
    }

    /// Without either, the same server is refused: the SCTs above are what made it compliant.
    @Test func theSameServerWithoutSCTsIsRefused() throws {
        let server = try OpenSSLWebServer(certificate: ct.certificate("no-sct"), issuer: ct.path("ct-root.pem"), key: ct.key("no-sct"), [])
        let proxy = try ProxyProcess(config: ct.policy(ports: [server.port], rules: Self.sServerRule))
        let raw = try connectResponse(proxy: proxy.port, target: "no-sct.ct.pinproxy.test:\(server.port)")
        #expect(statusLine(raw) == "HTTP/1.1 502 Certificate Transparency Not Compliant", "\(raw)")
        #expect(proxy.waitFor("tunnel_refused")?["reason"] == "ct_not_compliant")
    }

    // MARK: the selective server: a logged chain for the probe, an unlogged one (same name) for the tunnel

    /// The replayer in front of the two servers (kept alive with it): its first connection gets the
    /// logged chain, every later one the unlogged chain.
    struct SelectiveServer {
        let servers: [Upstream]
        let replayer: Replayer
        var port: UInt16 { replayer.port }
    }

    func selectiveServer(tls: String) throws -> SelectiveServer {
        let logged = try ct.serve("two-operators", tls: tls)
        let unlogged = try ct.serve("two-operators-unlogged", tls: tls)
        return SelectiveServer(servers: [logged, unlogged], replayer: try Replayer(genuine: logged.port, abort: "none", then: unlogged.port))
    }

    /// TLS 1.2: the tunnel's Certificate is read in the stream and judged again; a compliant probe
    /// does not excuse it. Nothing of the server's reaches the client.
    @Test func theSelectiveServerIsRefusedInTheStreamOnTLS12() throws {
        let selective = try selectiveServer(tls: "1.2")
        let proxy = try ProxyProcess(config: ct.policy(ports: [selective.port]))
        let result = try ct.get(proxy, "two-operators", port: selective.port)
        #expect(result.connectStatus == 200, "the probe met the logged chain: \(result)")
        #expect(result.exitCode != 0 && !result.body.contains("unlogged"), "\(result)")
        #expect(proxy.waitFor("tunnel_unpinned")?["ct"] == "compliant")
        let refused = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        #expect(refused["stage"] == "stream" && refused["reason"] == "ct_not_compliant" && refused["tls"] == "TLSv1.2", "\(refused)")
        let shortfall = try CTExpectations(ct).detail("two-operators-unlogged")
        #expect(refused["detail"] == "the chain the server sent in the tunnel fails the rule: \(shortfall)", "\(refused)")
        #expect(refused["ct_detail"] == shortfall, "\(refused)")
        #expect(refused["ct"] == "not_compliant" && refused["ct_scts"] == nil, "\(refused)")
        #expect(refused["bytes_down"] == "0", "\(refused)")
        // The probe's chain passed and the tunnel's did not; the confirming look of the client's
        // hello is shown the unlogged chain again: the server answers that hello so. Refused every
        // time, no incident (a client's hello alone never makes one).
        let confirmed = try #require(proxy.waitFor("confirming_look"), "\(proxy.log)")
        #expect(confirmed["outcome"] == "same_chain" && confirmed["reason"] == "ct_not_compliant", "\(confirmed)")
        try #expect(confirmed["chain.0.spki"] == (try ct.pin("two-operators-unlogged")), "\(confirmed)")
        #expect(proxy.events("interception_suspected").isEmpty, "\(proxy.log)")
    }

    /// A pinned host whose pin (its CA's) matches both chains: the pins hold in the tunnel, CT does not.
    @Test func aCAPinDoesNotExcuseTheUnloggedChainInTheStream() throws {
        let selective = try selectiveServer(tls: "1.2")
        let rules = """
            rules:
              - host: two-operators.ct.pinproxy.test
                pins: [{ pin: "\(try ct.pin("ct-root"))", at: ca }]
            """
        let proxy = try ProxyProcess(config: ct.policy(ports: [selective.port], rules: rules))
        let result = try ct.get(proxy, "two-operators", port: selective.port)
        #expect(result.connectStatus == 200 && result.exitCode != 0 && !result.body.contains("unlogged"), "\(result)")
        #expect(proxy.waitFor("tunnel_allowed")?["ct"] == "compliant")
        let refused = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        #expect(refused["stage"] == "stream" && refused["reason"] == "ct_not_compliant" && refused["bytes_down"] == "0", "\(refused)")
        try #expect(refused["ct_detail"] == (try CTExpectations(ct).detail("two-operators-unlogged")), "\(refused)")
    }

    /// Pinned to the logged leaf's key under `ct: require`: the unlogged chain fails both. The
    /// pins' refusal comes first (reason `pin_mismatch`), and its detail names that, not the CT
    /// shortfall the same chain also has.
    @Test func aPinMismatchInTheStreamIsNamedAsOneUnderCT() throws {
        let selective = try selectiveServer(tls: "1.2")
        let rules = """
            rules:
              - host: two-operators.ct.pinproxy.test
                pins: ["\(try ct.pin("two-operators"))"]
                ct: require
            """
        let proxy = try ProxyProcess(config: ct.policy(ports: [selective.port], rules: rules))
        let result = try ct.get(proxy, "two-operators", port: selective.port)
        #expect(result.connectStatus == 200 && result.exitCode != 0 && !result.body.contains("unlogged"), "\(result)")
        let refused = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        #expect(refused["stage"] == "stream" && refused["reason"] == "pin_mismatch" && refused["bytes_down"] == "0", "\(refused)")
        #expect(refused["detail"] == "the chain the server sent in the tunnel fails the rule: pin_mismatch", "\(refused)")
    }

    /// Under `ct: report` the stream's finding is a warning, and the tunnel stands (as report mode
    /// does for pins).
    @Test func underReportTheSelectiveServerIsAWarning() throws {
        let selective = try selectiveServer(tls: "1.2")
        let rules = "rules:\n  - host: two-operators.ct.pinproxy.test\n    ct: report"
        let proxy = try ProxyProcess(config: ct.policy(ports: [selective.port], rules: rules))
        #expect(try ct.get(proxy, "two-operators", port: selective.port).body == "hello from two-operators-unlogged\n")
        let warning = try #require(proxy.waitFor("tunnel_warning") { $0["stage"] == "stream" }, "\(proxy.log)")
        #expect(warning["reason"] == "ct_not_compliant" && warning["would_refuse"] == "true" && warning["bypass"] == "ct_report", "\(warning)")
        // The would-refuse says why in its detail (the line carries no evaluation of its own).
        let shortfall = try CTExpectations(ct).detail("two-operators-unlogged")
        #expect(warning["detail"] == "the chain the server sent in the tunnel fails the rule: \(shortfall)", "\(warning)")
        #expect(proxy.events("tunnel_refused").isEmpty, "\(proxy.log)")
    }

    /// TLS 1.3: the chain is read with the client's key log (curl's SSLKEYLOGFILE), or by the mirror
    /// check when the client writes none; either way the unlogged chain is refused.
    @Test(arguments: [true, false])
    func theSelectiveServerIsRefusedOnTLS13(keyLog: Bool) throws {
        let path = try memoryDirectory() + "/keylog"
        let selective = try selectiveServer(tls: "1.3")
        let proxy = try ProxyProcess(config: ct.policy(ports: [selective.port], proxy: "  keylog: { path: \(path), wait: 2s }"))
        let result = try ct.get(proxy, "two-operators", port: selective.port, environment: keyLog ? ["SSLKEYLOGFILE": path] : [:])
        #expect(result.connectStatus == 200, "the probe met the logged chain: \(result)")
        #expect(result.exitCode != 0 && !result.body.contains("unlogged"), "\(result)")
        let refused = try #require(proxy.waitFor("tunnel_refused"), "\(proxy.log)")
        #expect(refused["stage"] == (keyLog ? "stream" : "mirror") && refused["reason"] == "ct_not_compliant", "\(refused)")
        #expect(refused["tls"] == "TLSv1.3", "\(refused)")
        let shown = keyLog ? "in the tunnel" : "on the mirror check"
        let shortfall = try CTExpectations(ct).detail("two-operators-unlogged")
        #expect(refused["detail"] == "the chain the server sent \(shown) fails the rule: \(shortfall)", "\(refused)")
        #expect(refused["ct_detail"] == shortfall, "\(refused)")
        #expect(refused["ct"] == "not_compliant" && refused["ct_scts"] == nil, "\(refused)")
        // Every look with the client's hello (its key log, the mirror, the confirming look) is
        // shown the unlogged chain: the server's own answer to that hello, refused, no incident.
        let confirmed = try #require(proxy.waitFor("confirming_look"), "\(proxy.log)")
        #expect(confirmed["outcome"] == "same_chain" && confirmed["reason"] == "ct_not_compliant", "\(confirmed)")
        try #expect(confirmed["chain.0.spki"] == (try ct.pin("two-operators-unlogged")), "\(confirmed)")
        #expect(proxy.events("interception_suspected").isEmpty, "\(proxy.log)")
    }
}
