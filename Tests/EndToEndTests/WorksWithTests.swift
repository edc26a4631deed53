import Foundation
import Testing
import TestSupport

/// The works-with matrix: real clients, each configured the way its documentation says, fetch from
/// a pinned host through pinproxy. The good server's content arrives; a server for the same name
/// with a rogue CA's certificate (which the client itself trusts, as after a CA compromise) is
/// refused, and the client reports pinproxy's status. The content (a file, a PEP 503 index, a
/// dumb-HTTP git repository, a flat apt repository) is built once by scripts/matrix_tree.py and
/// served over TLS by scripts/static.py.
@Suite(.serialized) struct WorksWithTests {
    enum Client: String, CaseIterable, CustomTestStringConvertible {
        case curlUppercase, curlLowercase, curlProxy10, wget, urllib, requests, pip, git, go, node, apt
        var testDescription: String { rawValue }
    }

    /// What one client run printed.
    struct Outcome {
        let status: Int32
        let output: String
    }

    /// The content, built once for the whole suite.
    static let tree: Result<String, HelperError> = {
        do {
            let directory = try temporaryDirectory() + "/tree"
            let r = try run("/usr/bin/python3", ["\(Paths.scripts)/matrix_tree.py", directory], environment: cleanEnvironment(home: NSTemporaryDirectory()), timeout: 60)
            guard r.stdout.contains("OK") else { return .failure(HelperError(message: "matrix_tree.py failed: \(r.stderr)")) }
            return .success(directory)
        } catch {
            return .failure(HelperError(message: "\(error)"))
        }
    }()

    /// The Go client, built once into a temporary directory with its own build cache.
    static let goClient: Result<String, HelperError> = {
        do {
            let directory = try temporaryDirectory()
            var environment = cleanEnvironment(home: directory)
            environment["GOCACHE"] = directory + "/gocache"
            environment["GOPATH"] = directory + "/gopath"
            environment["GO111MODULE"] = "off"
            environment["CGO_ENABLED"] = "0"
            let r = try run("/usr/bin/go", ["build", "-o", directory + "/goget", "\(Paths.scripts)/goget.go"], environment: environment, timeout: 300)
            guard r.status == 0 else { return .failure(HelperError(message: "go build failed: \(r.stderr)")) }
            return .success(directory + "/goget")
        } catch {
            return .failure(HelperError(message: "\(error)"))
        }
    }()

    /// Only what a client needs: no inherited proxy, CA-bundle or pip settings (a CI machine's
    /// `REQUESTS_CA_BUNDLE` or `PIP_CERT` would decide what the client trusts instead of the test).
    static func cleanEnvironment(home: String) -> [String: String] {
        ["PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "HOME": home, "LANG": "C.UTF-8", "PIP_CONFIG_FILE": "/dev/null",
         "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"]
    }

    static let cafile = Paths.fixture("both-roots.pem")

    /// Runs `client` against https://api.pinproxy.test:`port` through the proxy at `proxy`.
    static func fetch(_ client: Client, proxy: UInt16, port: UInt16) throws -> Outcome {
        let work = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: work) }
        let proxyURL = "http://127.0.0.1:\(proxy)"
        let base = "https://api.pinproxy.test:\(port)"
        var environment = cleanEnvironment(home: work)
        func upper() { environment["HTTPS_PROXY"] = proxyURL }
        func lower() { environment["https_proxy"] = proxyURL }
        func go(_ executable: String, _ arguments: [String], timeout: Double = 60) throws -> Outcome {
            let r = try run(executable, arguments, environment: environment, timeout: timeout)
            return Outcome(status: r.status, output: (r.stdout + r.stderr).trimmingCharacters(in: .whitespacesAndNewlines))
        }
        switch client {
        case .curlUppercase:
            upper()
            return try go("/usr/bin/curl", ["-sS", "--max-time", "20", "--cacert", cafile, "\(base)/hello.txt"])
        case .curlLowercase:
            lower()
            return try go("/usr/bin/curl", ["-sS", "--max-time", "20", "--cacert", cafile, "\(base)/hello.txt"])
        case .curlProxy10:
            return try go("/usr/bin/curl", ["-sS", "--max-time", "20", "--proxy1.0", "127.0.0.1:\(proxy)", "--cacert", cafile, "\(base)/hello.txt"])
        case .wget:
            lower()  // wget reads only the lowercase variable
            return try go("/usr/bin/wget", ["-nv", "-O", "-", "--timeout=20", "--tries=1", "--ca-certificate=\(cafile)", "\(base)/hello.txt"])
        case .urllib:
            upper()
            return try go("/usr/bin/python3", ["\(Paths.scripts)/clients.py", "get", "\(base)/hello.txt", cafile])
        case .requests:
            upper()
            let script = """
                import sys, requests
                try:
                    r = requests.get(sys.argv[1], verify=sys.argv[2], timeout=20)
                    print("OK", r.status_code, r.text.strip())
                except requests.exceptions.RequestException as e:
                    print("ERROR", e)
                """
            return try go("/usr/bin/python3", ["-c", script, "\(base)/hello.txt", cafile])
        case .pip:
            upper()
            // -vvv: pip names the proxy's refusal only in its debug output.
            let download = try go("/usr/bin/python3", ["-m", "pip", "download", "-vvv", "--disable-pip-version-check", "--no-cache-dir",
                                                       "--no-deps", "--retries", "0", "--timeout", "20", "--cert", cafile,
                                                       "--index-url", "\(base)/simple/", "-d", work + "/downloads", "tinypkg"])
            let files = (try? FileManager.default.contentsOfDirectory(atPath: "\(work)/downloads")) ?? []
            return Outcome(status: download.status, output: download.output + "\nFILES " + files.sorted().joined(separator: " "))
        case .git:
            lower()
            let clone = try go("/usr/bin/git", ["-c", "http.sslCAInfo=\(cafile)", "clone", "-q", "\(base)/repo.git", work + "/clone"])
            let readme = (try? String(contentsOfFile: work + "/clone/README", encoding: .utf8)) ?? ""
            return Outcome(status: clone.status, output: clone.output + readme)
        case .go:
            upper()
            return try go(try goClient.get(), ["\(base)/hello.txt", cafile])
        case .node:
            return try go("/usr/bin/node", ["\(Paths.scripts)/node_connect.js", String(proxy), "api.pinproxy.test", String(port), "/hello.txt", cafile])
        case .apt:
            // apt's own state in the temporary directory; the proxy only through Acquire::https::Proxy.
            for sub in ["state/lists/partial", "cache/archives/partial", "etc/sources.list.d", "etc/preferences.d", "download"] {
                try FileManager.default.createDirectory(atPath: "\(work)/\(sub)", withIntermediateDirectories: true)
            }
            _ = FileManager.default.createFile(atPath: "\(work)/state/status", contents: nil)
            try "deb [trusted=yes] \(base)/apt ./\n".write(toFile: "\(work)/etc/sources.list", atomically: true, encoding: .utf8)
            let options = [
                "Dir::State=\(work)/state", "Dir::State::status=\(work)/state/status", "Dir::Cache=\(work)/cache",
                "Dir::Etc::SourceList=\(work)/etc/sources.list", "Dir::Etc::SourceParts=\(work)/etc/sources.list.d",
                "Dir::Etc::Preferences=\(work)/etc/preferences", "Dir::Etc::PreferencesParts=\(work)/etc/preferences.d",
                "APT::Sandbox::User=root", "Debug::NoLocking=1", "Acquire::Retries=0", "Acquire::https::Timeout=20",
                "Acquire::https::Proxy=\(proxyURL)", "Acquire::https::CaInfo=\(cafile)",
            ].flatMap { ["-o", $0] }
            let update = try go("/usr/bin/apt-get", ["-q", "--error-on=any"] + options + ["update"])
            guard update.status == 0 else { return update }
            // `apt-get download` writes into the current directory.
            let download = try go("/bin/sh", ["-c", "cd \"$0\" && exec apt-get -q \"$@\" download tinypkg", "\(work)/download"] + options)
            let files = (try? FileManager.default.contentsOfDirectory(atPath: "\(work)/download")) ?? []
            return Outcome(status: download.status, output: download.output + "\nFILES " + files.sorted().joined(separator: " "))
        }
    }

    /// What the client shows for the good server (`good`) and what it reports for the rogue one.
    static func expected(_ client: Client) -> (good: String, rogueStatus: Int32, rogue: String) {
        let hello = "hello through pinproxy"
        switch client {
        case .curlUppercase, .curlLowercase, .curlProxy10: return (hello, 56, "curl: (56) CONNECT tunnel failed, response 502")
        case .wget: return (hello, 4, "Proxy tunneling failed: Certificate Pin Mismatch")
        case .urllib: return ("OK 200 \(hello)", 0, "ERROR Tunnel connection failed: 502 Certificate Pin Mismatch")
        case .requests: return ("OK 200 \(hello)", 0, "Tunnel connection failed: 502 Certificate Pin Mismatch")
        case .pip: return ("FILES tinypkg-1.0-py3-none-any.whl", 1, "Tunnel connection failed: 502 Certificate Pin Mismatch")
        case .git: return ("cloned through pinproxy", 128, "CONNECT tunnel failed, response 502")
        case .go: return ("OK 200 \(hello)", 0, ": Certificate Pin Mismatch")
        case .node: return ("OK 200 \(hello)", 0, "REFUSED 502 Certificate Pin Mismatch")
        case .apt: return ("FILES tinypkg_1.0_all.deb", 100, "Invalid response from proxy: HTTP/1.1 502 Certificate Pin Mismatch")
        }
    }

    @Test(arguments: Client.allCases)
    func theGoodServerArrivesAndTheRogueIsRefused(client: Client) throws {
        let tree = try Self.tree.get()
        // The genuine server on 127.0.0.1 and a rogue one on 127.0.0.2, same port; one proxy
        // resolves the pinned name to each, as a poisoned resolver would.
        let good = try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/static.py", "--root", tree,
                                               "--cert", Paths.fixture("leaf-ec256.chain.pem"), "--key", Paths.fixture("leaf-ec256.key.pem")])
        let rogue = try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/static.py", "--root", tree, "--bind", "127.0.0.2",
                                                "--port", String(good.port),
                                                "--cert", Paths.fixture("rogue-leaf.chain.pem"), "--key", Paths.fixture("rogue-leaf.key.pem")])
        defer { good.stop(); rogue.stop() }
        let rules = apiRule(pinsLine(Pins.leafEC))
        let genuine = try ProxyProcess(config: policy(ports: [good.port], rules: rules, resolve: "  api.pinproxy.test: 127.0.0.1"))
        let poisoned = try ProxyProcess(config: policy(ports: [good.port], rules: rules, resolve: "  api.pinproxy.test: 127.0.0.2"))
        let expected = Self.expected(client)

        let fetched = try Self.fetch(client, proxy: genuine.port, port: good.port)
        #expect(fetched.status == 0, "\(client): \(fetched.output)")
        #expect(fetched.output.contains(expected.good), "\(client): \(fetched.output)")
        #expect(genuine.waitFor("tunnel_allowed")?["host"] == "api.pinproxy.test", "\(client) went around pinproxy")
        #expect(genuine.events("tunnel_refused").isEmpty)

        let refused = try Self.fetch(client, proxy: poisoned.port, port: good.port)
        #expect(refused.status == expected.rogueStatus, "\(client): \(refused.output)")
        #expect(refused.output.contains(expected.rogue), "\(client): \(refused.output)")
        #expect(!refused.output.contains("hello through pinproxy") && !refused.output.contains("FILES tinypkg"))
        let line = poisoned.waitFor("tunnel_refused")
        #expect(line?.refusal == .policy(.pinMismatch))
        #expect(line?["status"] == "502")
        #expect(poisoned.events("tunnel_allowed").isEmpty)
    }
}
