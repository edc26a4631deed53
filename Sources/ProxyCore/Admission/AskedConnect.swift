import PinPolicy

/// What a CONNECT asked for, and the policy snapshot it is judged by (taken when it arrived).
struct AskedConnect {
    let authority: Authority
    let snapshot: PolicySnapshot
}
