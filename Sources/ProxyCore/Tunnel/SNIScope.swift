import Foundation
import PinPolicy

/// The SNI rule of the stream check: the name a ClientHello carries must not reach another enforced
/// rule's host through this tunnel, and a pinned CONNECT to a name must carry exactly that name.
///
/// Report mode and a debug bypass are scoped to their own host: they never lend that scope to
/// another name. So a problem is overlooked only when the CONNECT's host is under report mode or
/// a bypass **and** the name the ClientHello carries is not held by an enforced rule of its own
/// (it is unpinned, or in report mode, or covered by the bypass itself). A name that is not a
/// valid host name selects no rule here but might select one on the server: never overlooked.
struct SNIScope {
    /// What is wrong with a ClientHello's server name, and what may let it through anyway.
    struct Problem {
        let detail: String
        /// nil: refused in every mode.
        let overlookableBy: BypassBasis?
    }

    let context: StreamCheck.Context

    /// The problem with `sent` (the ClientHello's server name, nil when it names none), if any.
    func problem(serverName sent: String?, at now: Date) -> Problem? {
        let target = context.authority.target
        guard let sent else {
            guard context.isPinned, case .name(let name) = target else { return nil }
            return Problem(detail: "the ClientHello names no server, the CONNECT was for \(name)", overlookableBy: context.bypassBasis(at: now))
        }
        guard case .success(let name) = HostName.normalize(sent) else {
            return Problem(detail: "the ClientHello's server name \(jsonString(sent)) is not a valid host name", overlookableBy: nil)
        }
        let sniRule = context.snapshot.policy.rule(for: Authority(target: .name(name), port: context.authority.port))
        if let sniRule, sniRule.mode != .unpinned, sniRule != context.rule {
            let detail = "the ClientHello names \(name), which the rule at line \(sniRule.line) pins, inside a tunnel to \(target)"
            return Problem(detail: detail, overlookableBy: enforces(sniRule, for: name, now) ? nil : context.bypassBasis(at: now))
        }
        // An exempt (or unpinned) tunnel must not carry a ClientHello for a name whose chain the
        // policy checks for CT: the exemption is the CONNECT host's, never lent to another name.
        if !context.isPinned, case .probe(let checked) = AdmissionGate.admitFromAnyClient(Authority(target: .name(name), port: context.authority.port),
                                                                                         policy: context.snapshot.policy, kind: .connect),
           context.snapshot.policy.ctMode(under: checked) == .require {
            return Problem(detail: "the ClientHello names \(name), whose chain ct: require checks, inside a tunnel to \(target) that is not checked", overlookableBy: nil)
        }
        if context.isPinned, case .name(let connected) = target, name != connected {
            // The same rule covers both names (a wildcard): its report mode covers both, but a
            // bypass listed for the CONNECT's host does not reach the other name.
            let lent = sniRule.map { enforces($0, for: name, now) } ?? false
            return Problem(detail: "the ClientHello names \(name), the CONNECT was for \(connected)", overlookableBy: lent ? nil : context.bypassBasis(at: now))
        }
        return nil
    }

    /// Whether `rule` refuses a mismatch for `name` now: enforced, not past an `on_expiry: report`,
    /// and `name` not under the debug bypass.
    private func enforces(_ rule: Rule, for name: String, _ now: Date) -> Bool {
        guard rule.effectiveMode(at: now) == .enforce else { return false }
        return context.snapshot.policy.debugBypass(for: .name(name), at: now, enabled: context.debugBypassEnabled) == nil
    }
}
