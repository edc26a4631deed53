import Foundation
import Testing
@testable import PinPolicy

/// `resolve:` that sends a name into `deny_destinations`: the policy loads, and every CONNECT to
/// that name would be a 403, so `check` warns.
@Suite struct ResolveLintTests {
    @Test func aResolvedNameInDenyDestinationsIsAWarningAtItsLine() throws {
        let yaml = header + """
            resolve:
              api.internal.test: 127.0.0.1
              split.internal.test: [10.0.0.5, "::ffff:169.254.1.1"]
              fine.internal.test: 10.0.0.6

            """
        let warnings = try load(yaml).get().lint(at: Date())
        #expect(warnings.map(\.description) == [
            "line 5: warning[resolve_to_denied_destination]: resolve: sends 'api.internal.test' to 127.0.0.1 (loopback), which proxy.deny_destinations refuses: every CONNECT to it is refused with 403 destination_ip_prohibited; take that class out of deny_destinations if this destination is intended, or map the name elsewhere",
            "line 6: warning[resolve_to_denied_destination]: resolve: sends 'split.internal.test' to ::ffff:169.254.1.1 (link-local), which proxy.deny_destinations refuses: those addresses are never used; take that class out of deny_destinations if this destination is intended, or map the name elsewhere",
        ])
        let allowed = try load(header + "proxy: {deny_destinations: [link-local]}\nresolve:\n  api.internal.test: 127.0.0.1\n").get()
        #expect(allowed.lint(at: Date()).isEmpty)
    }
}
