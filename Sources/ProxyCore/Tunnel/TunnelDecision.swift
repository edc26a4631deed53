import PinPolicy

/// A verdict that opens a tunnel: the decision line's event (`tunnel_allowed`, `tunnel_bypassed`,
/// `tunnel_unpinned`). A refusal is no such decision, so the decision line has no case for it.
enum TunnelDecision: Equatable {
    case allowed(PinMatch)
    case bypassed(wouldRefuse: RefusalReason, by: BypassBasis)
    case unpinned(UnpinnedBasis)

    /// The close line's `verdict`.
    var name: String {
        switch self {
        case .allowed: return "allowed"
        case .bypassed: return "bypassed"
        case .unpinned: return "unpinned"
        }
    }
}
