import Foundation
import PinPolicy
import TLSInspection

/// The stream check's TLS 1.3 half: the key-log check and the mirror check hold the server's
/// encrypted flight until one of them speaks for it (see `StreamCheck`).
extension StreamCheck {
    // MARK: TLS 1.3 with the client's key log

    /// The ServerHello passes; the encrypted records after it are held for the checks.
    func tls13ServerHello(_ hellos: Hellos, _ checks: TLS13Checks, _ now: Date) -> Inspection {
        let held = reading.serverHeld
        let plainEnd = Self.plaintextEnd(in: held)
        let answer: Inspection
        if let keyLog = checks.keyLog {
            var progress = keyLog.serverHello(hellos.server)
            if progress == .pending && plainEnd < held.count {
                progress = held[plainEnd...].withUnsafeBytes { keyLog.serverBytes($0) }
            }
            answer = tls13Answer(progress, hellos, checks, now)
        } else {
            reading.heldForMirrors = held.count - plainEnd
            answer = tls13Answer(.pending, hellos, checks, now)
        }
        return answer == .hold ? .pass(count: plainEnd) : answer
    }

    /// Server bytes after a TLS 1.3 ServerHello: the key-log check reads them; without one they
    /// wait for the mirrors (bounded as the key-log check bounds its flight).
    func heldServerBytes(_ bytes: UnsafeRawBufferPointer, _ hellos: Hellos, _ checks: TLS13Checks, _ now: Date) -> Inspection {
        if let keyLog = checks.keyLog { return tls13Answer(keyLog.serverBytes(bytes), hellos, checks, now) }
        reading.heldForMirrors += bytes.count
        guard reading.heldForMirrors <= 128 * 1024 else { return refuse(.malformedTLS, "the server's flight is over 128 KiB before the mirror decided", now) }
        return tls13Answer(.pending, hellos, checks, now)
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
    func later(_ progress: KeyLogCheck.Progress) {
        defer { confirmWhenSettled() }
        guard case .tls13Held(let hellos, let checks) = phase else { return }
        let answer = tls13Answer(progress, hellos, checks, .now)
        if answer != .hold { deliver(answer) }
    }

    /// What the TLS 1.3 checks' progress means for the server's held bytes. The key log speaks for
    /// the client's own connection, so its word decides (a mirror's catch is an incident either
    /// way). Without a key-log line (none set, or none within `wait`), the mirrors decide.
    private func tls13Answer(_ progress: KeyLogCheck.Progress, _ hellos: Hellos, _ checks: TLS13Checks, _ now: Date) -> Inspection {
        if let keyLog = checks.keyLog {
            let missing = progress == .missing || keyLog.declaredMissing
            // The client's own chain decides; a mirror's catch (already logged) waits for it.
            if !missing && progress == .pending && keyLog.holding { return .hold }
            // No line under `require_keylog` is refused; without it the mirrors speak instead.
            if !missing || context.rule?.requireKeylog == true { return inspection(missing ? .missing : progress, hellos, keyLog, now) }
        }
        return mirrorAnswer(hellos, checks, now)
    }

    /// What the key-log check's progress means for the server's held bytes.
    private func inspection(_ progress: KeyLogCheck.Progress, _ hellos: Hellos, _ keyLog: KeyLogCheck, _ now: Date) -> Inspection {
        let answer: Inspection
        switch progress {
        case .pending:
            if keyLog.holding { return .hold }
            answer = keyLog.readingTickets ? .release : .done
        case .missing:  // only under `require_keylog` (see tls13Answer)
            answer = refuse(.keylogMissing, "no key-log line for this TLS 1.3 handshake within \(keyLogWait); the client must write one (SSLKEYLOGFILE=\(context.keyLog?.path ?? "?"))", now)
        case .invalid(let invalid):
            answer = refuse(.keylogInvalid, invalid.detail, now)
        case .opened(let flight):
            if flight.chain.isEmpty {
                if let refusal = resumeTLS13(hellos, keyLog, now) { return refusal }
            } else if let refusal = judge(flight.chain, now, verifying: .probeAndKeylog, delivered: DeliveredSCTs(flight)) {
                return refusal
            }
            // Tickets count only from a tunnel verified without a bypass.
            if summary.verification == .probeAndKeylog { keyLog.accepted() } else { keyLog.stop() }
            answer = keyLog.readingTickets ? .release : .done
        }
        if answer == .done { phase = .done }
        return answer
    }

    // MARK: TLS 1.3 with the mirror check

    /// Starts a mirror check on each mirror connection, each in its own random order with the
    /// client's hello (which the relay forwards when this inspection returns).
    func startMirrors(_ hello: ClientHello) -> [MirrorCheck] {
        guard let setup = context.takeMirrors() else { return [] }
        reading.lookClock = LookClock(loop: setup.loop, timeout: setup.timeout, sentAt: .now)
        let flight = reading.hello?.records ?? []
        return setup.connections.map { connection in
            let check = MirrorCheck(connection: connection, hello: hello, flight: flight, reader: reading.clientReader, order: .random(),
                                    loop: setup.loop, timeout: setup.timeout)
            check.onProgress = { [weak self, weak check] progress in if let check { self?.mirrorDecided(check, progress) } }
            check.tunnelLate = { [weak self] detail in self?.tunnelLate(detail) }
            check.onFirstByte = { [weak self] in self?.serverAnsweredMirror() }
            return check
        }
    }

    /// A mirror decided: noted (a catch is an incident whatever the tunnel's state), and while the
    /// tunnel's flight is held, the held bytes get their answer.
    private func mirrorDecided(_ mirror: MirrorCheck, _ progress: MirrorCheck.Progress) {
        note(mirror, progress, .now)
        confirmWhenSettled()
        guard case .tls13Held(let hellos, let checks) = phase else { return }
        let answer = tls13Answer(checks.keyLog?.declaredMissing == true ? .missing : .pending, hellos, checks, .now)
        if answer != .hold { deliver(answer) }
    }

    /// The mirror passed long ago and the tunnel's server still has not answered: no tunnel waits
    /// on for ever behind its silent mirror.
    private func tunnelLate(_ detail: String) {
        guard case .awaitingServerHello(let hello, let checks) = phase else { return }
        refuseSilentTunnel(detail, hello, checks)
    }

    /// What a mirror found, judged once: its chain under the rule, as a stream chain is.
    private func note(_ mirror: MirrorCheck, _ progress: MirrorCheck.Progress, _ now: Date) {
        guard let finding = finding(for: progress, now) else { return }
        mirror.finding = finding
    }

    /// What a mirror's progress means for the tunnel (nil while it is pending).
    func finding(for progress: MirrorCheck.Progress, _ now: Date) -> MirrorFinding? {
        switch progress {
        case .pending:
            return nil
        case .shown(let chain, _, let delivered):
            guard let refusal = judge(chain, now, verifying: .probeAndMirror, stage: .mirror, delivered: delivered) else { return .passed }
            return .refused(refusal)
        case .invalid(let detail):
            // Unproved: a flight its chain's key did not sign proves no chain, so it is this
            // tunnel's refusal and never an incident by itself.
            return .refused(refuse(.mirrorInvalid, "the server's flight on the mirror check does not verify: \(detail)", now, stage: .mirror))
        case .failed(let detail):
            return .refused(refuse(.mirrorFailed, "the server's answer on the mirror check proves no chain: \(detail)", now, stage: .mirror))
        case .lost(let detail):
            return .refused(refuse(.mirrorLost, detail, now, stage: .mirror))
        case .unavailable(let detail):
            return .unavailable(detail)
        }
    }

    /// A mirror's refusal, if one refused (the first, in the order the mirrors were made).
    private func mirrorCatch(_ checks: TLS13Checks, _ now: Date) -> Inspection? {
        for mirror in checks.mirrors {
            if case .refused(let refusal) = mirror.finding, refusal != .done {
                phase = .done
                return refusal
            }
        }
        return nil
    }

    /// The tunnel's answer by its mirrors, when no key-log line speaks for it.
    private func mirrorAnswer(_ hellos: Hellos, _ checks: TLS13Checks, _ now: Date) -> Inspection {
        // Every mirror speaks first: one that passes beside one that fails is an incident, and
        // the refusal's confirming look is needed only when none passed.
        let findings = checks.mirrors.map(\.finding)
        if findings.contains(where: { $0 == nil }) { return .hold }
        // A mirror's refusal is this tunnel's (an incident only beside a look that passed).
        if let refusal = mirrorCatch(checks, now) { return refusal }
        // While the host:port is quarantined no such tunnel passes, mirror or not: a mirror's pass
        // says what pinproxy's connection was shown, not what this one was.
        if let refusal = quarantined(now) {
            checks.stop()
            phase = .done
            return refusal
        }
        guard !checks.mirrors.isEmpty else {
            return unverifiable(hellos, now, because: context.mirrorsOff ? nil : "no mirror connection")
        }
        // The tunnel resumed a session: the mirrors made full handshakes, which say nothing of it.
        if hellos.server.selectedIdentity != nil { return unverifiable(hellos, now, because: nil) }
        for finding in findings {
            if case .unavailable(let detail) = finding { return unverifiable(hellos, now, because: detail) }
        }
        checks.stop()
        phase = .done
        if summary.overlooked == nil { summary.verifiedBy = .probeAndMirror }
        return .done
    }

    /// A TLS 1.3 tunnel nothing verified by itself (no key-log line, no mirror, or a resumption):
    /// refused while its host:port is quarantined, else relayed on the probe's verdict, saying why.
    func unverifiable(_ hellos: Hellos, _ now: Date, because why: String?) -> Inspection {
        phase.tls13Checks?.stop()
        phase = .done
        if let refusal = quarantined(now) { return refusal }
        if hellos.server.selectedIdentity != nil {
            summary.verifiedBy = .resumptionUnverified
            summary.unverified = .init(reason: .resumptionUnverified, detail: "the client resumed a TLS 1.3 session and wrote no key-log line: the handshake shows no chain and no mirror can copy its PSK binder, so nothing verified this tunnel (refused under require_keylog and while the host is quarantined)")
        } else {
            summary.verifiedBy = .probeOnly
            summary.unverified = why.map { .init(reason: .mirrorUnavailable, detail: $0) }
        }
        return .done
    }

    /// A TLS 1.3 resumption (no Certificate; its Finished opened under the client's line): the
    /// ticket the server accepted must be one pinproxy read in a tunnel it verified.
    private func resumeTLS13(_ hellos: Hellos, _ keyLog: KeyLogCheck, _ now: Date) -> Inspection? {
        // After a HelloRetryRequest the server answered the second hello, whose offer may differ.
        let answered = keyLog.secondHello ?? hellos.client
        guard let index = hellos.server.selectedIdentity, Int(index) < answered.pskIdentities.count else {
            return refuse(.keylogInvalid, "the server went on without a Certificate and without resuming an offered ticket", now)
        }
        let host = context.authority.target.description
        guard ledger.contains(any: [.ticket(answered.pskIdentities[Int(index)])], host: host, port: context.authority.port, at: .now) else {
            keyLog.stop()
            return refuse(.unverifiedResumption, "the server resumed a TLS 1.3 session pinproxy never saw verified for \(host):\(context.authority.port)", now)
        }
        summary.verifiedBy = .probeAndKeylog
        return nil
    }

    /// Tickets the server issued in a tunnel whose chain was verified with the key log (not a
    /// resumption, nothing let through): their resumptions are verified.
    func record(tickets: [[UInt8]]) {
        guard summary.verification == .probeAndKeylog, let verdict = summary.judged?.evaluation.verdict, case .allowed = verdict else { return }
        let host = context.authority.target.description
        for ticket in tickets { ledger.record(.ticket(ticket), host: host, port: context.authority.port, at: .now) }
    }

    /// The refusal of a TLS 1.3 tunnel nothing verified by itself while its host:port is quarantined.
    private func quarantined(_ now: Date) -> Inspection? {
        guard let entry = context.quarantine?.entry(for: context.authority, at: now) else { return nil }
        let until = RFC3339.format(entry.until)
        return refuse(.quarantined, "\(context.authority) is quarantined until \(until) after a caught interception; only tunnels pinproxy verifies by themselves pass (TLS 1.2, or TLS 1.3 with the client's key log)", now)
    }
}
