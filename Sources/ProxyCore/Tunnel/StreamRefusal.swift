/// A stream refusal with its evidence.
struct StreamRefusal: Equatable, Sendable {
    let reason: StreamReason
    let detail: String
    /// Send the client a fatal `bad_certificate` alert before closing (a judged chain).
    var alertClient = false
}
