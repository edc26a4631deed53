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
        /// A CONNECT refused before admission let it through (stopping, the admission gate).
        case asked(AskedConnect)
        /// Admission let it through; nothing reached yet (or the tunnel cap, DNS, a denied address,
        /// a failed connect refused it).
        case admitted(AskedConnect, AdmissionBasis)
        /// A pinned CONNECT's probe saw no chain to judge: where it got to.
        case probeFailed(AskedConnect, Rule, ProbeContact)
        /// A pinned CONNECT's probe chain, judged under its rule (refused, or let through and
        /// waiting for its tunnel).
        case judged(AskedConnect, Rule, Judgement)
        /// The tunnel is open: how it passed, and the address it reached.
        case opened(AskedConnect, Passage, address: SocketAddress)
    }

    let conn: Int
    let client: SocketAddress
    let stage: Stage
    /// Transparent mode: where the client was going before the redirect (also known before a
    /// ClientHello was read); nil for a CONNECT.
    private let original: SocketAddress?

    init(conn: Int, client: SocketAddress, _ stage: Stage = .requested, original: SocketAddress? = nil) {
        self.conn = conn
        self.client = client
        self.stage = stage
        self.original = original
    }

    /// Transparent mode's original destination (`via=transparent original_dst=…`).
    var originalDestination: SocketAddress? { original ?? asked?.original }

    // MARK: what the stages hold, for the lines

    /// What the CONNECT asked for and the snapshot it is judged by, once one was read.
    var asked: AskedConnect? {
        switch stage {
        case .requested: return nil
        case .asked(let a), .admitted(let a, _), .probeFailed(let a, _, _), .judged(let a, _, _), .opened(let a, _, _): return a
        }
    }

    var authority: Authority? { asked?.authority }

    /// The policy file the CONNECT was judged under, for hints that name it (`pin … --config PATH`).
    var policySource: String? { asked?.snapshot.policy.source }

    /// The rule admission found (a pinning rule, or an `unpinned` one).
    var rule: Rule? {
        switch stage {
        case .requested, .asked: return nil
        case .admitted(_, let basis): return basis.rule
        case .probeFailed(_, let rule, _), .judged(_, let rule, _): return rule
        case .opened(_, let passage, _): return passage.basis.rule
        }
    }

    /// The probe's judgement, when a chain was judged.
    var judgement: Judgement? {
        switch stage {
        case .judged(_, _, let judgement), .opened(_, .pinned(_, let judgement, _), _): return judgement
        case .requested, .asked, .admitted, .probeFailed, .opened(_, .unpinned, _): return nil
        }
    }

    /// The address the probe reached (or the tunnel, once open).
    var address: SocketAddress? {
        switch stage {
        case .opened(_, _, let address): return address
        case .probeFailed(_, _, let contact): return contact.address
        case .judged(_, _, let judgement): return judgement.address
        case .requested, .asked, .admitted: return nil
        }
    }

    /// The TLS version the probe negotiated.
    var tlsVersion: TLSVersion? {
        if case .probeFailed(_, _, let contact) = stage { return contact.tlsVersion }
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
