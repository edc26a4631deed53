import Foundation
import PinPolicy
import TLSInspection

/// How a tunnel was verified: the `verify` key of its close line.
enum Verification: String, Sendable {
    /// The probe's chain, and the chain the client itself received (TLS ≤ 1.2), or a resumption of
    /// a session whose chain was so verified.
    case probeAndStream = "probe+stream"
    /// The probe's chain, and (TLS 1.3) the chain the client received, read with the client's own
    /// key-log line and signed by its leaf's key in this very handshake.
    case probeAndKeylog = "probe+keylog"
    /// The probe's chain only: TLS 1.3 encrypts the client's.
    case probeOnly = "probe-only"
    /// A debug bypass or report mode let it through.
    case bypass
    /// No rule pins the host.
    case unpinned
}

/// Why the stream check closes a tunnel.
enum StreamReason: Hashable, Sendable {
    /// The client's first bytes are not a TLS ClientHello (a pinned tunnel carries only TLS).
    case notTLS
    /// The ClientHello names another host than the CONNECT, or one another enforced rule pins.
    case sniMismatch
    /// A TLS 1.2 resumption of a session pinproxy never saw verified.
    case unverifiedResumption
    /// The TLS the peers exchanged does not parse (or exceeds the reader's limits).
    case malformedTLS
    /// The chain the server sent in the tunnel fails the rule, as a probe's would.
    case policy(RefusalReason)
    /// TLS 1.3: the client's key-log line does not open the server's flight, conflicts with another,
    /// or opens a flight its leaf's key did not sign.
    case keylogInvalid
    /// TLS 1.3 under `require_keylog`: no key-log line for the handshake within `wait`.
    case keylogMissing

    var code: String {
        switch self {
        case .notTLS: return "not_tls"
        case .sniMismatch: return "sni_mismatch"
        case .unverifiedResumption: return "unverified_resumption"
        case .malformedTLS: return "tls_protocol_error"
        case .policy(let reason): return reason.rawValue
        case .keylogInvalid: return "keylog_invalid"
        case .keylogMissing: return "keylog_missing"
        }
    }
}

/// A stream refusal with its evidence.
struct StreamRefusal: Equatable, Sendable {
    let reason: StreamReason
    let detail: String
    /// Send the client a fatal `bad_certificate` alert before closing (a judged chain).
    var alertClient = false
}

/// What the relay's hook does with the bytes one side sent.
enum Inspection: Equatable {
    /// Keep them, and what follows, until there is a decision.
    case hold
    /// Pass on the first `count` bytes of what is held (a TLS 1.3 ServerHello), keep holding the rest.
    case pass(count: Int)
    /// Pass on everything held, and keep showing new bytes.
    case release
    /// Pass on everything held; this side needs no more looking at.
    case done
    /// Close both sides.
    case refuse(StreamRefusal)
}

/// The stream check (DESIGN step 7): reads the first flights of a tunnel as they cross the relay and
/// checks the connection the client really uses — not the probe's.
///
/// - Every tunnel: an SNI that selects another enforced rule than the CONNECT's is closed.
/// - Pinned tunnels: the client's first bytes must be a ClientHello whose SNI is the CONNECT host
///   (none only for IP literals); on TLS ≤ 1.2 the server's bytes are held until its Certificate is
///   complete and that chain is judged exactly as the probe's was (same snapshot, rule, trust,
///   hostname); a resumption (no Certificate) must resume a session seen verified; TLS 1.3 is
///   relayed after its ServerHello (`probe-only`).
/// - `mode: report` and an active debug bypass turn a refusal into a warning; the deny list never.
final class StreamCheck {
    struct Context {
        let authority: Authority
        var snapshot: PolicySnapshot
        var rule: Rule?
        /// Whether the CONNECT was judged on a probe's chain (false: unpinned).
        let pinned: Bool
        /// The probe's judgement, when there was one.
        var probe: Judgement? = nil
        let debugBypassEnabled: Bool
        /// The client's key log, when `proxy.keylog` is set (TLS 1.3 tunnels are then verified in
        /// the stream too).
        var keyLog: KeyLogSource? = nil
    }

    /// A would-refuse that report mode or a debug bypass let through: logged as a warning.
    struct Overlooked: Equatable {
        let reason: StreamReason
        let detail: String
        let basis: BypassBasis
    }

    /// What the session logs as it happens: a would-refuse let through, the tunnel's TLS version.
    enum Note {
        case overlooked(Overlooked)
        case negotiated(version: String, clientOfferedTLS13: Bool)
    }

    private var context: Context
    private let ledger: ResumptionLedger
    /// Called as notes arise (set by the session).
    var notify: ((Note) -> Void)?
    /// The check's word on a side's held bytes when it comes after they arrived (set by the relay).
    var decide: ((TunnelSide, Inspection) -> Void)?
    private var clientReader = ClientFlightReader()
    private var serverReader = ServerFlightReader()
    private var clientHello: ClientHello?
    private var serverHello: ServerHello?
    private var certificateJudged = false
    private var resumed = false
    /// Session ids and tickets of this handshake, recorded in the ledger only once the server has
    /// proved its key: when the client sends application data after the server's ChangeCipherSpec
    /// (the client verified the server's Finished). A replayed chain must not plant a session.
    private var pendingCredentials: [ResumptionLedger.Credential] = []
    private var serverChangedCipher = false
    /// Client bytes fed so far, and where its next record header starts (after the ClientHello).
    private var clientFed = 0
    private var clientNextRecord = 0
    private var clientHeader: [UInt8] = []
    /// TLS 1.3 with a key log: the client's line opens the flight the server's bytes are held for.
    private var keyLogCheck: KeyLogCheck?
    /// With the key-log check, until the ServerHello: the server bytes held (not yet passed on), to
    /// find where the plaintext records end whatever the reads' splits.
    private var serverHeld: [UInt8] = []

    /// How the tunnel was verified so far: `bypass` once anything was let through.
    var verification: Verification { overlooked != nil ? .bypass : verifiedBy }
    private var verifiedBy: Verification
    /// The chain the stream check judged, for the log lines.
    private(set) var judgement: (validation: ChainValidation, evaluation: Evaluation)?
    /// The DER chain the stream check judged (what the client received), for a reload's re-judgement.
    private(set) var judgedChain: [[UInt8]]?
    /// A would-refuse let through, for the warning line.
    private(set) var overlooked: Overlooked?

    init(_ context: Context, ledger: ResumptionLedger) {
        self.context = context
        self.ledger = ledger
        verifiedBy = context.pinned ? .probeOnly : .unpinned
    }

    /// The TLS version the tunnel's ServerHello negotiated (`TLSv1.2`), once seen.
    var tunnelVersion: String? {
        guard let version = serverHello?.version else { return nil }
        switch version {
        case 0x0304: return "TLSv1.3"
        case 0x0303: return "TLSv1.2"
        case 0x0302: return "TLSv1.1"
        case 0x0301: return "TLSv1"
        default: return String(format: "0x%04x", version)
        }
    }

    func inspect(_ side: TunnelSide, _ bytes: UnsafeRawBufferPointer, at now: Date = Date()) -> Inspection {
        if context.pinned && TestFault.stream.isInjected { return refuse(.malformedTLS, "the flight could not be read: \(TestFault.detail)", now) }
        return side == .client ? client(bytes, now) : server(bytes, now)
    }

    // MARK: client → server

    private func client(_ bytes: UnsafeRawBufferPointer, _ now: Date) -> Inspection {
        if clientHello != nil { return watchClient(bytes) }
        let hello: ClientHello
        do {
            clientFed += bytes.count
            guard let complete = try clientReader.feed(bytes) else { return .hold }
            hello = complete
        } catch {
            // An unpinned tunnel may carry anything; a pinned one only TLS.
            guard context.pinned else { return .done }
            if case .notTLS = error { return refuse(.notTLS, "the client's first bytes in the tunnel are not a TLS ClientHello", now) }
            return refuse(.malformedTLS, "the client's ClientHello does not parse: \(error)", now)
        }
        clientHello = hello
        if let problem = sniProblem(hello, now) {
            let answer = refuse(.sniMismatch, problem.detail, overlookableBy: problem.overlookableBy)
            if case .refuse = answer { return answer }
        }
        guard context.pinned else { return .done }
        if let source = context.keyLog, hello.offeredVersions.contains(0x0304) {
            keyLogCheck = KeyLogCheck(source: source, hello: hello, reader: clientReader)
            keyLogCheck?.onProgress = { [weak self] progress in self?.later(progress) }
            keyLogCheck?.onTickets = { [weak self] tickets in self?.record(tickets: tickets) }
        }
        // Keep reading record headers: the client's first application data tells us the server
        // proved its key (see `pendingCredentials`).
        clientNextRecord = clientReader.bytesConsumed
        let after = clientFed - clientNextRecord
        clientFed = clientNextRecord
        return after > 0 ? watchClient(UnsafeRawBufferPointer(rebasing: bytes[(bytes.count - after)...])) : .release
    }

    /// Walks the client's record headers after its ClientHello until its first application data
    /// record; then the session this handshake made is known to be the key holder's.
    private func watchClient(_ bytes: UnsafeRawBufferPointer) -> Inspection {
        do {
            try keyLogCheck?.clientBytes(bytes)
        } catch {
            return refuse(.malformedTLS, "the client's second ClientHello does not parse: \(error)", .now)
        }
        var offset = 0
        while offset < bytes.count {
            let position = clientFed + offset
            if position < clientNextRecord {  // inside a record's body: skip it
                offset += min(clientNextRecord - position, bytes.count - offset)
                continue
            }
            clientHeader.append(bytes[offset])
            offset += 1
            guard clientHeader.count == 5 else { continue }
            let type = clientHeader[0], length = Int(clientHeader[3]) << 8 | Int(clientHeader[4])
            clientHeader = []
            clientNextRecord = clientFed + offset + length
            if type == 23 {  // application_data
                if serverChangedCipher && overlooked == nil && serverHello?.version ?? 0 < 0x0304 {
                    let host = context.authority.target.description
                    for credential in pendingCredentials { ledger.record(credential, host: host, port: context.authority.port, at: .now) }
                }
                pendingCredentials = []
                clientFed += bytes.count
                return .done
            }
        }
        clientFed += bytes.count
        // Bounded: a handshake that has not reached application data within 64 KiB records nothing.
        return clientFed > 64 * 1024 ? .done : .release
    }

    /// What is wrong with a ClientHello's server name, and what may let it through anyway.
    private struct SNIProblem {
        let detail: String
        /// nil: refused in every mode.
        let overlookableBy: BypassBasis?
    }

    /// An SNI must not reach another enforced rule's host through this tunnel; a pinned CONNECT
    /// to a name must carry exactly that name.
    ///
    /// Report mode and a debug bypass are scoped to their own host: they never lend that scope to
    /// another name. So a problem is overlooked only when the CONNECT's host is under report mode or
    /// a bypass **and** the name the ClientHello carries is not held by an enforced rule of its own
    /// (it is unpinned, or in report mode, or covered by the bypass itself). A name that is not a
    /// valid host name selects no rule here but might select one on the server: never overlooked.
    private func sniProblem(_ hello: ClientHello, _ now: Date) -> SNIProblem? {
        let target = context.authority.target
        guard let sent = hello.serverName else {
            guard context.pinned, case .name(let name) = target else { return nil }
            return SNIProblem(detail: "the ClientHello names no server, the CONNECT was for \(name)", overlookableBy: bypassBasis(now))
        }
        guard case .success(let name) = HostName.normalize(sent) else {
            return SNIProblem(detail: "the ClientHello's server name \(jsonString(sent)) is not a valid host name", overlookableBy: nil)
        }
        let sniRule = context.snapshot.policy.rule(for: Authority(target: .name(name), port: context.authority.port))
        if let sniRule, sniRule.mode != .unpinned, sniRule != context.rule {
            let detail = "the ClientHello names \(name), which the rule at line \(sniRule.line) pins, inside a tunnel to \(target)"
            return SNIProblem(detail: detail, overlookableBy: enforces(sniRule, for: name, now) ? nil : bypassBasis(now))
        }
        if context.pinned, case .name(let connected) = target, name != connected {
            // The same rule covers both names (a wildcard): its report mode covers both, but a
            // bypass listed for the CONNECT's host does not reach the other name.
            let lent = sniRule.map { enforces($0, for: name, now) } ?? false
            return SNIProblem(detail: "the ClientHello names \(name), the CONNECT was for \(connected)", overlookableBy: lent ? nil : bypassBasis(now))
        }
        return nil
    }

    /// Whether `rule` refuses a mismatch for `name` now: enforced, not past an `on_expiry: report`,
    /// and `name` not under the debug bypass.
    private func enforces(_ rule: Rule, for name: String, _ now: Date) -> Bool {
        guard rule.effectiveMode(at: now) == .enforce else { return false }
        return context.snapshot.policy.debugBypass(for: .name(name), at: now, enabled: context.debugBypassEnabled) == nil
    }

    // MARK: server → client

    private func server(_ bytes: UnsafeRawBufferPointer, _ now: Date) -> Inspection {
        guard context.pinned else { return .done }
        let keepsHeld = keyLogCheck.map { !$0.pastServerHello } ?? false
        if keepsHeld { serverHeld += bytes }
        let answer = readServer(bytes, now)
        // Whatever passed, the ServerHello's records are no longer held; after the ServerHello the
        // key-log check keeps what it needs.
        if answer != .hold { serverHeld = [] }
        return answer
    }

    private func readServer(_ bytes: UnsafeRawBufferPointer, _ now: Date) -> Inspection {
        if let keyLogCheck, keyLogCheck.pastServerHello {
            return inspection(keyLogCheck.serverBytes(bytes), now)
        }
        let events: [ServerFlightEvent]
        do {
            events = try serverReader.feed(bytes)
        } catch {
            if case .notTLS = error { return refuse(.notTLS, "the server's first bytes in the tunnel are not TLS", now) }
            return refuse(.malformedTLS, "the server's first flight does not parse: \(error)", now)
        }
        for (index, event) in events.enumerated() {
            switch event {
            case .serverHello(let hello):
                guard clientHello != nil else { return refuse(.malformedTLS, "the server sent a ServerHello before the client's hello", now) }
                // A HelloRetryRequest is TLS 1.3 (RFC 8446 §4.1.4), and the client needs it before it
                // can send its second hello: holding it would deadlock the handshake.
                serverHello = hello
                if let version = tunnelVersion {
                    notify?(.negotiated(version: version, clientOfferedTLS13: clientHello?.offeredVersions.contains(0x0304) == true))
                }
                if hello.version >= 0x0304 || hello.isHelloRetryRequest {
                    // Only a client that offered TLS 1.3 can be in a TLS 1.3 handshake: a 1.2-only
                    // client that ignores the extension would read a plaintext Certificate next.
                    guard clientHello?.offeredVersions.contains(0x0304) == true else {
                        return refuse(.malformedTLS, "the server claims TLS 1.3, which the client did not offer", now)
                    }
                    verifiedBy = .probeOnly  // TLS 1.3: the Certificate is encrypted
                    guard let keyLogCheck else { return .done }
                    if hello.isHelloRetryRequest {
                        // The server cannot have the client's second hello yet: nothing follows.
                        guard index == events.count - 1 else { return refuse(.malformedTLS, "the server went on past its HelloRetryRequest before the client's second hello", now) }
                        do { try keyLogCheck.retried(hello) } catch { return refuse(.malformedTLS, "\(error)", now) }
                        return .release  // the real ServerHello follows the client's second hello
                    }
                    return tls13ServerHello(hello, keyLogCheck, now)
                }
                keyLogCheck?.stop()  // TLS ≤ 1.2: the Certificate is read in clear
                keyLogCheck = nil
            case .certificate(let ders):
                guard serverHello != nil, !certificateJudged else { return refuse(.malformedTLS, "a Certificate out of order", now) }
                if let refusal = judge(ders, now) { return refusal }
            case .newSessionTicket(let ticket):
                if let decided = decideResumptionIfNeeded(now) { return decided }
                pendingCredentials.append(.ticket(ticket))
            case .otherHandshake:
                break
            case .changeCipherSpec, .encrypted:
                if let decided = decideResumptionIfNeeded(now) { return decided }
                serverChangedCipher = true
                return .done
            }
        }
        return certificateJudged || resumed ? .release : .hold
    }

    // MARK: TLS 1.3 with the client's key log

    /// The ServerHello passes; the encrypted records after it are held for the key-log check.
    private func tls13ServerHello(_ hello: ServerHello, _ keyLogCheck: KeyLogCheck, _ now: Date) -> Inspection {
        let held = serverHeld
        let plainEnd = Self.plaintextEnd(in: held)
        var progress = keyLogCheck.serverHello(hello)
        if progress == .pending && plainEnd < held.count {
            progress = held[plainEnd...].withUnsafeBytes { keyLogCheck.serverBytes($0) }
        }
        let answer = inspection(progress, now)
        return answer == .hold ? .pass(count: plainEnd) : answer
    }

    /// Where the plaintext ends in the held server bytes: past the complete handshake records (the
    /// ServerHello ends its record in TLS 1.3) and compatibility ChangeCipherSpec records, up to the
    /// first encrypted record; never inside a record, however the reads split the bytes.
    static func plaintextEnd(in held: [UInt8]) -> Int {
        var offset = 0
        while offset + 5 <= held.count, held[offset] == 22 || held[offset] == 20 {
            let length = Int(held[offset + 3]) << 8 | Int(held[offset + 4])
            guard offset + 5 + length <= held.count else { break }
            offset += 5 + length
        }
        return offset
    }

    private var keyLogWait: String { "\(Int(((context.keyLog?.waitSeconds ?? 0) * 1000).rounded())) ms" }

    /// A key-log line (or its wait) decided after the bytes arrived.
    private func later(_ progress: KeyLogCheck.Progress) {
        let answer = inspection(progress, .now)
        if answer != .hold { decide?(.upstream, answer) }
    }

    /// What the key-log check's progress means for the server's held bytes.
    private func inspection(_ progress: KeyLogCheck.Progress, _ now: Date) -> Inspection {
        let stillReading = keyLogCheck?.readingTickets == true
        switch progress {
        case .pending:
            if keyLogCheck?.holding == true { return .hold }
            return stillReading ? .release : .done
        case .missing:
            if context.rule?.requireKeylog == true {
                return refuse(.keylogMissing, "no key-log line for this TLS 1.3 handshake within \(keyLogWait); the client must write one (SSLKEYLOGFILE=\(context.keyLog?.path ?? "?"))", now)
            }
            return .done  // probe-only, as without a key log
        case .invalid(let detail):
            return refuse(.keylogInvalid, detail, now)
        case .opened(let flight):
            if flight.chain.isEmpty {
                if let refusal = decideTLS13Resumption(now) { return refusal }
            } else if let refusal = judge(flight.chain, now, verifying: .probeAndKeylog) {
                return refusal
            }
            // Tickets count only from a tunnel verified without a bypass.
            if verifiedBy == .probeAndKeylog && overlooked == nil { keyLogCheck?.accepted() } else { keyLogCheck?.stop() }
            return keyLogCheck?.readingTickets == true ? .release : .done
        }
    }

    /// A TLS 1.3 resumption (no Certificate; its Finished opened under the client's line): the
    /// ticket the server accepted must be one pinproxy read in a tunnel it verified.
    private func decideTLS13Resumption(_ now: Date) -> Inspection? {
        // After a HelloRetryRequest the server answered the second hello, whose offer may differ.
        guard let answered = keyLogCheck?.secondHello ?? clientHello, let serverHello, let index = serverHello.selectedIdentity,
              Int(index) < answered.pskIdentities.count else {
            return refuse(.keylogInvalid, "the server went on without a Certificate and without resuming an offered ticket", now)
        }
        let host = context.authority.target.description
        guard ledger.contains(any: [.ticket(answered.pskIdentities[Int(index)])], host: host, port: context.authority.port, at: .now) else {
            keyLogCheck?.stop()
            return refuse(.unverifiedResumption, "the server resumed a TLS 1.3 session pinproxy never saw verified for \(host):\(context.authority.port)", now)
        }
        resumed = true
        verifiedBy = .probeAndKeylog
        return nil
    }

    /// Tickets the server issued in a tunnel verified with the key log: their resumptions are verified.
    private func record(tickets: [[UInt8]]) {
        guard verifiedBy == .probeAndKeylog, overlooked == nil, !resumed else { return }
        if case .allowed = judgement?.evaluation.verdict {} else { return }
        let host = context.authority.target.description
        for ticket in tickets { ledger.record(.ticket(ticket), host: host, port: context.authority.port, at: .now) }
    }

    /// A reload the open tunnel survived: what the check has still to judge (a TLS 1.2 Certificate, a
    /// TLS 1.3 flight), it judges under the new policy, and no longer by the probe's judgement.
    func policyChanged(to snapshot: PolicySnapshot) {
        context.snapshot = snapshot
        context.rule = snapshot.policy.rule(for: context.authority)
        context.probe = nil
    }

    /// The tunnel ended: drop the key-log check's secrets and stop its timers now.
    func stop() {
        keyLogCheck?.stop()
        keyLogCheck = nil
        decide = nil
    }

    /// The chain the client is about to receive, judged like the probe's.
    private func judge(_ ders: [[UInt8]], _ now: Date, verifying verification: Verification = .probeAndStream) -> Inspection? {
        guard let rule = context.rule else { return refuse(.malformedTLS, "no rule to judge the chain by", now) }
        let validation: ChainValidation, evaluation: Evaluation
        if let probe = context.probe, probe.presentedDER == ders {
            // Byte for byte the chain the probe saw, judged under this same snapshot and rule.
            (validation, evaluation) = (probe.validation, probe.evaluation)
        } else {
            guard let presented = Certificate.chain(fromDER: ders) else {
                return refuse(.malformedTLS, "a certificate in the server's Certificate message does not parse", now)
            }
            (validation, evaluation) = context.snapshot.judge(presented, target: context.authority.target, rule: rule, at: now,
                                                              debugBypassEnabled: context.debugBypassEnabled)
        }
        judgement = (validation, evaluation)
        judgedChain = ders
        certificateJudged = true
        switch evaluation.verdict {
        case .refused(let reason):
            var refusal = StreamRefusal(reason: .policy(reason), detail: "the chain the server sent in the tunnel fails the rule: \(evaluation.chainFailure?.detail ?? reason.rawValue)")
            refusal.alertClient = true
            return .refuse(refusal)
        case .bypassed(let reason, let basis):
            let note = Overlooked(reason: .policy(reason), detail: "the chain the server sent in the tunnel fails the rule", basis: basis)
            overlooked = note
            notify?(.overlooked(note))
        case .allowed, .unpinned:
            verifiedBy = verification
        }
        if case .allowed = evaluation.verdict, let id = serverHello?.sessionID {
            pendingCredentials.append(.sessionID(id))
        }
        return nil
    }

    /// A TLS ≤ 1.2 server that goes on without a Certificate is resuming a session: allowed only when
    /// what the client offered to resume is in the ledger. Nil when it is verified (or there was a
    /// Certificate); otherwise the refusal, or `.done` when report mode or a bypass let it through.
    private func decideResumptionIfNeeded(_ now: Date) -> Inspection? {
        if certificateJudged || resumed { return nil }
        guard let serverHello, let clientHello else { return refuse(.malformedTLS, "the server went on without a ServerHello", now) }
        var offered: [ResumptionLedger.Credential] = []
        if !clientHello.sessionID.isEmpty && serverHello.sessionID == clientHello.sessionID { offered.append(.sessionID(clientHello.sessionID)) }
        if let ticket = clientHello.sessionTicket, !ticket.isEmpty { offered.append(.ticket(ticket)) }
        let host = context.authority.target.description
        guard ledger.contains(any: offered, host: host, port: context.authority.port, at: .now) else {
            return refuse(.unverifiedResumption, "the server resumed a TLS session pinproxy never saw verified for \(host):\(context.authority.port)", now)
        }
        resumed = true
        verifiedBy = .probeAndStream
        return nil
    }

    /// A refusal. Only a TLS 1.3 key-log line missing or wrong (which leaves the tunnel where it
    /// would be without a key log: probe-only), or an SNI problem that `sniProblem` says may be
    /// (never a name another enforced rule holds), is let through, by report mode or an active debug
    /// bypass (then noted); the server's chain is still judged after an SNI, deny list and all.
    /// What leaves nothing to judge — bytes that are not TLS, a flight that does not parse, a
    /// resumption of an unknown session — is refused in every mode: letting it through would let a
    /// deny-listed key through unseen.
    private func refuse(_ reason: StreamReason, _ detail: String, _ now: Date) -> Inspection {
        let overlookable: Set<StreamReason> = [.keylogMissing, .keylogInvalid]
        return refuse(reason, detail, overlookableBy: overlookable.contains(reason) ? bypassBasis(now) : nil)
    }

    private func refuse(_ reason: StreamReason, _ detail: String, overlookableBy basis: BypassBasis?) -> Inspection {
        guard context.pinned, let basis else {
            return .refuse(StreamRefusal(reason: reason, detail: detail))
        }
        let note = Overlooked(reason: reason, detail: detail, basis: basis)
        overlooked = note
        notify?(.overlooked(note))
        return .done
    }

    private func bypassBasis(_ now: Date) -> BypassBasis? {
        if let bypass = context.snapshot.policy.debugBypass(for: context.authority.target, at: now, enabled: context.debugBypassEnabled) {
            return .debugBypass(until: bypass.until)
        }
        return context.rule?.mode == .report ? .reportMode : nil
    }
}
