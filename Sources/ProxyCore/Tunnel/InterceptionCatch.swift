import PinPolicy

/// Two looks that carried the same ClientHello were shown different chains, each proved by the
/// server, one passing an enforced rule and one failing it (`SameHelloLooks`, `ConfirmingLook`):
/// what only an interceptor choosing its connections shows. Logged as `interception_suspected` and
/// the host:port quarantined (`Quarantine`).
struct InterceptionCatch: Equatable {
    /// Which check saw the failing chain.
    let stage: StreamStage
    let reason: StreamReason
    let detail: String
    /// The failing chain (DER, leaf first).
    let chain: [[UInt8]]?
}
