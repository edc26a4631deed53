/// A check on an open tunnel saw what only an interceptor shows: a chain that fails an enforced
/// rule although the probe's passed, or a mirror flight signed by no key of its chain. Logged as
/// `interception_suspected` and the host:port quarantined (`Quarantine`).
struct InterceptionCatch: Equatable {
    /// Which check caught it.
    let stage: StreamStage
    let reason: StreamReason
    let detail: String
    /// The chain it was shown (DER, leaf first), when it had one.
    let chain: [[UInt8]]?
}
