import Foundation

/// Faults the tests inject (`PINPROXY_TEST_FAULTS=dns,connect,…`) to prove that every failure
/// inside verification ends in a refusal or a close, never an allowed tunnel — unless an explicit
/// bypass says otherwise, and then it is logged as one. Compiled into debug builds only: a release
/// build has no such switch, whatever its environment says.
enum TestFault: String, CaseIterable {
    /// Name resolution fails (before the `resolve:` map and evdns are asked).
    case dns
    /// Every TCP connect fails (the probe's and the tunnel's).
    case connect
    /// The probe's TLS handshake fails.
    case handshake
    /// Chain validation fails.
    case validation
    /// Pin evaluation cannot be made.
    case evaluation
    /// The stream check cannot read a pinned tunnel's flight.
    case stream

    #if DEBUG
    private static let active: Set<TestFault> = Set(
        (ProcessInfo.processInfo.environment["PINPROXY_TEST_FAULTS"] ?? "").split(separator: ",").compactMap { TestFault(rawValue: String($0)) })
    #endif

    var isInjected: Bool {
        #if DEBUG
        return Self.active.contains(self)
        #else
        return false
        #endif
    }

    static let detail = "injected test fault"
}
