import PinPolicy

/// What a CONNECT asked for, and the policy snapshot it is judged by (taken when it arrived).
struct AskedConnect {
    let authority: Authority
    let snapshot: PolicySnapshot
    /// Transparent mode: the original destination the kernel redirected from (the upstream, never
    /// a DNS answer); nil for a CONNECT.
    var original: SocketAddress? = nil
}
