import Foundation
import Testing
import TestSupport

/// Transparent mode (`proxy.transparent_listen`), run the way an operator runs it: a network
/// namespace of the test's own in which nftables redirects every outbound TCP connection to ports
/// 443 and 80 to pinproxy's transparent listener, and clients that know nothing of a proxy (curl
/// without a proxy setting, Python's ssl, Java's HttpClient, Go's net/http with its own Transport)
/// connect straight to a server's address. The servers sit at addresses the namespace gives its
/// loopback (10.77.0.0/16, fd77::/16); a veth pair whose far end nobody answers carries the default
/// routes (so that a redirect applies to any destination), and nothing leaves the namespace. The
/// namespace has no DNS and the policy no `resolve:`: a tunnel that opens went to the address the
/// client chose.
@Suite(.serialized) struct TransparentTests {
    static let fixtures = Paths.fixtures
    static let goodPin = "spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="  // leaf-ec256
    static let ipLeafPin = "spki-sha256:j/cBctevzPRTre++KPYReNKd83kuTdZ9mqW9EtXbTig="  // leaf-ip (IP:127.0.0.1)

    /// Redirects 443 and 80 to the transparent listener, except pinproxy's own (marked) connections.
    static let redirectExceptMark = """
        table inet pinproxy_test {
          chain output {
            type nat hook output priority -100;
            meta mark != 0x70 tcp dport { 443, 80 } redirect to :15001
          }
        }
        """

    /// The proxy section and defaults the tests share; `extra` goes into `proxy:`.
    static func policy(unpinned: String = "allow", mark: Bool = true, extraProxy: String = "", rules: String? = nil) -> String {
        """
        version: 1
        proxy:
          listen: ["127.0.0.1:3128"]
          transparent_listen: ["127.0.0.1:15001", "[::1]:15001"]
        \(mark ? "  transparent_mark: 0x70\n" : "")  allow_clients: [loopback, 10.77.0.0/16, 10.99.0.0/16, "fd77::/16"]
          deny_destinations: [link-local, multicast, 10.99.0.0/16]
        \(extraProxy)
        defaults:
          unpinned: \(unpinned)
          trust: ca-file:\(fixtures)/both-roots.pem
          require_backup: off
        rules:
        \(rules ?? "  - host: api.pinproxy.test\n    pins: [\"\(goodPin)\"]")
        """
    }

    struct Server {
        let address: String
        let name: String
        let leaf: String  // a fixture: NAME.chain.pem and NAME.key.pem
    }

    static let servers = [
        Server(address: "10.77.0.2", name: "good", leaf: "leaf-ec256"), Server(address: "10.77.0.3", name: "rogue", leaf: "rogue-leaf"),
        Server(address: "fd77::2", name: "good6", leaf: "leaf-ec256"), Server(address: "fd77::3", name: "rogue6", leaf: "rogue-leaf"),
        Server(address: "10.99.0.5", name: "denied", leaf: "leaf-ec256"), Server(address: "127.0.0.1", name: "ip", leaf: "leaf-ip"),
    ]

    struct Outcome {
        let stdout: String
        let stderr: String
        /// pinproxy's log, parsed.
        let log: [[String: String]]
        let rawLog: String

        func lines(_ event: String, originalDst: String) -> [[String: String]] {
            log.filter { $0["event"] == event && $0["original_dst"] == originalDst }
        }
    }

    /// Runs `clients` (bash lines) in a namespace of their own with the servers, the redirect
    /// `nft` and pinproxy under `policy` (started with `launch` before its command, e.g. setpriv).
    static func inNamespace(policy: String, nft: String = redirectExceptMark, launch: String = "", clients: [String],
                            timeout: Double = 90) throws -> Outcome {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        chmod(directory, 0o755)  // pinproxy may run as nobody
        let policyFile = directory + "/policy.yaml", nftFile = directory + "/redirect.nft", logFile = directory + "/pinproxy.log"
        try policy.write(toFile: policyFile, atomically: true, encoding: .utf8)
        try nft.write(toFile: nftFile, atomically: true, encoding: .utf8)
        chmod(policyFile, 0o644)
        var script = [
            "set -u",
            "trap 'kill -KILL 0' EXIT",
            "cd \(directory)",
            "ip link set lo up",
            "ip link add v0 type veth peer name v1 && ip link set v0 up && ip link set v1 up",
            "ip addr add 10.88.0.1/24 dev v0 && ip route add default via 10.88.0.2 dev v0",
            "ip -6 addr add fd88::1/64 dev v0 nodad && ip -6 route add default via fd88::2 dev v0",
            "nft -f \(nftFile) || { echo 'nft -f failed' >&2; exit 1; }",
            "listening() { for _ in $(seq 100); do [ \"$(ss -Hltn \"sport = :$1\" | wc -l)\" -ge \"$2\" ] && return; sleep 0.1; done; echo \"nothing listens on $1\" >&2; }",
        ]
        for server in servers {
            let prefix = server.address.contains(":") ? "/128" : "/32"
            if server.address != "127.0.0.1" { script.append("ip addr add \(server.address)\(prefix) dev lo nodad 2>/dev/null || ip addr add \(server.address)\(prefix) dev lo") }
            script.append("python3 \(Paths.scripts)/transparent_server.py --bind \(server.address) --port 443 --name \(server.name) "
                + "--cert \(fixtures)/\(server.leaf).chain.pem --key \(fixtures)/\(server.leaf).key.pem &")
        }
        script.append("python3 \(Paths.scripts)/transparent_server.py --bind 10.77.0.2 --port 80 --name plain &")
        script.append("listening 443 \(servers.count)")
        script.append("listening 80 1")
        script.append("\(launch) \(Paths.pinproxy) run --config \(policyFile) 2>>\(logFile) &")
        script.append("listening 15001 2")
        script += clients
        script.append("sleep 0.5")  // the close lines, before the end kills pinproxy
        // A process group of its own, which the script kills whole as it ends (see ReadmeTests).
        let asAUser = """
            import os, signal, sys
            if os.getpgid(0) != os.getpid(): os.setsid()
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [signal.SIGTERM])
            os.execvp(sys.argv[1], sys.argv[1:])
            """
        let r = try run("/usr/bin/env", ["python3", "-c", asAUser, "unshare", "--net", "bash", "-c", script.joined(separator: "\n")], timeout: timeout)
        let raw = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        return Outcome(stdout: r.stdout, stderr: r.stderr, log: raw.split(separator: "\n").map { parseLogLine(String($0)) }, rawLog: raw)
    }

    static func curl(_ label: String, address: String, host: String = "api.pinproxy.test", port: Int = 443) -> String {
        let at = address.contains(":") ? "[\(address)]" : address
        return "curl -sS -o /dev/null -w '\(label) %{http_code}\\n' --max-time 15 --cacert \(fixtures)/both-roots.pem "
            + "--resolve '\(host):\(port):\(at)' https://\(host):\(port)/ 2>>curl.err"
    }

    static func python(_ address: String, noSNI: Bool = false, port: Int = 443) -> String {
        "python3 \(Paths.scripts)/transparent_client.py --address \(address) --port \(port) --host api.pinproxy.test --cafile \(fixtures)/both-roots.pem"
            + (noSNI ? " --no-sni" : "")
    }

    // MARK: the pinned path, IPv4 and IPv6

    /// curl and Python with no proxy setting: the good server's tunnel opens, the rogue's (a chain
    /// from a CA the client trusts too) is refused for its pins, each line naming the original
    /// destination; over IPv4 and IPv6. No DNS anywhere: the address is the one the client chose.
    @Test func curlAndPythonArePinnedThroughTheRedirect() throws {
        let o = try Self.inNamespace(policy: Self.policy(), clients: [
            Self.curl("curl-good", address: "10.77.0.2"), Self.curl("curl-rogue", address: "10.77.0.3"),
            Self.python("10.77.0.2"), Self.python("10.77.0.3"),
            Self.curl("curl-good6", address: "fd77::2"), Self.curl("curl-rogue6", address: "fd77::3"),
            "cat curl.err >&2",
        ])
        #expect(o.stdout == "curl-good 200\ncurl-rogue 000\npython 200\npython error TLSV1_ALERT_ACCESS_DENIED\ncurl-good6 200\ncurl-rogue6 000\n",
                "stdout: \(o.stdout)\nstderr: \(o.stderr)\nlog: \(o.rawLog)")
        #expect(o.stderr.contains("tlsv1 alert access denied"), "\(o.stderr)")
        for dst in ["10.77.0.2:443", "[fd77::2]:443"] {
            let allowed = o.lines("tunnel_allowed", originalDst: dst)
            #expect(allowed.count == (dst.hasPrefix("[") ? 1 : 2), "\(dst): \(o.rawLog)")
            for line in allowed {
                #expect(line["via"] == "transparent" && line["host"] == "api.pinproxy.test" && line["port"] == "443"
                        && line["address"] == dst.dropLast(4).trimmingCharacters(in: ["[", "]"]) && line["pin"] == Self.goodPin, "\(line)")
            }
            let closed = o.lines("tunnel_closed", originalDst: dst)
            #expect(closed.count == allowed.count && closed.allSatisfy { $0["verify"] == "probe+mirror" && $0["close_reason"] == "eof" }, "\(closed)")
        }
        for dst in ["10.77.0.3:443", "[fd77::3]:443"] {
            let refused = o.lines("tunnel_refused", originalDst: dst)
            #expect(refused.count == (dst.hasPrefix("[") ? 1 : 2) && refused.allSatisfy { $0["reason"] == "pin_mismatch" && $0["via"] == "transparent" },
                    "\(dst): \(o.rawLog)")
        }
        #expect(!o.log.contains { $0["event"] == "tunnel_refused" && $0["reason"] == "proxy_loop_detected" }, "\(o.rawLog)")
    }

    /// The upstream is the address the client chose, not a name's mapping: with `resolve:` sending
    /// the pinned name to the rogue server, a client that goes to the good one reaches the good one
    /// (and one that goes to the rogue is refused there).
    @Test func theUpstreamIsTheAddressTheClientChoseNotTheResolveMap() throws {
        let policy = Self.policy() + "\nresolve:\n  api.pinproxy.test: 10.77.0.3\n"
        let o = try Self.inNamespace(policy: policy, clients: [Self.python("10.77.0.2"), Self.python("10.77.0.3")])
        #expect(o.stdout == "python 200\npython error TLSV1_ALERT_ACCESS_DENIED\n", "stdout: \(o.stdout)\nlog: \(o.rawLog)")
        #expect(o.lines("tunnel_allowed", originalDst: "10.77.0.2:443").first?["address"] == "10.77.0.2", "\(o.rawLog)")
        #expect(o.lines("tunnel_refused", originalDst: "10.77.0.3:443").first?["address"] == "10.77.0.3", "\(o.rawLog)")
    }

    // MARK: no SNI

    /// A hello without SNI is matched by its original address: an `ip:` rule pins it (the server's
    /// certificate names that address), and without one `unpinned` decides.
    @Test func noSNIIsMatchedByTheOriginalAddress() throws {
        let rules = "  - ip: 127.0.0.1\n    pins: [\"\(Self.ipLeafPin)\"]\n  - host: api.pinproxy.test\n    pins: [\"\(Self.goodPin)\"]"
        let allow = try Self.inNamespace(policy: Self.policy(rules: rules), clients: [Self.python("127.0.0.1", noSNI: true), Self.python("10.77.0.2", noSNI: true)])
        #expect(allow.stdout == "python 200\npython 200\n", "stdout: \(allow.stdout)\nstderr: \(allow.stderr)\nlog: \(allow.rawLog)")
        let pinned = try #require(allow.lines("tunnel_allowed", originalDst: "127.0.0.1:443").first, "\(allow.rawLog)")
        #expect(pinned["host"] == "127.0.0.1" && pinned["rule"] == "127.0.0.1" && pinned["pin"] == Self.ipLeafPin && pinned["sni"] == nil, "\(pinned)")
        let unpinned = try #require(allow.lines("tunnel_unpinned", originalDst: "10.77.0.2:443").first, "\(allow.rawLog)")
        #expect(unpinned["host"] == "10.77.0.2" && unpinned["via"] == "transparent", "\(unpinned)")

        let deny = try Self.inNamespace(policy: Self.policy(unpinned: "deny"), clients: [Self.python("10.77.0.2", noSNI: true)])
        #expect(deny.stdout == "python error TLSV1_ALERT_ACCESS_DENIED\n", "stdout: \(deny.stdout)\nlog: \(deny.rawLog)")
        let refused = try #require(deny.lines("tunnel_refused", originalDst: "10.77.0.2:443").first, "\(deny.rawLog)")
        #expect(refused["reason"] == "unpinned_denied" && refused["host"] == "10.77.0.2", "\(refused)")
    }

    // MARK: destinations refused

    /// An original destination in `deny_destinations` is refused, named by its SNI or not; one that
    /// is pinproxy's own transparent listener (a client that connects to it directly) is a loop.
    @Test func deniedAndOwnOriginalDestinationsAreRefused() throws {
        let o = try Self.inNamespace(policy: Self.policy(extraProxy: "  allowed_ports: [443, 15001]"), clients: [
            Self.python("10.99.0.5"), Self.python("10.99.0.5", noSNI: true), Self.python("127.0.0.1", noSNI: true, port: 15001),
        ])
        #expect(o.stdout == String(repeating: "python error TLSV1_ALERT_ACCESS_DENIED\n", count: 3), "stdout: \(o.stdout)\nlog: \(o.rawLog)")
        let denied = o.lines("tunnel_refused", originalDst: "10.99.0.5:443")
        #expect(denied.map { $0["reason"] } == ["destination_ip_prohibited", "destination_ip_prohibited"]
                && denied.map { $0["host"] } == ["api.pinproxy.test", "10.99.0.5"], "\(o.rawLog)")
        let loop = try #require(o.lines("tunnel_refused", originalDst: "127.0.0.1:15001").first, "\(o.rawLog)")
        #expect(loop["reason"] == "proxy_loop_detected" && loop["via"] == "transparent", "\(loop)")
    }

    // MARK: no loops

    /// Exempted by uid instead of a mark: pinproxy runs as nobody, the rule skips nobody's
    /// connections, and the tunnel opens (its probe, mirror and tunnel were not redirected). In JSON
    /// this time: the transparent keys are the same in both formats.
    @Test func pinproxyExemptedByItsUidDoesNotLoop() throws {
        let nft = Self.redirectExceptMark.replacingOccurrences(of: "meta mark != 0x70", with: "meta skuid != 65534")
        let o = try Self.inNamespace(policy: Self.policy(mark: false, extraProxy: "  log_format: json"), nft: nft, launch: "setpriv --reuid=65534 --regid=65534 --clear-groups",
                                     clients: [Self.curl("curl-good", address: "10.77.0.2"), Self.curl("curl-rogue", address: "10.77.0.3")])
        #expect(o.stdout == "curl-good 200\ncurl-rogue 000\n", "stdout: \(o.stdout)\nstderr: \(o.stderr)\nlog: \(o.rawLog)")
        #expect(o.lines("tunnel_allowed", originalDst: "10.77.0.2:443").count == 1, "\(o.rawLog)")
        #expect(o.lines("tunnel_refused", originalDst: "10.77.0.3:443").first?["reason"] == "pin_mismatch", "\(o.rawLog)")
        #expect(o.rawLog.hasPrefix("{") && o.lines("tunnel_allowed", originalDst: "10.77.0.2:443").first?["via"] == "transparent", "\(o.rawLog)")
        #expect(o.log.first { $0["event"] == "started" }?["transparent_listen"] == "127.0.0.1:15001,[::1]:15001", "\(o.rawLog)")
    }

    /// Rules that redirect pinproxy's own connections too (no uid or mark exemption): pinproxy
    /// refuses to start, saying so, instead of looping.
    @Test func rulesThatWouldRedirectPinproxyItselfStopTheStart() throws {
        let nft = Self.redirectExceptMark.replacingOccurrences(of: "meta mark != 0x70 ", with: "")
        let o = try Self.inNamespace(policy: Self.policy(), nft: nft, clients: [])
        let failed = try #require(o.log.first { $0["event"] == "start_failed" }, "\(o.rawLog)\n\(o.stderr)")
        #expect(failed["detail"]?.contains("the redirect rules send pinproxy's own upstream connections back to it, a loop") == true, "\(failed)")
        #expect(!o.log.contains { $0["event"] == "started" }, "\(o.rawLog)")
    }

    // MARK: the shipped rule sets

    static let shipped = Paths.repository.appendingPathComponent("config/transparent").path

    /// `nft -c -f`: parsed and checked against the kernel's rule types, without loading.
    @Test(arguments: ["transparent-host.nft", "transparent-pod.nft"])
    func theShippedRuleSetsCheck(file: String) throws {
        let r = try run("/usr/sbin/nft", ["-c", "-f", "\(Self.shipped)/\(file)"], timeout: 30)
        #expect(r.status == 0 && r.stderr.isEmpty, "\(r.stderr)")
        // The check is real: a chain of the wrong type is refused.
        let text = try String(contentsOfFile: "\(Self.shipped)/\(file)", encoding: .utf8)
        let broken = try temporaryFile(text.replacingOccurrences(of: "type nat hook output", with: "type route hook input"), name: "broken.nft")
        #expect(try run("/usr/sbin/nft", ["-c", "-f", broken], timeout: 30).status == 1)
    }

    /// The host's rule set, loaded as shipped, with the mark it exempts (`transparent_mark: 0x70`).
    @Test func theShippedHostRulesPinWithTheMark() throws {
        let nft = try String(contentsOfFile: "\(Self.shipped)/transparent-host.nft", encoding: .utf8)
        let o = try Self.inNamespace(policy: Self.policy(), nft: nft, clients: [Self.curl("curl-good", address: "10.77.0.2"), Self.curl("curl-rogue", address: "10.77.0.3")])
        #expect(o.stdout == "curl-good 200\ncurl-rogue 000\n", "stdout: \(o.stdout)\nstderr: \(o.stderr)\nlog: \(o.rawLog)")
        #expect(o.lines("tunnel_allowed", originalDst: "10.77.0.2:443").count == 1, "\(o.rawLog)")
        #expect(o.lines("tunnel_refused", originalDst: "10.77.0.3:443").first?["reason"] == "pin_mismatch", "\(o.rawLog)")
    }

    /// The pod's rule set, loaded as shipped, with pinproxy as uid 1337 (the sidecar's), no mark.
    @Test func theShippedPodRulesPinWithTheSidecarsUid() throws {
        let nft = try String(contentsOfFile: "\(Self.shipped)/transparent-pod.nft", encoding: .utf8)
        let o = try Self.inNamespace(policy: Self.policy(mark: false), nft: nft, launch: "setpriv --reuid=1337 --regid=1337 --clear-groups",
                                     clients: [Self.curl("curl-good", address: "10.77.0.2"), Self.curl("curl-rogue", address: "10.77.0.3")])
        #expect(o.stdout == "curl-good 200\ncurl-rogue 000\n", "stdout: \(o.stdout)\nstderr: \(o.stderr)\nlog: \(o.rawLog)")
        #expect(o.lines("tunnel_allowed", originalDst: "10.77.0.2:443").count == 1, "\(o.rawLog)")
    }

    /// `pinproxy check` lints the transparent settings (and starts nothing).
    @Test func checkLintsTheTransparentSettings() throws {
        let policy = try temporaryFile("version: 1\nproxy:\n  transparent_listen: [\"127.0.0.1:15001\"]\n  allowed_ports: [8443]\ndefaults:\n  unpinned: allow\n")
        let r = try run(Paths.pinproxy, ["check", "--config", policy], timeout: 30)
        #expect(r.status == 0, "\(r.stdout)\n\(r.stderr)")
        let codes = r.stdout.split(separator: "\n").compactMap { $0.firstMatch(of: /warning\[([a-z_]+)\]/).map { String($0.1) } }
        #expect(codes == ["transparent_clients_loopback_only", "transparent_port_not_allowed"], "\(r.stdout)")
        #expect(r.stdout.contains("\(policy):3: warning[transparent_clients_loopback_only]"), "\(r.stdout)")
    }

    // MARK: Java and Go, which read no proxy setting

    /// The Go client, built once (its own build cache, no module download).
    static let goClient: Result<String, HelperError> = {
        do {
            let directory = try temporaryDirectory()
            let environment = ["PATH": "/usr/bin:/bin", "HOME": directory, "GOCACHE": directory + "/gocache", "GOPATH": directory + "/gopath",
                               "GO111MODULE": "off", "CGO_ENABLED": "0"]
            let r = try run("/usr/bin/go", ["build", "-o", directory + "/transparent_client", "\(Paths.scripts)/transparent_client.go"],
                            environment: environment, timeout: 300)
            guard r.status == 0 else { return .failure(HelperError(message: "go build failed: \(r.stderr)")) }
            return .success(directory + "/transparent_client")
        } catch {
            return .failure(HelperError(message: "\(error)"))
        }
    }()

    /// Java's HttpClient (no proxy setting: Java reads none of the environment's) and Go's net/http
    /// with a Transport of its own: the good server's tunnel opens, the rogue's is refused, over
    /// IPv4 and (Go) IPv6. Java finds the name through a hosts file of the JVM's own
    /// (`jdk.net.hosts.file`), never the machine's; Go dials the address itself.
    @Test(.enabled(if: FileManager.default.isExecutableFile(atPath: "/usr/bin/java") && FileManager.default.isExecutableFile(atPath: "/usr/bin/go")))
    func javaAndGoArePinnedThroughTheRedirect() throws {
        let go = try Self.goClient.get()
        let java = { (hosts: String) in
            "java -Djdk.net.hosts.file=\(hosts) -Djavax.net.ssl.trustStore=trust.p12 -Djavax.net.ssl.trustStorePassword=changeit "
                + "-Djavax.net.ssl.trustStoreType=PKCS12 \(Paths.scripts)/TransparentClient.java https://api.pinproxy.test/"
        }
        let o = try Self.inNamespace(policy: Self.policy(), clients: [
            "keytool -importcert -noprompt -alias good -file \(Self.fixtures)/good-root.pem -keystore trust.p12 -storetype PKCS12 -storepass changeit >/dev/null",
            "keytool -importcert -noprompt -alias rogue -file \(Self.fixtures)/rogue-root.pem -keystore trust.p12 -storetype PKCS12 -storepass changeit >/dev/null",
            "echo '10.77.0.2 api.pinproxy.test' > hosts-good", "echo '10.77.0.3 api.pinproxy.test' > hosts-rogue",
            java("hosts-good"), java("hosts-rogue"),
            "\(go) https://api.pinproxy.test/ 10.77.0.2:443 \(Self.fixtures)/both-roots.pem",
            "\(go) https://api.pinproxy.test/ 10.77.0.3:443 \(Self.fixtures)/both-roots.pem",
            "\(go) https://api.pinproxy.test/ '[fd77::2]:443' \(Self.fixtures)/both-roots.pem",
        ], timeout: 180)
        #expect(o.stdout == "java 200\njava error SSLHandshakeException\ngo 200\ngo error\ngo 200\n", "stdout: \(o.stdout)\nstderr: \(o.stderr)\nlog: \(o.rawLog)")
        #expect(o.lines("tunnel_allowed", originalDst: "10.77.0.2:443").count == 2 && o.lines("tunnel_allowed", originalDst: "[fd77::2]:443").count == 1,
                "\(o.rawLog)")
        #expect(o.lines("tunnel_refused", originalDst: "10.77.0.3:443").map { $0["reason"] } == ["pin_mismatch", "pin_mismatch"], "\(o.rawLog)")
    }

    // MARK: plain HTTP on a redirected port 80

    /// A redirected port 80 carries origin-form requests: forwarded as a proxy client's plain HTTP
    /// is (the `Host` header names the host: `resolve:` maps it here), a pinned host refused as a
    /// downgrade, and all of it refused under `plain_http: refuse`; the lines name the original
    /// destination.
    @Test func plainHTTPOnPort80IsForwardedOrRefusedAsPlainHTTPIs() throws {
        let plain = { (label: String, host: String) in
            "curl -sS -o /dev/null -w '\(label) %{http_code}\\n' --max-time 15 --resolve '\(host):80:10.77.0.2' http://\(host)/page 2>>curl.err"
        }
        let forward = Self.policy() + "\nresolve:\n  plain.pinproxy.test: 10.77.0.2\n"
        let o = try Self.inNamespace(policy: forward, clients: [plain("plain", "plain.pinproxy.test"), plain("pinned", "api.pinproxy.test"),
                                                                 "curl -sS --max-time 15 --resolve plain.pinproxy.test:80:10.77.0.2 http://plain.pinproxy.test/page"])
        #expect(o.stdout == "plain 200\npinned 403\nhello from plain host=plain.pinproxy.test\n", "stdout: \(o.stdout)\nstderr: \(o.stderr)\nlog: \(o.rawLog)")
        let forwarded = o.lines("http_forwarded", originalDst: "10.77.0.2:80")
        #expect(forwarded.count == 2 && forwarded.allSatisfy { $0["host"] == "plain.pinproxy.test" && $0["via"] == "transparent" && $0["status"] == "200" },
                "\(o.rawLog)")
        let pinned = try #require(o.lines("request_rejected", originalDst: "10.77.0.2:80").first, "\(o.rawLog)")
        #expect(pinned["reason"] == "plain_http_to_pinned_host" && pinned["host"] == "api.pinproxy.test", "\(pinned)")

        let refuse = try Self.inNamespace(policy: Self.policy(extraProxy: "  plain_http: refuse"), clients: [plain("plain", "plain.pinproxy.test")])
        #expect(refuse.stdout == "plain 403\n", "stdout: \(refuse.stdout)\nlog: \(refuse.rawLog)")
        #expect(refuse.lines("request_rejected", originalDst: "10.77.0.2:80").first?["reason"] == "plain_http_refused", "\(refuse.rawLog)")
    }
}
