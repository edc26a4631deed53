import Foundation
import Testing
@testable import PinPolicy

/// `proxy.upstream_proxy` and its credentials file: strict, with positions, never inline secrets.
@Suite struct UpstreamProxyLoaderTests {
    func credentials(_ text: String) throws -> String {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent("pinproxy-parent-\(UUID().uuidString)")
        try text.write(to: url, atomically: true, encoding: .utf8)
        return url.path
    }

    @Test func aParentWithCredentialsFromAFile() throws {
        let file = try credentials("user:s3cret\n")
        let policy = try load(header + "proxy:\n  upstream_proxy: http://10.0.0.1:3128\n  upstream_proxy_credentials_file: \(file)\n").get()
        #expect(policy.proxy.upstreamProxy?.address == SocketAddress.parse("10.0.0.1:3128"))
        #expect(policy.proxy.upstreamProxy?.authorization == "Basic dXNlcjpzM2NyZXQ=")
        #expect(policy.proxy.upstreamProxy?.description == "http://10.0.0.1:3128")  // never the credentials
    }

    @Test func aParentWithoutCredentialsAndIPv6() throws {
        let policy = try load(header + "proxy:\n  upstream_proxy: \"http://[2001:db8::1]:8080/\"\n").get()
        #expect(policy.proxy.upstreamProxy == UpstreamProxy(address: SocketAddress.parse("[2001:db8::1]:8080")!))
        #expect(try load(header).get().proxy.upstreamProxy == nil)
    }

    @Test func mistakesAreErrorsWithTheirPosition() throws {
        expectError(header + "proxy:\n  upstream_proxy: https://10.0.0.1:3128\n", line: 5, column: 19, "must be http://IP:PORT")
        expectError(header + "proxy:\n  upstream_proxy: socks5://10.0.0.1:1080\n", line: 5, column: 19, "must be http://IP:PORT")
        expectError(header + "proxy:\n  upstream_proxy: http://user:pw@10.0.0.1:3128\n", line: 5, column: 19, "must not carry credentials")
        expectError(header + "proxy:\n  upstream_proxy: http://proxy.corp:3128\n", line: 5, column: 19, "is not http://IP:PORT")
        expectError(header + "proxy:\n  upstream_proxy: http://10.0.0.1\n", line: 5, column: 19, "is not http://IP:PORT")
        expectError(header + "proxy:\n  upstream_proxy_credentials_file: /x\n", line: 5, column: 36, "needs proxy.upstream_proxy")
        expectError(header + "proxy:\n  upstream_proxy: http://10.0.0.1:3128\n  upstream_proxy_credentials_file: /nonexistent/parent\n",
                    line: 6, column: 36, "cannot read /nonexistent/parent")
        let bad = try credentials("no colon here\n")
        expectError(header + "proxy:\n  upstream_proxy: http://10.0.0.1:3128\n  upstream_proxy_credentials_file: \(bad)\n",
                    line: 6, column: 36, "must hold one line 'user:password'")
        let twoLines = try credentials("user:pw\nmore:lines\n")
        expectError(header + "proxy:\n  upstream_proxy: http://10.0.0.1:3128\n  upstream_proxy_credentials_file: \(twoLines)\n",
                    line: 6, column: 36, "must hold one line 'user:password'")
    }
}
