import Testing
@testable import PinPolicy

/// `proxy.metrics_listen`: off by default, loopback only, a wrong address a load error at its place.
@Suite struct MetricsListenLoaderTests {
    @Test func offByDefault() throws {
        #expect(try load(header).get().proxy.metricsListen == nil)
    }

    @Test func aLoopbackAddressLoads() throws {
        let v4 = try load(header + "proxy:\n  metrics_listen: \"127.0.0.1:9464\"\n").get().proxy.metricsListen
        #expect(v4 == SocketAddress.parse("127.0.0.1:9464"))
        let v6 = try load(header + "proxy:\n  metrics_listen: \"[::1]:0\"\n").get().proxy.metricsListen
        #expect(v6 == SocketAddress.parse("[::1]:0"))
    }

    @Test func anAddressBeyondLoopbackIsALoadErrorAtItsPlace() {
        expectError(header + "proxy:\n  metrics_listen: \"0.0.0.0:9464\"\n", line: 5, column: 19, "proxy.metrics_listen must be a loopback address")
        expectError(header + "proxy:\n  metrics_listen: \"192.0.2.1:9464\"\n", line: 5, column: 19, "not 192.0.2.1:9464")
        expectError(header + "proxy:\n  metrics_listen: \"[::]:9464\"\n", line: 5, column: 19, "loopback")
    }

    @Test func aMalformedAddressIsALoadError() {
        expectError(header + "proxy:\n  metrics_listen: localhost:9464\n", line: 5, column: 19, "is not a metrics address")
        expectError(header + "proxy:\n  metrics_listen: [\"127.0.0.1:9464\"]\n", line: 5, column: 19, "single value")
    }
}
