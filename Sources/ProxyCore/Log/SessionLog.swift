import Foundation
import Logging
import PinPolicy

/// The log lines of a session, built from what it decided. Every refusal line carries what an
/// operator needs to fix the policy or spot an attack: the target, the rule, the reason, every chain
/// certificate's pins, the expected pins, and a hint.
/// How a session ended, with what its line is made from.
enum SessionEnd {
    /// The request was not a CONNECT pinproxy accepts (400, 405, 408, 431): `request_rejected`.
    case rejected(Refusal, DecisionRecord)
    /// A CONNECT refused, with its evidence: `tunnel_refused`.
    case refused(Refusal, DecisionRecord)
    /// A tunnel (or a request before its decision) closed: `tunnel_closed`.
    case closed(CloseReason, ClosedTunnel)
    /// The stream check closed an open tunnel: `tunnel_refused` with `stage=stream`.
    case streamRefused(StreamRefusal, ClosedTunnel)
}

enum SessionLog {
    /// The decision line's level, known before the line is built: a bypass is a warning.
    static func level(of decision: TunnelDecision) -> Logger.Level {
        if case .bypassed = decision { return .warning }
        return .info
    }

    /// The end line's level, known before the line is built.
    static func level(of end: SessionEnd) -> Logger.Level {
        switch end {
        case .rejected, .refused, .streamRefused: return .warning
        case .closed(let reason, let tunnel):
            // The close's own level, raised by what left the tunnel unverified.
            return max(reason.closeCode?.entry.level ?? .info, tunnel.stream?.leftUnverified?.reason.entry.level ?? .info)
        }
    }

    /// The decision line, written when a tunnel opens: `tunnel_allowed`, `tunnel_bypassed`,
    /// `tunnel_unpinned`.
    static func decision(_ s: DecisionRecord, _ decision: TunnelDecision) -> LogRecord {
        var r: LogRecord
        switch decision {
        case .allowed(let match):
            r = LogRecord(level(of: decision), "tunnel_allowed", identity(s) + ruleFields(s) + [("verdict", .string("allowed"))])
            r["pin"] = .string(match.entry.pin.description)
            if let label = match.entry.label { r["pin_label"] = .string(label) }
            r["pin_at"] = .string(match.entry.position.rawValue)
            r["pin_position"] = .int(match.position)
            r.fields += chainFields(s.validation) + ctFields(s.evaluation)
        case .bypassed(let reason, let basis):
            r = LogRecord(level(of: decision), "tunnel_bypassed", identity(s) + ruleFields(s) + [
                ("verdict", .string("bypassed")), ("would_refuse", .bool(true)), ("reason", .string(reason.rawValue)),
                ("bypass", .string(basis.code)),
            ])
            if case .debugBypass(let until) = basis { r["bypass_until"] = .string(RFC3339.format(until)) }
            if let detail = s.evaluation?.chainFailure?.detail ?? (reason == .ctNotCompliant ? s.evaluation?.ctShortfall : nil) {
                r["detail"] = .string(detail)
            }
            r.fields += chainFields(s.validation) + expectedFields(s) + ctFields(s.evaluation)
            r["hint"] = .string(Refusal.Code.policy(reason).entry.hint(s))
        case .unpinned(let basis):
            r = LogRecord(level(of: decision), "tunnel_unpinned", identity(s) + [("verdict", .string("unpinned")), ("reason", .string(basis.rawValue))])
            if let rule = s.rule, !rule.isStandIn { r.fields += [("rule", .string(rule.name)), ("rule_line", .int(rule.line))] }
            // Not looked at: exempt, when the policy has a log list to look with.
            r.fields += s.evaluation == nil ? (s.asked?.snapshot.ct == nil ? [] : [("ct", .string("exempt"))]) : ctFields(s.evaluation)
        }
        return r
    }

    /// The one line a session ends with.
    static func end(_ end: SessionEnd) -> LogRecord {
        switch end {
        case .rejected(let refusal, let s):
            var r = LogRecord(.warning, "request_rejected", [
                ("conn", .int(s.conn)), ("client", .string(s.client.description)), ("status", .int(refusal.status)),
                ("reason", .string(refusal.reason)), ("detail", .string(refusal.detail)),
            ])
            // A client configured with the wrong proxy scheme: say how to fix it.
            if refusal.code == .network(.tlsToProxy) || refusal.code == .network(.socksToProxy) { r["hint"] = .string(refusal.code.entry.hint(s)) }
            return r
        case .refused(let refusal, let s):
            var r = LogRecord(.warning, "tunnel_refused", identity(s) + ruleFields(s) + [
                ("verdict", .string("refused")), ("reason", .string(refusal.reason)), ("status", .int(refusal.status)),
                ("detail", .string(refusal.detail)),
            ])
            if let pin = s.evaluation?.denylisted { r["denylisted_pin"] = .string(pin.description) }
            r.fields += chainFields(s.validation) + expectedFields(s) + ctFields(s.evaluation)
            r["hint"] = .string(refusal.code.entry.hint(s))
            return r
        case .closed(let reason, let closed):
            let s = closed.record
            var r = LogRecord(level(of: end), "tunnel_closed", identity(s))
            r["verdict"] = .string(closed.passage?.decision.name ?? "none")
            r.fields += [
                ("bytes_up", .int(closed.bytesUp)), ("bytes_down", .int(closed.bytesDown)),
                ("duration_ms", .int(Int(closed.duration.seconds * 1000))),
            ]
            if let passage = closed.passage { r["verify"] = .string(verification(passage, closed.stream).rawValue) }
            if closed.passage != nil, let relay = closed.relay { r["relay"] = .string(relay.rawValue) }
            tunnelVersion(closed, into: &r)
            r["close_reason"] = .string(closed.passage != nil ? reason.code : "\(reason.code)_before_decision")
            if case .relay(.clientLeft(let stage)) = reason { r["stage"] = .string(stage.rawValue) }
            if case .policyReload(let cause) = reason {
                r["reason"] = .string(cause.code)
                r["detail"] = .string(cause.detail)
            } else if let unverified = closed.stream?.leftUnverified {
                r["reason"] = .string(unverified.reason.rawValue)
                r["detail"] = .string(unverified.detail)
            }
            return r
        case .streamRefused(let refusal, let closed):
            // The evidence is the chain the stream judged, when it judged one, else the probe's.
            let s = closed.record
            let judged = closed.stream?.judged
            let (validation, evaluation) = (judged?.validation ?? s.validation, judged?.evaluation ?? s.evaluation)
            var r = LogRecord(.warning, "tunnel_refused", identity(s) + ruleFields(s) + [
                ("verdict", .string("refused")), ("reason", .string(refusal.reason.code)), ("stage", .string(refusal.stage.rawValue)),
                ("detail", .string(refusal.detail)), ("bytes_up", .int(closed.bytesUp)), ("bytes_down", .int(closed.bytesDown)),
                ("duration_ms", .int(Int(closed.duration.seconds * 1000))),
            ])
            tunnelVersion(closed, into: &r)
            if let pin = evaluation?.denylisted { r["denylisted_pin"] = .string(pin.description) }
            r.fields += chainFields(validation) + expectedFields(s) + ctFields(evaluation)
            r["hint"] = .string(refusal.reason.hint(s))
            return r
        }
    }

    /// A check saw what only an interceptor shows (`InterceptionCatch`): an error line with the
    /// chain it was shown and the probe's, and whether the host:port is now quarantined.
    static func interceptionSuspected(_ caught: InterceptionCatch, judged: StreamSummary.JudgedChain?, record: DecisionRecord,
                                      quarantine: Quarantine.Entered) -> LogRecord {
        let s = record
        var r = LogRecord(.error, "interception_suspected", identity(s) + ruleFields(s))
        r.fields += [("stage", .string(caught.stage.rawValue)), ("reason", .string(caught.reason.code)), ("detail", .string(caught.detail))]
        switch quarantine {
        case .started(let until), .extended(let until): r["quarantined_until"] = .string(RFC3339.format(until))
        case .off: break
        }
        let probe = chainFields(s.validation)
        if let judged, caught.chain != nil { r.fields += chainFields(judged.validation) }
        if let probeChain = probe.first(where: { $0.0 == "chain" })?.1 { r["probe_chain"] = probeChain }
        r["hint"] = .string("two looks at this server with the same ClientHello were shown different chains, each proved by its key, one passing the policy and one failing it: a genuine server answers the same hello the same way, so someone on the path is choosing which connections to intercept. Tunnels pinproxy cannot verify by themselves to this host:port are refused while it is quarantined")
        return r
    }

    /// What a confirming look (`ConfirmingLook`) concluded when it found no interception: the
    /// server proved the same failing chain again for the client's hello (`same_chain`, a
    /// warning: the client's hello selects that certificate, or the server's key changed), or
    /// showed no proved chain (`undecided`).
    static func confirmingLook(_ failed: SameHelloLooks.FailedLook, shown again: StreamSummary.JudgedChain?, undecided why: String?,
                               record s: DecisionRecord) -> LogRecord {
        var r = LogRecord(again == nil ? .info : .warning, "confirming_look", identity(s) + ruleFields(s))
        r.fields += [("stage", .string(failed.stage.rawValue)), ("reason", .string(failed.reason.code))]
        if let again {
            r["outcome"] = .string(LookOutcome.sameChain.rawValue)
            r["detail"] = .string("\(failed.detail); a second copy of the client's ClientHello, on a fresh connection, was shown that chain again, proved by the server: the server answers this hello so")
            r.fields += chainFields(again.validation) + expectedFields(s)
            r["hint"] = .string("no incident: the same hello got the same chain twice. Either the server gives this client's ClientHello another certificate than pinproxy's probe (dual ECDSA and RSA certificates and the client's signature algorithms, another virtual host's name, an ALPN such as acme-tls/1) or changed its key, or something on the path intercepts every hello of this shape; either way every such tunnel is refused. If the chain is the server's own, pin its key too or change the client's settings; if it is not, investigate the path")
        } else {
            r["outcome"] = .string(LookOutcome.undecided.rawValue)
            r["detail"] = .string("\(failed.detail); a second copy of the client's ClientHello showed no proved chain: \(why ?? "")")
        }
        return r
    }

    /// A host:port's quarantine ended (its time ran out, or a reload changed its rule).
    static func quarantineLifted(_ key: Quarantine.Key, entry: Quarantine.Entry, because why: Quarantine.Lift) -> LogRecord {
        var r = LogRecord(.info, "quarantine_lifted", [("host", .string(key.target.description)), ("port", .int(Int(key.port)))])
        r.fields += [("since", .string(RFC3339.format(entry.since))), ("reason", .string(why.rawValue))]
        return r
    }

    /// A stream-check refusal that report mode or a debug bypass let through.
    static func overlooked(_ overlooked: StreamSummary.Overlooked, record s: DecisionRecord) -> LogRecord {
        var r = LogRecord(.warning, "tunnel_warning", identity(s) + ruleFields(s))
        r.fields += [("reason", .string(overlooked.reason.code)), ("stage", .string(overlooked.stage.rawValue)), ("would_refuse", .bool(true)),
                     ("bypass", .string(overlooked.basis.code)), ("detail", .string(overlooked.detail))]
        return r
    }

    /// The tunnel's server negotiated another TLS version than the probe's. A warning only when it
    /// means something: a server that answered the probe with TLS 1.3 answered a client that offered
    /// TLS 1.3 with an older version (a downgrade, or another server). Otherwise (a client that does
    /// not offer 1.3, such as `curl --tls-max 1.2`) it is what the client asked for: info.
    static func versionChanged(to version: TLSVersion, from probe: TLSVersion, record s: DecisionRecord, clientOfferedTLS13: Bool) -> LogRecord {
        let downgrade = probe == .tls13 && clientOfferedTLS13 && version != .tls13
        let reason = TunnelReason.tlsVersionChanged
        var r = LogRecord(downgrade ? .warning : reason.entry.level ?? .info, "tunnel_warning", identity(s) + ruleFields(s))
        r["tls"] = .string(version.description)
        let detail = downgrade
            ? "the client offered TLS 1.3 and the server answered the probe with TLS 1.3, but the tunnel with \(version): a downgrade or a different server"
            : "the tunnel negotiated \(version), the probe \(probe): \(clientOfferedTLS13 ? "the server chose it" : "the client did not offer TLS 1.3")"
        r.fields += [("probe_tls", .string(probe.description)), ("reason", .string(reason.rawValue)), ("stage", .string("stream")),
                     ("detail", .string(detail))]
        return r
    }

    private static func verification(_ passage: Passage, _ stream: StreamSummary?) -> Verification {
        switch passage {
        case .pinned(_, _, .bypassed): return .bypass
        case .pinned: return stream?.verification ?? .probeOnly
        case .unpinned: return stream?.verification ?? .unpinned
        }
    }

    /// The TLS version the tunnel itself negotiated, and the probe's when they differ.
    private static func tunnelVersion(_ closed: ClosedTunnel, into r: inout LogRecord) {
        guard let version = closed.stream?.negotiated else { return }
        r["tls"] = .string(version.description)
        if let probe = closed.record.tlsVersion, probe != version { r["probe_tls"] = .string(probe.description) }
    }

    static func warning(_ warning: RuntimeWarning, record s: DecisionRecord) -> LogRecord {
        var r = LogRecord(warning.level, "tunnel_warning", identity(s) + ruleFields(s))
        r["reason"] = .string(warning.code)
        r["detail"] = .string(warning.detail(onExpiry: s.rule?.onExpiry))
        if case .noRealBackup = warning { r["detail"] = .string(warning.detail(onExpiry: nil) + " (said once a day per rule)") }
        if let hint = warning.hint(s) { r["hint"] = .string(hint) }
        return r
    }

    // MARK: field groups

    private static func identity(_ s: DecisionRecord) -> [(String, LogValue)] {
        var f: [(String, LogValue)] = [("conn", .int(s.conn)), ("client", .string(s.client.description))]
        f.reserveCapacity(10)
        if let original = s.originalDestination {  // transparent mode (Transparent/)
            f.append(("via", .string("transparent")))
            f.append(("original_dst", .string(original.description)))
        }
        // Each of the record's accessors copies its stage's payload: each is asked once.
        let judgement = s.judgement, address = s.address
        if let authority = s.authority {
            f.append(("host", .string(authority.target.description)))
            f.append(("port", .int(Int(authority.port))))
            if case .name(let name) = authority.target, judgement != nil || address != nil { f.append(("sni", .string(name))) }
        }
        if let address { f.append(("address", .string(address.ip.description))) }
        var version = judgement?.tlsVersion
        if case .probeFailed(_, _, let contact) = s.stage { version = contact.tlsVersion }
        if let version { f.append(("tls", .string(version.description))) }
        if let judgement {
            f.append(("key_proof", .string(judgement.keyProof.rawValue)))
            f.append(("cached", .bool(judgement.cached)))
        }
        return f
    }

    /// `ct` (compliant, not_compliant, report, exempt) and the SCTs that counted, when the policy
    /// has a log list.
    static func ctFields(_ evaluation: Evaluation?) -> [(String, LogValue)] {
        guard let evaluation, let status = evaluation.ct else { return [] }
        guard case .judged(let finding) = status else { return [("ct", .string("exempt"))] }
        let word: String
        if finding.isCompliant {
            word = "compliant"
        } else if case .refused = evaluation.verdict {
            word = "not_compliant"
        } else {
            word = finding.enforced == .report ? "report" : "not_compliant"  // a debug bypass let a required one through
        }
        var fields: [(String, LogValue)] = [("ct", .string(word))]
        if !finding.counted.isEmpty {
            let scts = finding.counted.map { "\($0.log.description) (\($0.operatorName)) \(RFC3339.format($0.sct.timestamp)) \($0.sct.delivery.rawValue)" }
            fields.append(("ct_scts", .string(scts.joined(separator: "; "))))
        }
        if !finding.isCompliant, let shortfall = evaluation.ctShortfall { fields.append(("ct_detail", .string(shortfall))) }
        return fields
    }

    private static func ruleFields(_ s: DecisionRecord) -> [(String, LogValue)] {
        guard let rule = s.rule, !rule.isStandIn else { return [] }
        return [("rule", .string(rule.name)), ("rule_line", .int(rule.line)), ("mode", .string(rule.mode.rawValue)),
                ("trust", .string(rule.trust.description))]
    }

    /// The verified chain when validation succeeded, else what the server presented.
    private static func chainFields(_ validation: ChainValidation?) -> [(String, LogValue)] {
        let certificates: [(CertificateFacts, Bool)]
        switch validation {
        case .verified(let chain)?: certificates = chain.certificates.map { ($0.facts, $0.isAnchor) }
        case .failed(_, let presented)?: certificates = presented.map { ($0, false) }
        case nil: return []
        }
        guard let leaf = certificates.first?.0 else { return [] }
        let chain = LogValue.objects(certificates.enumerated().map { index, item in
            [("position", .int(index)), ("spki", .string(item.0.spki.description)), ("cert", .string(item.0.certificate.description)),
             ("subject", .string(item.0.subject)), ("not_after", .string(RFC3339.format(item.0.notAfter))), ("anchor", .bool(item.1))]
        })
        return [("leaf_subject", .string(leaf.subject)), ("leaf_issuer", .string(leaf.issuer)),
                ("leaf_not_after", .string(RFC3339.format(leaf.notAfter))), ("chain_verified", .bool(validation.isVerified)),
                ("chain", chain)]
    }

    private static func expectedFields(_ s: DecisionRecord) -> [(String, LogValue)] {
        guard let rule = s.rule, !rule.pins.isEmpty else { return [] }
        return [("expected", .objects(rule.pins.map { entry in
            var object: [(String, LogValue)] = [("pin", .string(entry.pin.description)), ("at", .string(entry.position.rawValue))]
            if let label = entry.label { object.append(("label", .string(label))) }
            return object
        }))]
    }
}

extension Logger {
    /// A tunnel's decision line (`tunnel_allowed`, `tunnel_bypassed`, `tunnel_unpinned`), built only
    /// when its level is written (at `warning` the lines of allowed and unpinned tunnels cost
    /// nothing), with the worker whose loop carries the tunnel (its close line comes from the same one).
    func emitDecision(_ record: DecisionRecord, _ decision: TunnelDecision, worker: Int) {
        guard SessionLog.level(of: decision) >= logLevel else { return }
        var line = SessionLog.decision(record, decision)
        line["worker"] = .int(worker)
        emit(line)
    }

    /// A session's end line, built only when its level is written.
    func emitEnd(_ end: SessionEnd) {
        guard SessionLog.level(of: end) >= logLevel else { return }
        emit(SessionLog.end(end))
    }
}

/// A path as one shell word: as it is when it is plain, else in single quotes.
public func shellWord(_ text: String) -> String {
    let plain = !text.isEmpty && text.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "/._-+:@%,=".unicodeScalars.contains($0) }
    return plain ? text : "'" + text.replacingOccurrences(of: "'", with: "'\\''") + "'"
}

extension Optional where Wrapped == ChainValidation {
    var isVerified: Bool {
        if case .verified? = self { return true }
        return false
    }
}

extension Target {
    /// How a rule for exactly this target starts: `host: api.example.com`, `ip: 192.0.2.7`.
    var ruleKey: String {
        switch self {
        case .name(let name): return "host: \(name)"
        case .ip(let address): return "ip: \(address)"
        }
    }
}
