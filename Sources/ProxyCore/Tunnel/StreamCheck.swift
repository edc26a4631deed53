import Foundation
import PinPolicy
import TLSInspection

/// The stream check: reads the first flights of a tunnel as they cross the relay and
/// checks the connection the client really uses — not the probe's.
///
/// - Every tunnel: an SNI that selects another enforced rule than the CONNECT's is closed (`SNIScope`).
/// - Pinned tunnels: the client's first bytes must be a ClientHello whose SNI is the CONNECT host
///   (none only for IP literals); on TLS ≤ 1.2 the server's bytes are held until its Certificate is
///   complete and that chain is judged exactly as the probe's was (same snapshot, rule, trust,
///   hostname); a resumption (no Certificate) must resume a session seen verified; TLS 1.3 is
///   relayed after its ServerHello (`probe-only`), or held for the client's key log.
/// - `mode: report` and an active debug bypass turn a refusal into a warning; the deny list never.
///
/// Where the handshake stands is `phase`; what was found is `summary`, a value the close line reads.
final class StreamCheck {
    /// What the session logs as it happens: a would-refuse let through, the tunnel's TLS version.
    enum Note {
        case overlooked(StreamSummary.Overlooked)
        case negotiated(version: TLSVersion, clientOfferedTLS13: Bool)
        /// Two looks that carried this tunnel's ClientHello were shown different proved chains,
        /// one passing the rule and one failing it: an interception (logged, and the host:port
        /// quarantined).
        case caught(InterceptionCatch, judged: StreamSummary.JudgedChain?)
        /// A look with this tunnel's ClientHello was shown a proved chain that fails the rule and
        /// no other look with it passed: the tunnel is refused, and a confirming look decides
        /// whether that was an interception (`ConfirmingLook`).
        case unconfirmed(Confirmation)
        /// A pinned tunnel's client completed its ClientHello: it has spoken.
        case clientHello
    }

    /// What a confirming look needs: the failing look, the hello to send again as the client sent
    /// it, and how to judge what it is shown.
    struct Confirmation {
        let failed: SameHelloLooks.FailedLook
        let hello: ClientHello
        let records: [UInt8]
        let judge: LookJudge
    }

    var context: Context
    let ledger: ResumptionLedger
    /// Called as notes arise (set by the session).
    var notify: ((Note) -> Void)?
    /// The check's word on a side's held bytes when it comes after they arrived (set by the relay).
    var decide: ((TunnelSide, Inspection) -> Void)?
    var phase: Phase = .awaitingClientHello(fed: 0) {
        // Done: the hello is no longer needed for a confirming look (a late mirror's catch beside
        // a passing look needs none), and a held tunnel does not carry it.
        didSet { if case .done = phase { madeReading?.hello = nil } }
    }
    /// What the check found so far.
    var summary: StreamSummary
    /// What the looks with this tunnel's ClientHello showed, made at its first judged chain: a
    /// tunnel never judged in the stream (unpinned, or before its first flight) does not carry it.
    final class Looks {
        /// The proved chains of the looks that carried this tunnel's ClientHello.
        var sameHello = SameHelloLooks()
        /// A failing look's confirmation, waiting for the other looks with the same hello still
        /// under way (a mirror, the key log): one of them passing is the incident without a
        /// confirming look.
        var awaitingConfirmation: Confirmation?
    }

    var madeLooks: Looks?
    var looks: Looks {
        if let madeLooks { return madeLooks }
        let made = Looks()
        madeLooks = made
        return made
    }
    /// What the check reads the flights with, made at the tunnel's first byte: a tunnel that has
    /// sent nothing yet does not carry its readers.
    final class Reading {
        var clientReader = ClientFlightReader()
        var serverReader = ServerFlightReader()
        /// After the ClientHello: the client's record headers, walked for its first application data.
        var clientRecords = RecordHeaderWalk(at: 0)
        /// With the key-log or mirror check, until the ServerHello: the server bytes held (not yet
        /// passed on), to find where the plaintext records end whatever the reads' splits.
        var serverHeld: [UInt8] = []
        /// In a pinned tunnel, until the ClientHello is complete: the client's bytes, for a mirror
        /// to copy its record framing (bounded by the reader's limit).
        var firstFlight: [UInt8] = []
        /// The client's first ClientHello and the records that carried it, until the check is
        /// done: what a confirming look sends again.
        var hello: (hello: ClientHello, records: [UInt8])?
        /// Server bytes held after a TLS 1.3 ServerHello with no key log, waiting for the mirrors.
        var heldForMirrors = 0
        /// With mirrors: when the hellos went out, whether the tunnel's server has sent a byte, and
        /// the watch for a look left silent (`StreamCheck+SilentLook`).
        var lookClock: LookClock?
        var tunnelAnswered = false
        var silenceWatch: Timer?
        /// From the client's hello until the server's first flight is where the check can speak
        /// (`StreamCheck+Deadlines`).
        var firstFlightDeadline: Timer?
        /// The server sent a HelloRetryRequest: the client's second hello is due.
        var helloRetried = false
    }

    private(set) var madeReading: Reading?
    var reading: Reading {
        if let madeReading { return madeReading }
        let made = Reading()
        madeReading = made
        return made
    }

    /// The tunnel was pinned when it opened (a reload may unpin it since).
    let openedPinned: Bool

    init(_ context: Context, ledger: ResumptionLedger) {
        self.context = context
        openedPinned = context.isPinned
        self.ledger = ledger
        summary = StreamSummary(verifiedBy: context.isPinned ? .probeOnly : .unpinned)
    }

    func inspect(_ side: TunnelSide, _ bytes: UnsafeRawBufferPointer, at now: Date = Date()) -> Inspection {
        if context.isPinned && TestFault.stream.isInjected { return refuse(.malformedTLS, "the flight could not be read: \(TestFault.detail)", now) }
        let answer = side == .client ? client(bytes, now) : server(bytes, now)
        if case .refuse = answer { sendAwaitingConfirmation() }
        return answer
    }

    /// The server's held bytes wait for a verdict (a key-log line, the mirrors), not for more
    /// bytes: a server that closes now has said all it will say, and its close can wait.
    var holdsForAVerdict: Bool {
        if case .tls13Held = phase { return true }
        return false
    }

    /// The check's word on the server's held bytes, after they arrived.
    func deliver(_ answer: Inspection) {
        if case .refuse = answer { sendAwaitingConfirmation() }
        decide?(.upstream, answer)
    }

    /// A reload the open tunnel survived: what the check has still to judge (a TLS 1.2 Certificate, a
    /// TLS 1.3 flight), it judges under the new policy, and no longer by the probe's judgement.
    func policyChanged(to snapshot: PolicySnapshot) {
        context.policyChanged(to: snapshot)
    }

    /// What the tunnel keeps of the check once it is done (see `StreamSummary.lasting`).
    var lasting: StreamSummary {
        if case .pinned(_, let probe) = context.pinning { return summary.lasting(probe: probe) }
        return summary
    }

    /// The tunnel ended: drop the key-log check's secrets and stop its timers now.
    func stop() {
        phase.tls13Checks?.stop()
        madeReading?.silenceWatch = nil
        madeReading?.firstFlightDeadline = nil
        context.closeMirrors()
        phase = .done
        decide = nil
    }

    // MARK: client → server

    private func client(_ bytes: UnsafeRawBufferPointer, _ now: Date) -> Inspection {
        guard case .awaitingClientHello(let fedBefore) = phase else { return watchClient(bytes) }
        if context.isPinned { reading.firstFlight += bytes }
        let hello: ClientHello
        do {
            guard let complete = try reading.clientReader.feed(bytes) else {
                phase = .awaitingClientHello(fed: fedBefore + bytes.count)
                return .hold
            }
            hello = complete
        } catch {
            // An unpinned tunnel may carry anything; a pinned one only TLS.
            guard context.isPinned else { phase = .done; return .done }
            if case .notTLS = error { return refuse(.notTLS, "the client's first bytes in the tunnel are not a TLS ClientHello", now) }
            return refuse(.malformedTLS, "the client's ClientHello does not parse: \(error)", now)
        }
        if let problem = SNIScope(context: context).problem(serverName: hello.serverName, at: now) {
            let answer = refuse(.sniMismatch, problem.detail, overlookableBy: problem.overlookableBy)
            if case .refuse = answer { return answer }
        }
        notify?(.clientHello)
        guard context.isPinned else {
            context.closeMirrors()
            phase = .done
            return .done
        }
        // A replayed hello costs nothing to send and a handshake per look to answer: no mirror for it.
        if let seen = context.seenHellos, !seen.note(hello.random) {
            context.closeMirrors()
            return refuse(.helloReplayed, "the client's ClientHello carries the random of a hello an earlier tunnel carried; a client makes a fresh one for each connection", now)
        }
        reading.hello = (hello, Array(reading.firstFlight.prefix(reading.clientReader.bytesConsumed)))
        reading.firstFlight = []
        var keyLog: KeyLogCheck?
        let offersTLS13 = hello.offeredVersions.contains(0x0304)
        if let source = context.keyLog, offersTLS13 {
            let check = KeyLogCheck(source: source, hello: hello, reader: reading.clientReader)
            check.onProgress = { [weak self] progress in self?.later(progress) }
            check.onTickets = { [weak self] tickets in self?.record(tickets: tickets) }
            keyLog = check
        }
        let mirrors = offersTLS13 ? startMirrors(hello) : []
        context.closeMirrors()  // a client that offers only TLS ≤ 1.2 is verified in the stream
        phase = .awaitingServerHello(hello, TLS13Checks(keyLog: keyLog, mirrors: mirrors))
        armFirstFlightDeadline()
        // Keep reading record headers: the client's first application data tells us the server
        // proved its key (see `Phase.watchingApplicationData`).
        reading.clientRecords = RecordHeaderWalk(at: reading.clientReader.bytesConsumed)
        let after = fedBefore + bytes.count - reading.clientReader.bytesConsumed
        return after > 0 ? watchClient(UnsafeRawBufferPointer(rebasing: bytes[(bytes.count - after)...])) : .release
    }

    /// Walks the client's record headers after its ClientHello until its first application data
    /// record; then the session this handshake made is known to be the key holder's.
    private func watchClient(_ bytes: UnsafeRawBufferPointer) -> Inspection {
        do {
            try phase.keyLogCheck?.clientBytes(bytes)
        } catch {
            return refuse(.malformedTLS, "the client's second ClientHello does not parse: \(error)", .now)
        }
        for mirror in phase.tls13Checks?.mirrors ?? [] { mirror.clientBytes(bytes) }
        if reading.clientRecords.feed(bytes, until: 23) {  // application_data
            clientSentApplicationData()
            return .done
        }
        // Bounded: a handshake that has not reached application data within 64 KiB records nothing.
        return reading.clientRecords.fed > 64 * 1024 ? .done : .release
    }

    /// The client verified the server's Finished: a TLS ≤ 1.2 server that changed cipher holds its
    /// key, and what it issued may be resumed as verified (not after a would-refuse let through).
    private func clientSentApplicationData() {
        guard case .watchingApplicationData(let credentials) = phase else { return }
        phase = .done
        guard summary.overlooked == nil else { return }
        let host = context.authority.target.description
        for credential in credentials { ledger.record(credential, host: host, port: context.authority.port, at: .now) }
    }

    // MARK: server → client

    private func server(_ bytes: UnsafeRawBufferPointer, _ now: Date) -> Inspection {
        guard context.isPinned else { return .done }
        if !bytes.isEmpty { serverAnsweredTunnel() }
        if case .awaitingServerHello(_, let checks) = phase, !checks.isEmpty { reading.serverHeld += bytes }
        let answer = readServer(bytes, now)
        // Whatever passed, the ServerHello's records are no longer held; after the ServerHello the
        // key-log check keeps what it needs.
        if answer != .hold { reading.serverHeld = [] }
        return answer
    }

    private func readServer(_ bytes: UnsafeRawBufferPointer, _ now: Date) -> Inspection {
        switch phase {
        case .tls13Held(let hellos, let checks): return heldServerBytes(bytes, hellos, checks, now)
        case .watchingApplicationData, .done: return .done
        case .awaitingClientHello, .awaitingServerHello, .tls12Certificate, .tls12Chain, .tls12Judged, .resumption: break
        }
        let events: [ServerFlightEvent]
        do {
            events = try reading.serverReader.feed(bytes)
        } catch {
            if case .notTLS = error { return refuse(.notTLS, "the server's first bytes in the tunnel are not TLS", now) }
            return refuse(.malformedTLS, "the server's first flight does not parse: \(error)", now)
        }
        for (index, event) in events.enumerated() {
            if let answer = read(event, isLast: index == events.count - 1, now) { return answer }
        }
        switch phase {
        case .tls12Judged, .resumption: return .release
        default: return .hold
        }
    }

    /// One event of the server's first flight: the answer, or nil to read on.
    private func read(_ event: ServerFlightEvent, isLast: Bool, _ now: Date) -> Inspection? {
        if case .tls12Chain(let hellos, let chain, let issued) = phase {
            // The message after the Certificate: a CertificateStatus brings a stapled OCSP response.
            var delivered = DeliveredSCTs(tlsExtension: hellos.server.sctList)
            var isStatus = false
            if case .otherHandshake(let type, let raw) = event, type == 22 {
                isStatus = true
                delivered.ocspResponse = try? stapledOCSPResponse(certificateStatus: Array(raw.dropFirst(4)))
            }
            if let refusal = certificate(chain, hellos, issued: issued, delivered: delivered, now) { return refusal }
            if isStatus { return nil }
        }
        switch (event, phase) {
        case (.serverHello(let hello), _):
            return serverHello(hello, isLast: isLast, now)
        case (.certificate(let ders), .tls12Certificate(let hellos)):
            phase = .tls12Chain(hellos, chain: ders, issued: [])
        case (.certificate(let ders), .resumption(let hellos, let issued)):
            phase = .tls12Chain(hellos, chain: ders, issued: issued)
        case (.certificate, _):
            return refuse(.malformedTLS, "a Certificate out of order", now)
        case (.newSessionTicket(let ticket), .tls12Certificate(let hellos)):
            if let refusal = resume(hellos, now) { return refusal }
            phase = .resumption(hellos, credentials: [.ticket(ticket)])
        case (.newSessionTicket(let ticket), .tls12Judged(let hellos, let credentials)):
            phase = .tls12Judged(hellos, credentials: credentials + [.ticket(ticket)])
        case (.newSessionTicket(let ticket), .resumption(let hellos, let credentials)):
            phase = .resumption(hellos, credentials: credentials + [.ticket(ticket)])
        case (.otherHandshake, _):
            break
        case (.changeCipherSpec, .tls12Certificate(let hellos)), (.encrypted, .tls12Certificate(let hellos)):
            if let refusal = resume(hellos, now) { return refusal }
            phase = .watchingApplicationData(credentials: [])
            return .done
        case (.changeCipherSpec, .tls12Judged(_, let credentials)), (.encrypted, .tls12Judged(_, let credentials)),
             (.changeCipherSpec, .resumption(_, let credentials)), (.encrypted, .resumption(_, let credentials)):
            phase = .watchingApplicationData(credentials: credentials)
            return .done
        case (.newSessionTicket, _), (.changeCipherSpec, _), (.encrypted, _):
            return refuse(.malformedTLS, "the server went on without a ServerHello", now)
        }
        return nil
    }

    /// A TLS ≤ 1.2 Certificate, judged; a chain that passes adds the session id to what the
    /// handshake `issued` so far.
    private func certificate(_ ders: [[UInt8]], _ hellos: Hellos, issued: [ResumptionLedger.Credential], delivered: DeliveredSCTs,
                             _ now: Date) -> Inspection? {
        if let refusal = judge(ders, now, delivered: delivered) { return refusal }
        var credentials = issued
        if let verdict = summary.judged?.evaluation.verdict, case .allowed = verdict { credentials.append(.sessionID(hellos.server.sessionID)) }
        phase = .tls12Judged(hellos, credentials: credentials)
        return nil
    }

    private func serverHello(_ hello: ServerHello, isLast: Bool, _ now: Date) -> Inspection? {
        guard case .awaitingServerHello(let client, let checks) = phase else {
            if case .awaitingClientHello = phase { return refuse(.malformedTLS, "the server sent a ServerHello before the client's hello", now) }
            return refuse(.malformedTLS, "a second ServerHello", now)
        }
        // A HelloRetryRequest is TLS 1.3 (RFC 8446 §4.1.4), and the client needs it before it can
        // send its second hello: holding it would deadlock the handshake.
        summary.negotiated = TLSVersion(wire: hello.version)
        notify?(.negotiated(version: TLSVersion(wire: hello.version), clientOfferedTLS13: client.offeredVersions.contains(TLSVersion.tls13.wire)))
        guard hello.version >= 0x0304 || hello.isHelloRetryRequest else {
            checks.stop()  // TLS ≤ 1.2: the Certificate is read in clear
            phase = .tls12Certificate(Hellos(client: client, server: hello))
            return nil
        }
        // Only a client that offered TLS 1.3 can be in a TLS 1.3 handshake: a 1.2-only client that
        // ignores the extension would read a plaintext Certificate next.
        guard client.offeredVersions.contains(0x0304) else {
            return refuse(.malformedTLS, "the server claims TLS 1.3, which the client did not offer", now)
        }
        guard !checks.isEmpty else {  // TLS 1.3: the Certificate is encrypted, and nothing can read it
            return unverifiable(Hellos(client: client, server: hello), now, because: context.mirrorsOff ? nil : "no mirror connection")
        }
        if hello.isHelloRetryRequest {
            // The server cannot have the client's second hello yet: nothing follows.
            guard isLast else { return refuse(.malformedTLS, "the server went on past its HelloRetryRequest before the client's second hello", now) }
            do { try checks.keyLog?.retried(hello) } catch { return refuse(.malformedTLS, "\(error)", now) }
            reading.helloRetried = true
            return .release  // the real ServerHello follows the client's second hello
        }
        let hellos = Hellos(client: client, server: hello)
        phase = .tls13Held(hellos, checks)
        for mirror in checks.mirrors { mirror.tunnelAnswered() }
        return tls13ServerHello(hellos, checks, now)
    }

    /// A TLS ≤ 1.2 server that goes on without a Certificate is resuming a session: allowed only when
    /// what the client offered to resume is in the ledger. Nil when it is verified.
    private func resume(_ hellos: Hellos, _ now: Date) -> Inspection? {
        var offered: [ResumptionLedger.Credential] = []
        let clientID = hellos.client.sessionID
        if !clientID.isEmpty && hellos.server.sessionID == clientID { offered.append(.sessionID(clientID)) }
        if let ticket = hellos.client.sessionTicket, !ticket.isEmpty { offered.append(.ticket(ticket)) }
        let host = context.authority.target.description
        guard ledger.contains(any: offered, host: host, port: context.authority.port, at: .now) else {
            return refuse(.unverifiedResumption, "the server resumed a TLS session pinproxy never saw verified for \(host):\(context.authority.port)", now)
        }
        summary.verifiedBy = .probeAndStream
        return nil
    }
}
