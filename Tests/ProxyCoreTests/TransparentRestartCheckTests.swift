import PinPolicy
import Testing
@testable import ProxyCore

/// Transparent mode's listeners and mark are made at start: a reload that changes them says so.
@Suite struct TransparentRestartCheckTests {
    @Test func transparentListenersAndTheMarkWaitForARestart() throws {
        let off = try RestartCheckTests.policy("  listen: [\"127.0.0.1:3128\"]\n")
        let on = try RestartCheckTests.policy("  listen: [\"127.0.0.1:3128\"]\n  transparent_listen: [\"127.0.0.1:15001\"]\n  transparent_mark: 0x70\n")
        let changes = RestartCheckTests.running.changes(from: off, to: on)
        #expect(changes.map(\.setting) == ["proxy.transparent_listen", "proxy.transparent_mark"])
        #expect(changes.map(\.detail) == ["pinproxy keeps transparent mode off", "pinproxy keeps marking its upstream connections with no mark"])
        let back = RestartCheckTests.running.changes(from: on, to: off)
        #expect(back.map(\.detail) == ["pinproxy keeps its transparent listeners on 127.0.0.1:15001", "pinproxy keeps marking its upstream connections 0x70"])
        #expect(RestartCheckTests.running.changes(from: on, to: on).isEmpty)
    }
}
