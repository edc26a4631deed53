import PinPolicy

/// What `stats`, `/metrics` and `STATUS=` report; counted from the decisions and ends, never inside
/// logging. The supervisor keeps one set (accepts, reloads) and each worker one (its sessions);
/// `stats` adds them up with `+`.
struct Counters: Equatable {
    var accepted = 0, rejected = 0, refused = 0, allowed = 0, bypassed = 0, unpinned = 0, closed = 0
    var bytesUp = 0, bytesDown = 0
    /// Open tunnels a reload's policy refused.
    var closedByReload = 0
    var liveSessionObjects = 0
    /// Connections closed before their first request head to make room (`SilentConnections`).
    var silentReaped = 0
    /// Connections that ended without sending a byte: they left, or stayed silent for
    /// `header_timeout` (no line of their own).
    var silentClosed = 0
    /// `refused` by reason, for the metrics.
    var refusedByReason: [RefusedReason: Int] = [:]
    var reloadsSucceeded = 0, reloadsFailed = 0
    /// Checks that caught an interception (`interception_suspected`, also those in one quarantine).
    var interceptionsSuspected = 0
    /// TLS 1.3 resumptions with no key-log line, let through unverified (`verify=resumption-unverified`).
    var unverifiedResumptions = 0
    /// Pinned TLS 1.3 tunnels whose mirror could not be made (`verify=probe-only reason=mirror_unavailable`).
    var mirrorsUnavailable = 0
    /// Pinned tunnels closed because their client sent no ClientHello after the `200`: within
    /// `client_hello_timeout`, or before a newer connection needed the room (`close_reason=reclaimed`).
    var withoutClientHello = 0

    mutating func count(_ decision: TunnelDecision) {
        switch decision {
        case .allowed: allowed += 1
        case .bypassed: bypassed += 1
        case .unpinned: unpinned += 1
        }
    }

    mutating func count(_ end: SessionEnd) {
        switch end {
        case .rejected: rejected += 1
        case .refused(let refusal, _):
            countRefusal(.decision(refusal.code))
        case .streamRefused(let refusal, let tunnel):
            countRefusal(.stream(refusal.reason))
            bytesUp += tunnel.bytesUp
            bytesDown += tunnel.bytesDown
        case .closed(let reason, let tunnel):
            closed += 1
            // And where the reasons' entries (`ReasonTable`) count them.
            if let code = reason.closeCode { count(code.entry) }
            if let unverified = tunnel.stream?.leftUnverified { count(unverified.reason.entry) }
            bytesUp += tunnel.bytesUp
            bytesDown += tunnel.bytesDown
        }
    }

    /// A reason that is no refusal, in each counter its entry names (`times`: a worker's summary of
    /// many, such as the silent connections it reaped).
    mutating func count(_ entry: OutcomeEntry, times: Int = 1) {
        for counter in entry.counters { self[keyPath: counter] += times }
    }

    /// One refusal, with its reason for `pinproxy_refusals_total`.
    mutating func countRefusal(_ reason: RefusedReason) {
        refused += 1
        refusedByReason[reason, default: 0] += 1
    }

    /// Two sets of counters added up (the supervisor's and each worker's, for `stats`).
    static func + (a: Self, b: Self) -> Self {
        var sum = a
        for field in summed { sum[keyPath: field] += b[keyPath: field] }
        sum.refusedByReason.merge(b.refusedByReason, uniquingKeysWith: +)
        return sum
    }

    /// Every count `+` adds (`CountersTests` checks that none is left out).
    private static var summed: [WritableKeyPath<Counters, Int>] {
        [\.accepted, \.rejected, \.refused, \.allowed, \.bypassed, \.unpinned, \.closed, \.bytesUp, \.bytesDown,
         \.closedByReload, \.liveSessionObjects, \.silentReaped, \.silentClosed, \.reloadsSucceeded, \.reloadsFailed,
         \.interceptionsSuspected, \.unverifiedResumptions, \.mirrorsUnavailable, \.withoutClientHello]
    }
}
