/// What one mirror check found, once judged.
enum MirrorFinding: Equatable {
    /// Its chain passes the rule.
    case passed
    /// Its chain fails the rule, its flight does not verify, or it was lost: the answer for the
    /// tunnel (`.done` when report mode or a bypass let it through).
    case refused(Inspection)
    /// It could not be made or read: the tunnel rests on the probe, saying why.
    case unavailable(String)
}
