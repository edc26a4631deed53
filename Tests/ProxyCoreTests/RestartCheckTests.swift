import PinPolicy
import Testing
@testable import ProxyCore

/// A reload that changes what was made at start says which settings wait for a restart, and what
/// keeps running meanwhile; one that changes only what a reload applies says nothing.
@Suite struct RestartCheckTests {
    static func policy(_ proxy: String) throws -> Policy {
        try PolicyLoader.load(yaml: "version: 1\nproxy:\n" + proxy + "defaults: { unpinned: allow }\nrules: []\n", source: "test.yaml", pinFiles: nil)
    }

    static let running = RestartCheck(listensWherePolicySays: true, boundAddresses: [SocketAddress.parse("127.0.0.1:3128")!],
                                      metricsAddress: nil, controlSocket: nil, workerCount: 2, keyLog: nil)

    @Test func listenMetricsAndWorkersWaitForARestart() throws {
        let old = try Self.policy("  listen: [\"127.0.0.1:3128\"]\n  workers: 2\n")
        let new = try Self.policy("  listen: [\"127.0.0.1:3129\"]\n  workers: 4\n  metrics_listen: \"127.0.0.1:9464\"\n")
        let changes = Self.running.changes(from: old, to: new)
        #expect(changes.map(\.setting) == ["proxy.listen", "proxy.metrics_listen", "proxy.workers"])
        #expect(changes.map(\.detail) == ["pinproxy keeps listening on 127.0.0.1:3128", "pinproxy keeps serving metrics nowhere",
                                          "pinproxy keeps its 2 worker loops"])
    }

    /// The socket is made at start: a reload that names another (or none) keeps the running one.
    @Test func aControlSocketChangeWaitsForARestart() throws {
        let old = try Self.policy("  control_socket: /run/pinproxy/control.sock\n")
        let new = try Self.policy("  control_socket: /run/pinproxy/other.sock\n")
        let running = RestartCheck(listensWherePolicySays: true, boundAddresses: Self.running.boundAddresses,
                                   metricsAddress: nil, controlSocket: "/run/pinproxy/control.sock", workerCount: 2, keyLog: nil)
        let changes = running.changes(from: old, to: new)
        #expect(changes.map(\.setting) == ["proxy.control_socket"])
        #expect(changes.map(\.detail) == ["pinproxy keeps its control socket /run/pinproxy/control.sock"])
        #expect(running.changes(from: old, to: old).isEmpty)
    }

    @Test func aListenChangeIsNoneOfTheFilesBusinessUnderDashDashListen() throws {
        let old = try Self.policy("  listen: [\"127.0.0.1:3128\"]\n")
        let new = try Self.policy("  listen: [\"127.0.0.1:3129\"]\n")
        let overridden = RestartCheck(listensWherePolicySays: false, boundAddresses: Self.running.boundAddresses,
                                      metricsAddress: nil, controlSocket: nil, workerCount: 2, keyLog: nil)
        #expect(overridden.changes(from: old, to: new).isEmpty)
    }

    @Test func whatAReloadAppliesNeedsNoRestart() throws {
        let old = try Self.policy("  listen: [\"127.0.0.1:3128\"]\n  allow_clients: [loopback]\n")
        let new = try Self.policy("  listen: [\"127.0.0.1:3128\"]\n  allow_clients: [\"127.0.0.1\"]\n")
        #expect(Self.running.changes(from: old, to: new).isEmpty)
    }
}
