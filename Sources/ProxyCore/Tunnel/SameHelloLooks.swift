import Foundation
import PinPolicy
import TLSInspection

/// What the looks at a server that carried one ClientHello showed — the client's own connection
/// (a TLS 1.2 Certificate in clear, a TLS 1.3 flight opened with its key-log line), each mirror of
/// it, a confirming mirror — counting only chains the server proved on that look.
///
/// Why only these: pinproxy's probe speaks its own hello, and a client may legitimately steer a
/// genuine server to another certificate with its own (signature algorithms, suites, ALPN, SNI
/// spelling, a vhost). A genuine server answers the *same* hello the same way; a guessing
/// interceptor does not. So a passing chain beside a failing one for the same hello is an
/// incident nobody can manufacture; a failing chain alone is only this tunnel's refusal, until a
/// confirming look of the same hello shows whether the server itself answers it so.
struct SameHelloLooks {
    /// A look whose proved chain fails the rule.
    struct FailedLook {
        let stage: StreamStage
        let reason: StreamReason
        let detail: String
        let judged: StreamSummary.JudgedChain
    }

    /// What one more look adds.
    enum Finding {
        /// Nothing to act on.
        case none
        /// A failing chain and a passing one, different, for the same hello: an interception.
        case disagreement(FailedLook, passed: [[UInt8]])
        /// The first failing chain, with no passing look beside it yet: worth a confirming look.
        case unconfirmed(FailedLook)
    }

    private var passed: [[UInt8]]?
    private var failed: FailedLook?

    mutating func passed(_ chain: [[UInt8]]) -> Finding {
        guard passed == nil else { return .none }
        passed = chain
        if let failed, failed.judged.der != chain { return .disagreement(failed, passed: chain) }
        return .none
    }

    mutating func failed(_ look: FailedLook) -> Finding {
        guard failed == nil else { return .none }
        failed = look
        if let passed, passed != look.judged.der { return .disagreement(look, passed: passed) }
        return .unconfirmed(look)
    }
}

/// A chain judged the way the tunnel's check judges one, away from the tunnel: what a confirming
/// look needs after the tunnel has closed.
struct LookJudge {
    let snapshot: PolicySnapshot
    let rule: Rule
    let target: Target
    let debugBypassEnabled: Bool

    /// Nil when a certificate does not parse.
    func judge(_ ders: [[UInt8]], delivered: DeliveredSCTs, at now: Date) -> StreamSummary.JudgedChain? {
        guard let presented = Certificate.chain(fromDER: ders) else { return nil }
        let (validation, evaluation) = snapshot.judge(presented, target: target, rule: rule, at: now,
                                                      debugBypassEnabled: debugBypassEnabled, delivered: delivered)
        return StreamSummary.JudgedChain(der: ders, validation: validation, evaluation: evaluation, delivered: delivered)
    }
}

extension StreamSummary.JudgedChain {
    /// The rule lets this chain through on its own (no bypass, no report mode).
    var passes: Bool {
        switch evaluation.verdict {
        case .allowed, .unpinned: return true
        case .refused, .bypassed: return false
        }
    }
}
