import Foundation
import Testing
@testable import PinPolicy

/// `proxy.transparent_listen` and `proxy.transparent_mark`: off by default; each wrong value a load
/// error at its place.
@Suite struct TransparentLoaderTests {
    @Test func offByDefault() throws {
        let transparent = try load(header).get().proxy.transparent
        #expect(!transparent.isOn && transparent.mark == nil)
    }

    @Test func listenersAndAMarkLoad() throws {
        let yaml = header + "proxy:\n  transparent_listen: [\"127.0.0.1:15001\", \"[::1]:15001\"]\n  transparent_mark: 0x70\n"
        let transparent = try load(yaml).get().proxy.transparent
        #expect(transparent.listen == [SocketAddress.parse("127.0.0.1:15001")!, SocketAddress.parse("[::1]:15001")!])
        #expect(transparent.mark == 0x70)
        let decimal = header + "proxy:\n  transparent_listen: [\"127.0.0.1:15001\"]\n  transparent_mark: 112\n"
        #expect(try load(decimal).get().proxy.transparent.mark == 112)
    }

    @Test func wrongValuesAreLoadErrorsAtTheirPlace() {
        expectError(header + "proxy:\n  transparent_listen: [\"127.0.0.1\"]\n", line: 5, column: 24, "is not a transparent listen address")
        expectError(header + "proxy:\n  transparent_listen: [\"127.0.0.1:0\"]\n", line: 5, column: 24, "with the port the redirect rules name")
        expectError(header + "proxy:\n  transparent_listen: []\n", line: 5, column: 23, "must name at least one address")
        expectError(header + "proxy:\n  listen: [\"127.0.0.1:3128\"]\n  transparent_listen: [\"127.0.0.1:3128\"]\n", line: 6, column: 24,
                    "is both a proxy.listen and a proxy.transparent_listen address")
        expectError(header + "proxy:\n  transparent_listen: [\"0.0.0.0:15001\"]\n", line: 5, column: 23, "needs an explicit proxy.allow_clients")
        expectError(header + "proxy:\n  upstream_proxy: http://127.0.0.1:8080\n  transparent_listen: [\"127.0.0.1:15001\"]\n", line: 6, column: 23,
                    "cannot be used with proxy.upstream_proxy")
        expectError(header + "proxy:\n  transparent_listen: [\"127.0.0.1:15001\"]\n  transparent_mark: 0\n", line: 6, column: 21, "non-zero 32-bit mark")
        expectError(header + "proxy:\n  transparent_listen: [\"127.0.0.1:15001\"]\n  transparent_mark: 0x1ffffffff\n", line: 6, column: 21, "non-zero 32-bit mark")
        expectError(header + "proxy:\n  transparent_mark: 0x70\n", line: 5, column: 21, "proxy.transparent_listen is not")
    }

    /// `check`'s transparent warnings: each names the setting's line and what to do.
    @Test func lintSaysWhatWouldCloseOrLoopRedirectedConnections() throws {
        func codes(_ proxy: String) throws -> [String] {
            try load(header + "proxy:\n  transparent_listen: [\"127.0.0.1:15001\"]\n" + proxy).get().lint(at: Date()).map(\.code)
        }
        #expect(try codes("") == ["transparent_clients_loopback_only"])
        #expect(try codes("  allow_clients: [loopback, private]\n  transparent_mark: 0x70\n") == [])
        #expect(try codes("  allow_clients: [loopback, private]\n") == [])  // exempted by uid: nothing to say
        #expect(try codes("  allow_clients: [loopback, 10.1.2.3]\n  transparent_mark: 0x70\n  allowed_ports: [8443]\n") == ["transparent_port_not_allowed"])
        let warning = try #require(try load(header + "proxy:\n  transparent_listen: [\"127.0.0.1:15001\"]\n").get().lint(at: Date()).first)
        #expect(warning.line == 5 && warning.message.contains("every one is closed at accept"))
        #expect(try load(header).get().lint(at: Date()).isEmpty)
    }
}
