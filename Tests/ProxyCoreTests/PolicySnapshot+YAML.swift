import PinPolicy
import TLSInspection
@testable import ProxyCore

extension PolicySnapshot {
    /// A snapshot of a policy written in the test, with the system trust store: the policy must load
    /// (a test's own YAML that does not is a mistake in the test, so it stops there).
    static func loaded(from yaml: String) -> PolicySnapshot {
        let policy = try! PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil)
        return try! PolicySnapshot(policy: policy, systemStore: TrustStore.system())
    }
}
