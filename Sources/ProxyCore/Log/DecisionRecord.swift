import PinPolicy
import TLSInspection

/// Everything a decision line and the close line say about a CONNECT, as far as it got. The record
/// grows stage by stage — what was asked, what admission let through, what the probe's chain was
/// judged, the tunnel that opened — and each stage holds only what it has: no line reads a field an
/// earlier stage may not have filled.
struct DecisionRecord {
    enum Stage {
        /// No CONNECT was read (a bad request, a timeout, another protocol).
        case requested
        /// A CONNECT refused before admission let it through (stopping, the admission gate): what
        /// it asked for, and the policy file it was refused under.
        case asked(Authority, policySource: String)
        /// Admission let it through; nothing reached yet (or the tunnel cap, DNS, a denied address,
        /// a failed connect refused it).
        case admitted(AdmittedConnect)
        /// The probe saw no chain to judge: where it got to.
        case probeFailed(AdmittedConnect, ProbeContact)
        /// The probe's chain was judged (refused, or let through and waiting for its tunnel).
        case judged(AdmittedConnect, Judgement)
        /// The tunnel is open: how it passed, and the address it reached.
        case opened(AdmittedConnect, Passage, address: SocketAddress)
    }

    let conn: Int
    let client: SocketAddress
    let stage: Stage

    init(conn: Int, client: SocketAddress, _ stage: Stage = .requested) {
        self.conn = conn
        self.client = client
        self.stage = stage
    }

    // MARK: what the stages hold, for the lines

    var admitted: AdmittedConnect? {
        switch stage {
        case .requested, .asked: return nil
        case .admitted(let a), .probeFailed(let a, _), .judged(let a, _), .opened(let a, _, _): return a
        }
    }

    var authority: Authority? {
        if case .asked(let authority, _) = stage { return authority }
        return admitted?.authority
    }

    /// The policy file the CONNECT was judged under, for hints that name it (`pin … --config PATH`).
    var policySource: String? {
        if case .asked(_, let source) = stage { return source }
        return admitted?.snapshot.policy.source
    }

    var rule: Rule? { admitted?.basis.rule }

    /// The probe's judgement, when a chain was judged.
    var judgement: Judgement? {
        switch stage {
        case .judged(_, let judgement), .opened(_, .judged(let judgement, _), _): return judgement
        case .requested, .asked, .admitted, .probeFailed, .opened(_, .unpinned, _): return nil
        }
    }

    /// The address the probe reached (or the tunnel, once open).
    var address: SocketAddress? {
        switch stage {
        case .opened(_, _, let address): return address
        case .probeFailed(_, let contact): return contact.address
        case .judged(_, let judgement): return judgement.address
        case .requested, .asked, .admitted: return nil
        }
    }

    /// The TLS version the probe negotiated.
    var tlsVersion: TLSVersion? {
        if case .probeFailed(_, let contact) = stage { return contact.tlsVersion }
        return judgement?.tlsVersion
    }

    var validation: ChainValidation? { judgement?.validation }
    var evaluation: Evaluation? { judgement?.evaluation }

    /// What let the tunnel open (nil until it is open).
    var passage: Passage? {
        if case .opened(_, let passage, _) = stage { return passage }
        return nil
    }
}

/// How far a probe that saw no chain got: the address it reached and the TLS it negotiated, if any.
struct ProbeContact {
    let address: SocketAddress?
    let tlsVersion: TLSVersion?
}

/// How an open tunnel passed: unpinned by admission, or on a judged chain with the verdict that let
/// it through.
enum Passage {
    case unpinned(UnpinnedBasis)
    case judged(Judgement, TunnelDecision)

    var decision: TunnelDecision {
        switch self {
        case .unpinned(let basis): return .unpinned(basis)
        case .judged(_, let decision): return decision
        }
    }
}

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
