import Foundation
import PinPolicy
import Testing
import TestSupport
import Yams

/// config/kubernetes/, pinproxy as a Kubernetes sidecar in transparent mode, checked without a
/// cluster: every document parses, the fields the example's design rests on are there and agree
/// with each other (the uid the shipped pod rules exempt, the listener they redirect to, the mounted
/// policy's path), and the ConfigMap's policy loads and checks clean with this pinproxy.
@Suite struct KubernetesExampleTests {
    static let directory = Paths.repository.appendingPathComponent("config/kubernetes").path

    static func documents(_ file: String) throws -> [[String: Any]] {
        let text = try String(contentsOfFile: "\(directory)/\(file)", encoding: .utf8)
        return try Yams.load_all(yaml: text).map { try #require($0 as? [String: Any], "\(file): a document that is not a mapping") }
    }

    static func dig(_ value: Any?, _ path: String...) -> Any? {
        path.reduce(value) { current, key in
            if let index = Int(key) { return (current as? [Any]).flatMap { index < $0.count ? $0[index] : nil } }
            return (current as? [String: Any])?[key]
        }
    }

    @Test func thePolicyConfigMapLoadsAndChecksClean() throws {
        let map = try #require(try Self.documents("pinproxy-policy.yaml").first)
        #expect(map["kind"] as? String == "ConfigMap" && Self.dig(map, "metadata", "name") as? String == "pinproxy-policy")
        let policyText = try #require(Self.dig(map, "data", "pinproxy.yaml") as? String)
        let policy = try PolicyLoader.load(yaml: policyText, source: "pinproxy.yaml")
        #expect(policy.proxy.transparent.listen.map(\.description) == ["127.0.0.1:15001", "[::1]:15001"])
        #expect(policy.proxy.logFormat == .json && policy.proxy.metricsListen?.description == "127.0.0.1:9464")
        #expect(policy.lint(at: Date()).isEmpty, "\(policy.lint(at: Date()))")
        let file = try temporaryFile(policyText)
        let check = try run(Paths.pinproxy, ["check", "--config", file], timeout: 30)
        #expect(check.status == 0 && !check.stdout.contains("warning"), "\(check.stdout)\(check.stderr)")
    }

    @Test func theDeploymentRedirectsExemptsTheSidecarAndReloads() throws {
        let documents = try Self.documents("pinproxy-sidecar.yaml")
        let deployment = try #require(documents.first { $0["kind"] as? String == "Deployment" })
        let pod = try #require(Self.dig(deployment, "spec", "template", "spec") as? [String: Any])
        #expect(pod["shareProcessNamespace"] as? Bool == true)
        let inits = try #require(pod["initContainers"] as? [[String: Any]])
        #expect(inits.map { $0["name"] as? String } == ["pinproxy-init", "pinproxy", "pinproxy-reloader"])
        // The init step loads the shipped pod rules, with NET_ADMIN and nothing else added.
        #expect(inits[0]["command"] as? [String] == ["nft", "-f", "/usr/share/pinproxy/transparent-pod.nft"])
        #expect(Self.dig(inits[0], "securityContext", "capabilities", "add") as? [String] == ["NET_ADMIN"])
        #expect(inits[0]["restartPolicy"] == nil)
        // pinproxy: a native sidecar, as the uid the shipped rules exempt, with no capability.
        let rules = try String(contentsOfFile: Paths.repository.appendingPathComponent("config/transparent/transparent-pod.nft").path, encoding: .utf8)
        #expect(rules.contains("meta skuid 1337 return") && rules.contains("redirect to :15001"))
        let sidecar = inits[1]
        #expect(sidecar["restartPolicy"] as? String == "Always")
        #expect(Self.dig(sidecar, "securityContext", "runAsUser") as? Int == 1337)
        #expect(Self.dig(sidecar, "securityContext", "capabilities", "drop") as? [String] == ["ALL"] && Self.dig(sidecar, "securityContext", "capabilities", "add") == nil)
        #expect(sidecar["command"] as? [String] == ["pinproxy", "run", "--config", "/etc/pinproxy/pinproxy.yaml"])
        #expect(Self.dig(sidecar, "volumeMounts", "0", "mountPath") as? String == "/etc/pinproxy")
        // The reloader: SIGHUP to pinproxy when the mounted file changes, as the same uid.
        let reloader = inits[2]
        let script = try #require((reloader["command"] as? [String])?.last)
        #expect(script.contains("pkill -HUP -x pinproxy") && script.contains("/etc/pinproxy/pinproxy.yaml"))
        #expect(reloader["restartPolicy"] as? String == "Always" && Self.dig(reloader, "securityContext", "runAsUser") as? Int == 1337)
        // The policy volume is the ConfigMap; nothing else runs as the exempt uid but pinproxy and its reloader.
        #expect(Self.dig(pod, "volumes", "0", "configMap", "name") as? String == "pinproxy-policy")
        let containers = try #require(pod["containers"] as? [[String: Any]])
        #expect(containers.allSatisfy { Self.dig($0, "securityContext", "runAsUser") as? Int != 1337 }, "\(containers)")
        #expect(containers.allSatisfy { ($0["env"] as? [[String: Any]])?.contains { ($0["name"] as? String)?.lowercased().hasSuffix("_proxy") == true } != true })
        // /metrics: the in-pod agent scrapes pinproxy's loopback listener.
        let agent = try #require(documents.first { Self.dig($0, "metadata", "name") as? String == "pinproxy-metrics-agent" })
        let agentConfig = try #require(Self.dig(agent, "data", "agent.yaml") as? String)
        let scrape = try #require(try Yams.load(yaml: agentConfig) as? [String: Any])
        #expect(Self.dig(scrape, "scrape_configs", "0", "static_configs", "0", "targets") as? [String] == ["127.0.0.1:9464"])
    }
}
