import Foundation
import Testing
import TestSupport

/// Every file a start, a reload or `check` reads must be a regular file (issue 30). A FIFO at one of
/// those paths blocked open() on the proxy's loop until a writer came: CONNECTs, `/metrics` and
/// SIGTERM all waited. Every wait here is bounded by the helpers' timeouts, so with that bug back
/// these tests fail instead of hanging.
@Suite(.serialized) struct NotARegularFileTests {
    let ct: CTFixtures
    init() throws { ct = try CTFixtures.made() }

    /// The files one policy reads besides itself, copies of their own in `directory`, so that a test
    /// can put a FIFO in the place of one.
    struct Files {
        let directory: String
        var policy: String { directory + "/pinproxy.yaml" }
        var pin: String { directory + "/pin.pem" }
        var roots: String { directory + "/roots.pem" }
        var list: String { directory + "/log_list.json" }
        var signature: String { directory + "/log_list.sig" }
        var key: String { directory + "/signer.pub.pem" }
    }

    /// The paths a FIFO is put at, each with the message its load error ends in.
    static let kinds = ["policy", "file-pin", "ca-file", "ct-list", "ct-signature", "ct-key"]

    func files() throws -> Files {
        let files = Files(directory: try memoryDirectory())
        let script = """
            set -e
            cd '\(files.directory)'
            cp '\(ct.certificate("two-operators"))' pin.pem
            cp '\(ct.roots)' roots.pem
            cp '\(ct.logList)' log_list.json
            openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out signer.key.pem 2>/dev/null
            openssl pkey -in signer.key.pem -pubout -out signer.pub.pem
            openssl dgst -sha256 -sign signer.key.pem -out log_list.sig log_list.json
            rm signer.key.pem
            """
        let r = try run("/bin/sh", ["-c", script], timeout: 60)
        guard r.status == 0 else { throw HelperError(message: "copying and signing failed: \(r.stderr)") }
        return files
    }

    /// A policy that reads every one of `files`: its trust a `ca-file:`, a `file:` pin for
    /// two-operators, the CT log list checked against its signature and key.
    func policy(_ files: Files, port: UInt16) -> String {
        let rules = "rules:\n  - host: \(ct.host("two-operators"))\n    pins: [{ file: \(files.pin), at: leaf }]"
        return ct.policy(ports: [port], rules: rules, proxy: "  ct_log_list_key: \(files.key)", logList: files.list)
            .replacingOccurrences(of: "ca-file:\(ct.roots)", with: "ca-file:\(files.roots)")
    }

    /// Where a FIFO of this kind goes, and the message of the load error that names it.
    func target(_ kind: String, _ files: Files, policy: String) -> (path: String, message: String) {
        let fifo = "it is a FIFO, not a regular file"
        switch kind {
        case "policy": return (policy, "cannot read \(policy): \(fifo)")
        case "file-pin": return (files.pin, "cannot use the pin file '\(files.pin)': cannot read the file: \(fifo)")
        case "ca-file": return (files.roots, "cannot load the CA file \(files.roots): cannot read the file: \(fifo)")
        case "ct-list":
            return (files.list, "cannot read the CT log list \(files.list): cannot read \(files.list): \(fifo); "
                        + "fetch it with the pinproxy-ct-list timer or pinproxy ct-list --install")
        case "ct-signature": return (files.signature, "cannot check the CT log list \(files.list): cannot read \(files.signature): \(fifo)")
        default: return (files.key, "cannot check the CT log list \(files.list): cannot read \(files.key): \(fifo)")
        }
    }

    /// Puts a FIFO at `path` in one step: made beside it, renamed over it.
    func putFIFO(at path: String) {
        let beside = path + ".fifo"
        #expect(mkfifo(beside, 0o644) == 0 && rename(beside, path) == 0, "mkfifo/rename \(path): errno \(errno)")
    }

    /// SIGHUP with a FIFO in place of one file: the reload fails naming it, the old policy serves a
    /// real CONNECT, and SIGTERM still ends the proxy at once.
    @Test(arguments: kinds)
    func aFIFOAtAReloadedPathIsALoadErrorAndTheProxyServesOn(kind: String) throws {
        let files = try files()
        let server = try Upstream(chainPath: ct.chain("two-operators"), keyPath: ct.key("two-operators"), name: "two-operators")
        defer { server.stop() }
        let proxy = try ProxyProcess(config: policy(files, port: server.port))
        let target = target(kind, files, policy: proxy.configPath)
        putFIFO(at: target.path)

        proxy.signal(SIGHUP)
        let failed = try #require(proxy.waitFor("policy_reload_failed"), "\(proxy.log)")
        #expect(failed["level"] == "error", "\(failed)")
        #expect(failed["detail"]?.hasSuffix(": \(target.message)") == true, "\(failed)")
        let served = try curl(proxy: proxy.port, host: ct.host("two-operators"), port: server.port, cacert: ct.roots)
        #expect(served.connectStatus == 200 && served.body == "hello from two-operators\n", "\(served)")
        #expect(proxy.stop(timeout: 10) == 0, "\(proxy.log)")
        #expect(proxy.events("stopped").count == 1, "\(proxy.log)")
    }

    /// `check` and `run` with a FIFO in place of one file: both refuse the policy at once, naming it.
    @Test(arguments: kinds)
    func aFIFOIsRefusedByCheckAndAtStart(kind: String) throws {
        let files = try files()
        try policy(files, port: 443).write(toFile: files.policy, atomically: true, encoding: .utf8)
        let target = target(kind, files, policy: files.policy)
        putFIFO(at: target.path)

        let check = try run(Paths.pinproxy, ["check", "--config", files.policy], timeout: 20)
        #expect(check.status == 1, "\(check)")
        #expect(check.stderr.contains(": error: \(target.message)\n"), "\(check.stderr)")
        #expect(check.stderr.hasSuffix("\(files.policy): 1 error; the policy was not loaded\n"), "\(check.stderr)")

        let start = try run(Paths.pinproxy, ["run", "--config", files.policy, "--listen", "127.0.0.1:0"], timeout: 20)
        let failure = parseLogLine(String(start.stderr.split(separator: "\n").last ?? ""))
        #expect(start.status == 1, "\(start)")
        #expect(failure["event"] == "policy_load_failed" && failure["detail"] == target.message, "\(failure)")
    }
}
