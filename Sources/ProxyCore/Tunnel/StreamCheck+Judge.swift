import Foundation
import PinPolicy
import TLSInspection

// Judging what the flights showed: a chain, a look that disagrees with another, a refusal or a
// would-refuse let through.
extension StreamCheck {
    /// The chain the client is about to receive, judged like the probe's: nil when it passes (or is
    /// let through), else the refusal.
    func judge(_ ders: [[UInt8]], _ now: Date, verifying verification: Verification = .probeAndStream,
               stage: StreamStage = .stream, delivered: DeliveredSCTs = .none) -> Inspection? {
        // A reload that no longer pins the host left nothing to judge by.
        guard case .pinned(let rule, let probe) = context.pinning else { return nil }
        let validation: ChainValidation, evaluation: Evaluation
        var ders = ders
        var isProbes = false
        if let probe, probe.presentedDER == ders {
            // Byte for byte the chain the probe saw, judged under this same snapshot and rule; the
            // probe's copy is kept (shared with the verification cache), the one just read is dropped.
            (validation, evaluation) = (probe.validation, probe.evaluation)
            ders = probe.presentedDER
            isProbes = true
        } else {
            guard let presented = Certificate.chain(fromDER: ders) else {
                return refuse(.malformedTLS, "a certificate in the server's Certificate message does not parse", now, stage: stage)
            }
            (validation, evaluation) = context.snapshot.judge(presented, target: context.authority.target, rule: rule, at: now,
                                                              debugBypassEnabled: context.debugBypassEnabled, delivered: delivered)
        }
        let judged = StreamSummary.JudgedChain(der: ders, validation: validation, evaluation: evaluation, delivered: delivered, isProbes: isProbes)
        // The tunnel's own chain (stream, key log) is what its lines show; a mirror's, until one
        // is judged, or when it is the refusal's evidence.
        let refused: Bool
        if case .refused = evaluation.verdict { refused = true } else { refused = false }
        if stage == .stream || summary.judged == nil || (refused && summary.verifiedBy != .probeAndKeylog) { summary.judged = judged }
        // What failed, in words: the chain's validation, CT's shortfall when CT is the reason (a
        // chain may fail both its pins and CT; the pins' refusal is named first), else the reason.
        func failing(_ reason: RefusalReason) -> String {
            let why = evaluation.chainFailure?.detail ?? (reason == .ctNotCompliant ? evaluation.ctShortfall : nil) ?? reason.rawValue
            return "the chain the server sent \(stage == .mirror ? "on the mirror check" : "in the tunnel") fails the rule: \(why)"
        }
        switch evaluation.verdict {
        case .refused(let reason):
            let detail = failing(reason)
            var refusal = StreamRefusal(reason: .policy(reason), detail: detail, stage: stage)
            refusal.alertClient = true
            act(on: looks.sameHello.failed(SameHelloLooks.FailedLook(stage: stage, reason: .policy(reason), detail: detail, judged: judged)))
            return .refuse(refusal)
        case .bypassed(let reason, let basis):
            overlook(StreamSummary.Overlooked(reason: .policy(reason), detail: failing(reason), basis: basis, stage: stage))
        case .allowed, .unpinned:
            act(on: looks.sameHello.passed(ders))
            if stage == .stream { summary.verifiedBy = verification }  // a mirror's word counts once every mirror has spoken
        }
        return nil
    }

    /// What a look with this tunnel's hello adds: an incident when it disagrees with another such
    /// look, a confirming look when it is the first to fail.
    private func act(on finding: SameHelloLooks.Finding) {
        switch finding {
        case .none:
            return
        case .disagreement(let failed, let passed):
            looks.awaitingConfirmation = nil
            let detail = "\(failed.detail), while another look with the same ClientHello was shown a chain that passes (leaf \(Self.leafPin(passed)))"
            notify?(.caught(InterceptionCatch(stage: failed.stage, reason: failed.reason, detail: detail, chain: failed.judged.der), judged: failed.judged))
        case .unconfirmed(let failed):
            guard case .pinned(let rule, _) = context.pinning, let hello = madeReading?.hello else { return }
            let judge = LookJudge(snapshot: context.snapshot, rule: rule, target: context.authority.target, debugBypassEnabled: context.debugBypassEnabled)
            looks.awaitingConfirmation = Confirmation(failed: failed, hello: hello.hello, records: hello.records, judge: judge)
            confirmWhenSettled()
        }
    }

    /// Sends the awaiting confirmation once no other look with the same hello is under way.
    func confirmWhenSettled() {
        // A mirror counts as under way until its finding is noted (it is told a loop turn after
        // it decides).
        if let checks = phase.tls13Checks, checks.mirrors.contains(where: { $0.finding == nil }) || checks.keyLog?.holding == true {
            return
        }
        sendAwaitingConfirmation()
    }

    /// Sends the awaiting confirmation now: also when the tunnel is about to be refused, whose end
    /// stops the looks still under way (they will not speak), and after which the session no
    /// longer has the tunnel to start it from.
    func sendAwaitingConfirmation() {
        guard let confirmation = madeLooks?.awaitingConfirmation else { return }
        madeLooks?.awaitingConfirmation = nil
        notify?(.unconfirmed(confirmation))
    }

    /// The SPKI pin of a chain's leaf, for a line's detail.
    static func leafPin(_ chain: [[UInt8]]) -> String {
        guard let leaf = chain.first, let certificate = Certificate.chain(fromDER: [leaf])?.first else { return "unreadable" }
        return certificate.facts.spki.description
    }

    /// A refusal, let through by report mode or an active debug bypass (then noted) when its reason
    /// may be (`StreamReason.mayBeLetThrough`); an SNI problem decides that with `SNIScope`.
    func refuse(_ reason: StreamReason, _ detail: String, _ now: Date, stage: StreamStage = .stream) -> Inspection {
        refuse(reason, detail, overlookableBy: reason.mayBeLetThrough ? context.bypassBasis(at: now) : nil, stage: stage)
    }

    func refuse(_ reason: StreamReason, _ detail: String, overlookableBy basis: BypassBasis?, stage: StreamStage = .stream) -> Inspection {
        guard context.isPinned, let basis else {
            return .refuse(StreamRefusal(reason: reason, detail: detail, stage: stage))
        }
        overlook(StreamSummary.Overlooked(reason: reason, detail: detail, basis: basis, stage: stage))
        return .done
    }

    func overlook(_ note: StreamSummary.Overlooked) {
        summary.overlooked = note
        notify?(.overlooked(note))
    }
}
