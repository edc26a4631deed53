import PinPolicy

/// How an open tunnel passed: unpinned by admission, or pinned with its probe's chain judged and the
/// verdict that let it through. A pinned tunnel cannot lack its judgement, nor an unpinned one have one.
enum Passage {
    case unpinned(UnpinnedBasis, rule: Rule?)
    case pinned(Rule, Judgement, TunnelDecision)

    var decision: TunnelDecision {
        switch self {
        case .unpinned(let basis, _): return .unpinned(basis)
        case .pinned(_, _, let decision): return decision
        }
    }

    /// The admission it passed on.
    var basis: AdmissionBasis {
        switch self {
        case .unpinned(let basis, let rule): return .unpinned(basis, rule: rule)
        case .pinned(let rule, _, _): return .pinned(rule)
        }
    }
}
