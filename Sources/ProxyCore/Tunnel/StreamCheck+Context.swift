import Foundation
import PinPolicy

extension StreamCheck {
    /// What a tunnel's stream check judges by: the CONNECT, the policy in force, and for a pinned
    /// tunnel the rule and the probe's judgement.
    struct Context {
        /// Whether the CONNECT was judged on a probe's chain.
        enum Pinning {
            /// `probe` is the probe's judgement by `rule` (nil once a reload judges afresh). Boxed:
            /// an unpinned tunnel's check does not carry a rule's room.
            indirect case pinned(rule: Rule, probe: Judgement?)
            /// No chain was judged: the check only keeps the SNI from reaching a pinned name.
            case unpinned
        }

        let authority: Authority
        private(set) var snapshot: PolicySnapshot
        private(set) var pinning: Pinning
        let debugBypassEnabled: Bool
        /// The client's key log, when `proxy.keylog` is set (TLS 1.3 tunnels are then verified in
        /// the stream too).
        var keyLog: KeyLogSource? = nil
        /// The mirror connections opened with the tunnel's (a pinned tunnel, `mirror_checks` > 0),
        /// until a ClientHello offering TLS 1.3 takes them; closed otherwise.
        var mirrors: MirrorSetup? = nil
        /// `mirror_checks: 0`: no mirror was meant to be made.
        var mirrorsOff = false
        /// The process's quarantine book.
        var quarantine: Quarantine? = nil
        /// The randoms of the hellos earlier tunnels carried, across the workers (nil: not looked at).
        var seenHellos: SeenHellos? = nil
        /// The loop and `probe_timeout`, for the deadline on the server's first flight (nil: none,
        /// for a check driven without a loop).
        var deadline: Deadline? = nil

        /// Takes the mirror connections (once).
        mutating func takeMirrors() -> MirrorSetup? {
            defer { mirrors = nil }
            return mirrors
        }

        /// Closes mirror connections no check took.
        mutating func closeMirrors() {
            for connection in mirrors?.connections ?? [] { connection.close() }
            mirrors = nil
        }

        var isPinned: Bool {
            if case .pinned = pinning { return true }
            return false
        }

        /// The rule a pinned tunnel is judged by.
        var rule: Rule? {
            if case .pinned(let rule, _) = pinning { return rule }
            return nil
        }

        /// A reload the open tunnel survived: what is still to judge is judged under the new policy,
        /// no longer by the probe's judgement. A policy that no longer checks the host's chain (no
        /// pins, no CT) left the tunnel standing unchecked, so the check goes on as for an unpinned tunnel.
        mutating func policyChanged(to snapshot: PolicySnapshot) {
            self.snapshot = snapshot
            guard isPinned else { return }
            if case .probe(let rule) = AdmissionGate.admitFromAnyClient(authority, policy: snapshot.policy, kind: .connect) {
                pinning = .pinned(rule: rule, probe: nil)
            } else {
                pinning = .unpinned
                closeMirrors()  // nothing left for them to check
            }
        }

        /// What lets a would-refuse of this tunnel through now: an active debug bypass for its
        /// target, or report mode on its rule. Nil for an unpinned tunnel.
        func bypassBasis(at now: Date) -> BypassBasis? {
            guard let rule else { return nil }
            if let bypass = snapshot.policy.debugBypass(for: authority.target, at: now, enabled: debugBypassEnabled) {
                return .debugBypass(until: bypass.until)
            }
            return rule.mode == .report ? .reportMode : nil
        }
    }

    /// What the mirror checks of one tunnel need: their connections, the loop, their deadline.
    struct MirrorSetup {
        let connections: [MirrorConnection]
        let loop: EventLoop
        /// How long a mirror waits for the server's flight (`probe_timeout`).
        let timeout: Double
    }
}
