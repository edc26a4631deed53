import PinPolicy

/// A stream refusal with its evidence.
struct StreamRefusal: Equatable, Sendable {
    let reason: StreamReason
    let detail: String
    /// Send the client a fatal `bad_certificate` alert before closing (a judged chain).
    var alertClient = false
    /// Which check decided: the `stage` key of the refusal line.
    var stage: StreamStage = .stream
}

/// Which check on an open tunnel decided: the `stage` key of `tunnel_refused` and
/// `interception_suspected`.
enum StreamStage: String, Sendable {
    /// The stream check, on the tunnel's own bytes (with the client's key log for TLS 1.3).
    case stream
    /// The mirror check, on its own connection with a copy of the client's hello.
    case mirror
}
