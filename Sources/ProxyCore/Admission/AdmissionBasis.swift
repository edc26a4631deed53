import PinPolicy

/// How admission let a CONNECT through.
enum AdmissionBasis: Equatable {
    /// A rule pins the host: the probe's chain is judged under it before a tunnel opens.
    case pinned(Rule)
    /// Tunnelled without a certificate check; the rule that says so (`mode: unpinned`), if any.
    case unpinned(UnpinnedBasis, rule: Rule?)

    var rule: Rule? {
        switch self {
        case .pinned(let rule): return rule
        case .unpinned(_, let rule): return rule
        }
    }
}
