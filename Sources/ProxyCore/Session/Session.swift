import CLibevent
import Foundation
import PinPolicy
import TLSInspection

/// One client connection, driven through its `SessionMachine`: callbacks only turn libevent
/// events into machine events, and `perform` maps each action the machine answers to one call. The
/// I/O of the current stage (a timer, a lookup, a probe waiter, the upstream's dial, the relay) is
/// held in `work`, so leaving a stage drops — and so cancels or frees — what it was waiting for.
///
/// Bound to its worker's loop thread; it reaches the worker only through `SessionHost`.
final class Session {
    /// Kept so the worker (and its loop) outlives every session it holds.
    let host: any SessionHost
    let id: Int
    let client: SocketAddress
    /// Monotonic, so a wall-clock step neither ends a tunnel early nor skews `duration_ms`.
    let acceptedAt = ContinuousClock.now
    var machine: SessionMachine
    private(set) var work = SessionWork.none
    /// The client's bufferevent, until a tunnel's relay takes it (or the session ends).
    private(set) var clientSide: BufferEvent?
    /// The upstream and its mirrors, dialled, until the tunnel opens on them.
    private var dialled: UpstreamDial.Dialled?
    /// When the tunnel opened, for the close line's `duration_ms`.
    private var openedAt: ContinuousClock.Instant?
    var tunnelSlot = false
    /// Transparent mode: where the kernel redirected this connection from; nil for the proxy port.
    let transparent: TransparentOrigin?
    /// Transparent mode: the client's first bytes were an HTTP request (answered in HTTP, not a TLS alert).
    var transparentHTTP = false

    init?(worker host: any SessionHost, id: Int, fd: Int32, client: SocketAddress, transparent: TransparentOrigin? = nil) {
        self.host = host
        self.id = id
        self.client = client
        self.transparent = transparent
        machine = SessionMachine(conn: id, client: client, original: transparent?.original) { [weak host] in host?.isOwnAddress($0) ?? false }
        host.sessionObjectMade()  // balanced by deinit, which runs even when this init fails below
        guard let side = BufferEvent(loop: host.loop, socket: fd) else { return nil }
        clientSide = side  // TCP_NODELAY: inherited from the listener (`Listener.tune`)
        side.route(to: self, read: sessionReadCB, write: nil, event: sessionEventCB)
        side.enable(EV_READ)
        work = .readingRequest(headerTimeout: Timer(loop: host.loop, after: host.snapshot.policy.proxy.headerTimeout) { [weak self] in
            self?.headerTimedOut()
        })
    }

    /// `header_timeout` passed before a whole request head (the timer is dropped once one is read).
    /// A 408 is for a client that began a request; one that never spoke is only closed.
    func headerTimedOut() {
        if sentNothing { return finish(.silent) }
        perform(machine.requestRejected(.headerTimeout))
    }

    /// Has not sent a byte since it connected: none read (bytes of an unfinished head wait in the
    /// input), none waiting in the kernel.
    private var sentNothing: Bool {
        guard case .readingRequest = machine.state, let clientSide, evbuffer_get_length(clientSide.input) == 0 else { return false }
        var byte: UInt8 = 0
        return recv(clientSide.fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) <= 0
    }

    deinit { host.sessionObjectFreed() }

    var settings: ProxySettings { (machine.admitted?.snapshot ?? host.snapshot).policy.proxy }

    /// A reload: an open tunnel is judged again under the new snapshot on the chain already
    /// verified for it (no new handshake); one the new policy refuses is closed.
    func rejudge(under fresh: PolicySnapshot) {
        if case .forwarding(let forwarder) = work { return forwarder.policyChanged(to: fresh.policy) }
        guard case .relaying(let relay, _) = work, case .relaying(let admitted, let passage, let address) = machine.state else { return }
        guard case .closes(let cause) = fresh.rejudge(admitted, passage, at: address, stream: relay.summary, client: client.ip,
                                                     debugBypassEnabled: host.debugBypassEnabled) else {
            relay.check?.policyChanged(to: fresh)
            return
        }
        relay.abortOnClose()
        finish(.policyReload(cause))
    }

    /// The session's one end: shutdown, a hang-up, the relay's end, a reload — the machine says
    /// what follows (a close line, a release).
    func finish(_ reason: CloseReason) {
        // A client that leaves without a byte ends as silent as one that never speaks.
        let reason = (reason == .clientClosed || reason == .clientError) && sentNothing ? .silent : reason
        guard let code = reason.closeCode, code.entry.level == nil else { return perform(machine.ended(reason)) }
        // One of thousands in a flood (the worker's summary line and the counters speak for them),
        // or a connection that never asked for anything: no line of its own (`ReasonTable`), as
        // HAProxy's `dontlognull`. One still reading its request has nothing of ours to deliver: a
        // reset frees its socket at once, without a FIN's round trip and the orphaned socket that
        // waits for it (a kept plain-HTTP connection reaped between requests may still have an
        // answer's end in the kernel: it gets a plain close).
        if case .readingRequest = machine.state { clientSide?.abortOnClose() }
        _ = machine.ended(reason)
        if reason == .silent { host.closedSilently() }
        release()
    }

    // MARK: carrying out the machine's actions

    /// Carries out one action. Leaving a stage drops its pending work first; a callback that
    /// arrives synchronously (evdns, a connect that fails at once) moves the machine on inside the
    /// call that started it, so work is kept only if the machine is still in its stage.
    func perform(_ action: SessionMachine.Action) {
        if case .none = action { return }
        let previous = work
        work = .none
        previous.cancel()
        syncTunnelSlot()
        switch action {
        case .none: break
        case .reject(let refusal, let record): reject(refusal, record)
        case .refuse(let refusal, let record): refuse(refusal, record)
        case .lookUp(let name): lookUp(name)
        case .probe(let key): probe(key)
        case .connect(let addresses): dial(addresses)
        case .open(let record, let decision): openTunnel(record, decision)
        case .forward(let head): forward(head)
        case .answer(let refusal): respondAndLinger(refusal, host: nil)
        case .release: release()
        case .close(let reason, let record): close(reason, record, relay: previous.relay)
        }
    }

    /// A request rejected before any CONNECT was judged: its line, then the answer.
    private func reject(_ refusal: Refusal, _ record: DecisionRecord) {
        host.ended(.rejected(refusal, record))
        respondAndLinger(refusal, host: nil)
    }

    /// A CONNECT refused: the warnings its judgement revealed, its line, then the answer.
    private func refuse(_ refusal: Refusal, _ record: DecisionRecord) {
        if let evaluation = record.evaluation { host.noteWarnings(evaluation, record: record) }
        host.ended(.refused(refusal, record))
        // No refusal is cached: the next CONNECT looks at the server again.
        if record.validation != nil, let authority = record.authority { host.forgetProbe(authority) }
        respondAndLinger(refusal, host: record.authority?.target.description)
    }

    private func lookUp(_ name: String) {
        let deadline = Timer(loop: host.loop, after: settings.dnsTimeout) { [weak self] in self?.dnsTimedOut() }
        let request = host.resolver.resolve(name) { [weak self] result in self?.resolvedName(result) }
        if case .resolving = machine.state, case .none = work { work = .resolving(request, deadline: deadline) }
    }

    private func dnsTimedOut() { perform(machine.resolveTimedOut()) }
    private func resolvedName(_ result: Result<[IPAddress], Resolver.Failure>) { perform(machine.resolved(result)) }

    private func probe(_ key: ProbeHub.Key) {
        // A rule without mirrors leaves TLS 1.3 to the probe: it is then made for this CONNECT.
        var cacheable = true
        if case .probing(_, let rule) = machine.state { cacheable = rule.mirrorChecks > 0 }
        let waiter = host.probe(key, settings: settings, cacheable: cacheable) { [weak self] result in
            guard let self else { return }
            perform(machine.probed(result, at: Date(), debugBypassEnabled: host.debugBypassEnabled))
        }
        if case .probing = machine.state, case .none = work { work = .probing(waiter) }
    }

    private func dial(_ addresses: [IPAddress]) {
        var mirrors = 0
        if case .connecting(_, .pinned(let rule, _, _)) = machine.state { mirrors = rule.mirrorChecks }  // a probe's chain was judged: pinned
        if mirrors > 0, let refusal = host.reserveMirrors(mirrors, for: client) { return perform(machine.connectFailed(refusal)) }
        let dial = UpstreamDial(loop: host.loop, to: machine.admitted!.authority, at: addresses, settings: settings, mirrors: mirrors,
                                ticket: { [host, client] in host.mirrorTicket(for: client) }) { [weak self] outcome in
            guard let self else { return }
            switch outcome {
            case .failed(let refusal):
                perform(machine.connectFailed(refusal))
            case .ready(let dialled):
                self.dialled = dialled
                perform(machine.connected(to: dialled.address))
            }
        }
        if case .connecting = machine.state, case .none = work { work = .connecting(dial) } else { dial.cancel() }
    }

    private func openTunnel(_ record: DecisionRecord, _ decision: TunnelDecision) {
        guard let clientSide, let dialled, case .opened(let admitted, let passage, _) = record.stage else {
            preconditionFailure("a tunnel without both sides")
        }
        self.dialled = nil
        host.countOpened(decision)
        if transparent == nil { TunnelOpening.sendEstablished(on: clientSide) }  // a redirected client asked nothing of a proxy
        openedAt = .now
        // The judgement's warnings and the rotation book, after the 200 (a refusal notes them on its
        // own way out), before the decision line as they always came.
        if case .pinned(let rule, let judgement, _) = passage {
            host.noteWarnings(judgement.evaluation, record: DecisionRecord(conn: id, client: client, .judged(admitted, rule, judgement)))
        }
        host.logOpened(record, decision)
        self.clientSide = nil  // the relay's from here
        let relay = TunnelOpening.relay(admitted, passage, settings: settings, client: clientSide, dialled: dialled, services: host.tunnelServices,
                                        noted: { [weak self] note in self?.streamNoted(note) },
                                        ended: { [weak self] end in self?.finish(.relay(end)) })
        var bypassEnd: Timer?
        if case .bypassed(_, .debugBypass(let until)) = decision {
            bypassEnd = Timer(loop: host.loop, after: max(0, until.timeIntervalSinceNow)) { [weak self] in self?.finish(.debugBypassExpired) }
        }
        work = .relaying(relay, bypassEnd: bypassEnd)
        relay.start()
        // Until its client's hello, the tunnel is silent again, holding the client's descriptor, the
        // upstream's and its mirrors'.
        if relay.check?.awaitsClientHello == true { host.awaitsHello(id, client: client, descriptors: 2 + dialled.mirrors.count) }
        // Keys for this tunnel's mirrors, made while its client builds the hello they will mirror.
        if !dialled.mirrors.isEmpty { EphemeralKeyStock.shared.fill(adding: dialled.mirrors.count) }
        // A reload while this CONNECT resolved, probed or connected: judged again now, as every
        // open tunnel was at the reload.
        if let admitted = machine.admitted, admitted.snapshot !== host.snapshot { rejudge(under: host.snapshot) }
    }

    /// What the stream check notes, logged with the open tunnel's record (made now rather than
    /// kept in the check's closure: a held tunnel keeps one copy, the machine's).
    private func streamNoted(_ note: StreamCheck.Note) {
        if case .clientHello = note { return host.spoke(id) }
        guard case .relaying(let admitted, let passage, let address) = machine.state else { return }
        let record = DecisionRecord(conn: id, client: client, .opened(admitted, passage, address: address))
        guard case .unconfirmed(let confirmation) = note else { return host.logStreamNote(note, record: record) }
        // Where the tunnel went (the parent, behind one), through the same hop.
        let settings = self.settings
        let hop = settings.upstreamProxy.map { ParentHop(parent: $0, target: admitted.authority) }
        host.confirm(confirmation, dialling: [address], hop: hop, connectTimeout: settings.connectTimeout, timeout: settings.probeTimeout,
                     record: record)
    }

    private func forward(_ head: [UInt8]) {
        guard let clientSide, let forwarder = host.forwarder(conn: id, client: client, side: clientSide, onEnd: { [weak self] end in
            guard let self else { return }
            switch end {
            case .finished: finish(.clientClosed)
            case .refused(let refusal): perform(machine.plainRefused(refusal))
            }
        }) else { return release() }
        work = .forwarding(forwarder)
        forwarder.transparent = transparent  // transparent mode: origin-form heads, lines with original_dst
        forwarder.received(head)
    }

    /// The close line of a session that got past its request, then the release (one reaped in a
    /// flood, or silent to its end, never gets here: `finish`).
    private func close(_ reason: CloseReason, _ record: DecisionRecord, relay: Relay?) {
        let closed = ClosedTunnel(record: record, bytesUp: relay?.bytesUp ?? 0, bytesDown: relay?.bytesDown ?? 0,
                                  duration: ContinuousClock.now - (openedAt ?? acceptedAt), stream: relay?.summary, relay: relay?.stage)
        if case .relay(.refused(let refusal)) = reason {
            host.ended(.streamRefused(refusal, closed))
        } else {
            host.ended(.closed(reason, closed))
        }
        release()
    }

    /// Takes a `max_tunnels` slot when the machine has admitted the CONNECT, and gives it back when
    /// the machine has left the stages that hold one.
    func syncTunnelSlot() {
        if machine.holdsTunnelSlot && !tunnelSlot {
            tunnelSlot = true
            host.takeTunnelSlotUnchecked()
        } else if !machine.holdsTunnelSlot && tunnelSlot {
            tunnelSlot = false
            host.giveBackTunnelSlot()
        }
    }

    /// Writes the refusal, then a lingering close: half-close our side once it is flushed and
    /// discard what the client still sends for a moment, so it reads the response instead of a reset.
    private func respondAndLinger(_ refusal: Refusal, host target: String?) {
        dropDialled()
        guard let clientSide else { return release() }
        // A redirected TLS client is answered in TLS (TransparentFirstFlight.refusalAlert).
        let response = transparent != nil && !transparentHTTP ? TransparentFirstFlight.refusalAlert : refusal.response(host: target)
        evbuffer_add(clientSide.output, response, response.count)
        clientSide.setWatermark(EV_READ, low: 0, high: 0)
        clientSide.route(to: self, read: sessionReadCB, write: sessionFlushedCB, event: sessionEventCB)
        clientSide.enable(EV_READ | EV_WRITE)
        work = .lingering(giveUp: Timer(loop: host.loop, after: 2) { [weak self] in self?.release() })
    }

    private func dropDialled() {
        dialled?.close()
        dialled = nil
    }

    /// Lets go of everything and leaves the proxy. Idempotent.
    func release() {
        if case .lingering = machine.state { machine.lingered() }
        let previous = work
        work = .none
        previous.cancel()
        syncTunnelSlot()
        dropDialled()
        clientSide = nil
        host.remove(self)
    }
}
