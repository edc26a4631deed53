import CLibevent
import Foundation
import PinPolicy
import TLSInspection

/// One client connection, driven through its `SessionMachine`: callbacks only turn libevent
/// events into machine events, and `perform` carries out what the machine answers. The I/O of the
/// current stage (a timer, a lookup, a probe waiter, a connector, the relay) is held in `work`, so
/// leaving a stage drops — and so cancels or frees — what it was waiting for.
///
/// Bound to its worker's loop thread.
final class Session {
    /// The I/O in flight for the machine's current stage.
    private enum Work {
        case none
        case readingRequest(headerTimeout: Timer)
        case resolving(ResolveRequest, deadline: Timer)
        case probing(ProbeHub.Waiter)
        case connecting(Connector)
        case relaying(Relay, bypassEnd: Timer?)
        case forwarding(PlainForwarder)
        case lingering(giveUp: Timer)

        /// Stops what is pending without its callback.
        func cancel() {
            switch self {
            case .resolving(let request, _): request.cancel()
            case .probing(let waiter): waiter.cancel()
            case .connecting(let connector): connector.cancel()
            case .relaying(let relay, _): relay.cancel()
            case .forwarding(let forwarder): forwarder.cancel()
            case .none, .readingRequest, .lingering: break
            }
        }
    }

    /// Kept so the worker (and its loop) outlives every session it holds.
    private let worker: Worker
    let id: Int
    let client: SocketAddress
    /// Monotonic, so a wall-clock step neither ends a tunnel early nor skews `duration_ms`.
    let acceptedAt = ContinuousClock.now
    private var machine: SessionMachine
    private var work = Work.none
    /// The client's bufferevent, until a tunnel's relay takes it (or the session ends).
    private var clientSide: BufferEvent?
    /// When the tunnel opened, for the close line's `duration_ms`.
    private var openedAt: ContinuousClock.Instant?

    /// Transparent mode: where the kernel redirected this connection from; nil for the proxy port.
    let transparent: TransparentOrigin?
    /// Transparent mode: the client's first bytes were an HTTP request (answered in HTTP, not a TLS alert).
    private var transparentHTTP = false

    init?(worker: Worker, id: Int, fd: Int32, client: SocketAddress, transparent: TransparentOrigin? = nil) {
        self.worker = worker
        self.id = id
        self.client = client
        self.transparent = transparent
        machine = SessionMachine(conn: id, client: client, original: transparent?.original) { [weak worker] in worker?.isOwnAddress($0) ?? false }
        worker.sessionObjectMade()  // balanced by deinit, which runs even when this init fails below
        guard let side = BufferEvent(loop: worker.loop, socket: fd) else { return nil }
        clientSide = side  // TCP_NODELAY: inherited from the listener (`Listener.tune`)
        side.route(to: self, read: sessionReadCB, write: nil, event: sessionEventCB)
        side.enable(EV_READ)
        work = .readingRequest(headerTimeout: Timer(loop: worker.loop, after: worker.snapshot.policy.proxy.headerTimeout) { [weak self] in
            guard let self else { return }
            // A 408 is for a client that began a request; one that never spoke is only closed.
            if sentNothing { return finish(.silent) }
            perform(machine.requestRejected(.headerTimeout))
        })
    }

    deinit { worker.sessionObjectFreed() }

    /// Has not sent a byte since it connected (bytes of an unfinished head wait in the input).
    private var sentNothing: Bool {
        guard case .readingRequest = machine.state, let clientSide else { return false }
        return evbuffer_get_length(clientSide.input) == 0
    }

    /// Still waiting for its (next) request head (shutdown closes these at once).
    var isReadingRequest: Bool {
        if case .readingRequest = machine.state { return true }
        if case .forwarding(let forwarder) = work { return forwarder.isBetweenRequests }  // kept alive, nothing in flight
        return false
    }

    private var settings: ProxySettings { (machine.admitted?.snapshot ?? worker.snapshot).policy.proxy }

    // MARK: events from libevent

    func onReadable() {
        guard case .readingRequest = machine.state, let clientSide else {
            guard let clientSide else { return }
            if case .lingering = machine.state {
                evbuffer_drain(clientSide.input, evbuffer_get_length(clientSide.input))
            } else if evbuffer_get_length(clientSide.input) >= Self.earlyBytesCap {
                // Early tunnel bytes wait in the input buffer, up to the cap. Reading stops there:
                // libevent, finding its read callback left the input at the read watermark with
                // reading on, calls it again (deferred), and again, a worker spinning at full
                // speed until the probe ends. Nothing behind the cap could be read before
                // the relay anyway (an EOF waits behind the unread bytes); the relay reads on.
                clientSide.disable(EV_READ)
            }
            return
        }
        if let transparent { return readTransparent(transparent, clientSide) }  // its first bytes stand for its CONNECT
        let input = clientSide.input
        if let first = evbuffer_pullup(input, 1), let wrong = WrongProtocol.detect(firstByte: first.pointee) {
            return perform(machine.requestRejected(wrong.refusal))
        }
        let limit = settings.maxRequestBytes
        let available = evbuffer_get_length(input)
        let window = min(available, limit + 4)
        guard let bytes = evbuffer_pullup(input, window) else { return }
        guard let headLength = ConnectRequest.headLength(in: UnsafeRawBufferPointer(start: bytes, count: window)) else {
            if available > limit { perform(machine.requestRejected(.tooLarge("the request head is over max_request_bytes (\(limit) bytes)"))) }
            return
        }
        guard headLength <= limit else {
            return perform(machine.requestRejected(.tooLarge("the request head is \(headLength) bytes, over max_request_bytes (\(limit))")))
        }
        let head = Array(UnsafeBufferPointer(start: bytes, count: headLength))
        evbuffer_drain(input, headLength)
        worker.spoke(self)
        // Any other method is plain HTTP (forwarded, or refused with a reason, request by request).
        guard head.starts(with: "CONNECT ".utf8) else { return perform(machine.plainRequest(head)) }
        switch ConnectRequest.parse(head: head) {
        case .success(let request):
            // Early tunnel bytes may wait in the input buffer, but not without bound; reading on
            // lets us notice a client that hangs up while we resolve and probe.
            clientSide.setWatermark(EV_READ, low: 0, high: Self.earlyBytesCap)
            admit(request.authority)
        case .failure(let problem):
            switch problem {
            case .methodNotAllowed: perform(machine.requestRejected(.methodNotAllowed(problem.detail)))
            case .tooManyHeaders: perform(machine.requestRejected(.tooLarge(problem.detail)))
            case .malformed, .badTarget: perform(machine.requestRejected(.badRequest(problem.detail)))
            }
        }
    }

    /// What a CONNECT asked for (or a transparent connection's ClientHello stands for), through the
    /// one admission: the machine decides, judged by the policy in force now.
    private func admit(_ authority: Authority) {
        let snapshot = worker.snapshot
        // The slot is taken before the machine decides (workers share max_tunnels: a check
        // now and a take later could let two workers both take the last one); the machine's
        // answer keeps it or gives it back (syncTunnelSlot).
        var slot = !worker.stopping && worker.takeTunnelSlot()
        // At max_tunnels, a CONNECT the policy admits takes the slot of a tunnel still without
        // its hello; one it refuses needs none (and closes nobody's tunnel).
        if !slot, !worker.stopping, AdmissionGate.admit(authority, client: client.ip, policy: snapshot.policy, kind: .connect).refusal == nil {
            slot = worker.reclaimTunnelSlot()
        }
        tunnelSlotTaken = slot
        perform(machine.requestParsed(authority, snapshot: snapshot, stopping: worker.stopping, tunnelAvailable: slot))
        syncTunnelSlot()
    }

    // MARK: transparent mode (issue 32; the reading is TransparentFirstFlight's)

    /// A redirected connection's first bytes stand for the CONNECT its client never wrote. A
    /// ClientHello is only looked at: it stays in the input, where the tunnel's stream check reads
    /// it as the client's first flight, exactly as a CONNECT client's hello after the `200`.
    private func readTransparent(_ origin: TransparentOrigin, _ clientSide: BufferEvent) {
        let input = clientSide.input
        let available = evbuffer_get_length(input)
        let window = min(available, TransparentFirstFlight.helloLimit)
        guard window > 0, let bytes = evbuffer_pullup(input, window) else { return }
        switch TransparentFirstFlight.read(UnsafeRawBufferPointer(start: bytes, count: window), origin: origin) {
        case .needMore:
            let limit = TransparentFirstFlight.limit(firstByte: bytes.pointee, maxRequestBytes: settings.maxRequestBytes)
            if available >= limit { perform(machine.requestRejected(.tooLarge("the redirected connection's first flight is over \(limit) bytes"))) }
        case .refused(let refusal):
            perform(machine.requestRejected(refusal))
        case .tls(let authority):
            worker.spoke(self)
            clientSide.setWatermark(EV_READ, low: 0, high: Self.earlyBytesCap)
            admit(authority)
        case .http(let headLength):  // a redirected plain port: forwarded as plain HTTP is (TransparentPlainHead)
            transparentHTTP = true
            let head = Array(UnsafeBufferPointer(start: bytes, count: headLength))
            evbuffer_drain(input, headLength)
            worker.spoke(self)
            perform(machine.plainRequest(head))
        }
    }

    func onFlushed() {
        // Only once the refusal is out: a half-close before would cut it off.
        guard case .lingering = machine.state, let clientSide, evbuffer_get_length(clientSide.output) == 0 else { return }
        clientSide.shutdownWrite()
    }

    /// Before the relay owns the client side, any event on it is a hang-up or an error.
    func onEvent(_ what: Int16) {
        if case .lingering = machine.state { return release() }
        finish(what & Int16(BEV_EVENT_EOF) != 0 ? .clientClosed : .clientError)
    }

    /// A reload: an open tunnel is judged again under the new snapshot on the chain already
    /// verified for it (no new handshake); one the new policy refuses is closed.
    func rejudge(under fresh: PolicySnapshot) {
        if case .forwarding(let forwarder) = work { return forwarder.policyChanged(to: fresh.policy) }
        guard case .relaying(let relay, _) = work, case .relaying(let admitted, let passage, let address) = machine.state else { return }
        var probe: Judgement?
        if case .pinned(_, let judgement, _) = passage { probe = judgement }
        let judged = relay.summary?.judged
        let chain = judged?.der ?? probe?.presentedDER
        let delivered = judged?.delivered ?? probe?.delivered ?? .none
        // Through a parent proxy the address is the parent's: `deny_destinations` judged the target.
        let viaParent = admitted.snapshot.policy.proxy.upstreamProxy != nil
        let verdict = fresh.rejudge(admitted.authority, client: client.ip, address: viaParent ? nil : address.ip, chain: chain,
                                    delivered: delivered, at: Date(), debugBypassEnabled: worker.debugBypassEnabled)
        guard case .closes(let cause) = verdict else {
            relay.check?.policyChanged(to: fresh)
            return
        }
        relay.abortOnClose()
        finish(.policyReload(cause))
    }

    /// Ends the session without a refusal: shutdown, a hang-up, the relay's end.
    func finish(_ reason: CloseReason) {
        guard reason == .reaped || sentNothing else { return perform(machine.ended(reason)) }
        // One of thousands in a flood (the worker's summary line and the counters speak for them),
        // or a connection that never asked for anything: no line of its own, as HAProxy's
        // `dontlognull`. A reset frees its socket at once, without a FIN's round trip and the
        // orphaned socket that waits for it.
        _ = machine.ended(reason)
        if reason != .reaped { worker.tally.withLock { $0.counters.silentClosed += 1 } }
        clientSide?.abortOnClose()
        release()
    }

    /// Closes a silent connection to make room in a flood, whatever it is doing: one that is
    /// writing an answer (a 408, a TLS alert for a TLS-speaking client) is closed too, or a flood of
    /// one-byte connections would keep every descriptor for its answers' linger.
    func reap() {
        if case .lingering = machine.state { return release() }
        // A tunnel logged its decision: it says how it ended.
        if case .relaying = machine.state { return finish(.reclaimed) }
        finish(.reaped)
    }

    /// A pinned tunnel whose client has not completed its ClientHello since its `200`.
    var awaitsClientHello: Bool {
        if case .relaying(let relay, _) = work { return relay.check?.awaitsClientHello == true }
        return false
    }

    /// What this connection is doing while it has not spoken (see `SilentConnections.Activity`):
    /// bytes in the kernel that the loop has not read yet are arriving (maybe a real client's
    /// CONNECT); part of a head already read is trickling; nothing, or a refusal lingering, is idle.
    var silentActivity: SilentConnections.Activity {
        if case .lingering = machine.state { return .answered }
        if case .relaying(let relay, _) = work { return relay.clientActivity }
        guard isReadingRequest, let clientSide else { return .idle }  // its first head, or the next on a kept connection
        var byte: UInt8 = 0
        if recv(clientSide.fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT)) > 0 { return .arriving }
        return evbuffer_get_length(clientSide.input) > 0 ? .trickling : .idle
    }

    // MARK: carrying out the machine's actions

    /// Carries out one action. Leaving a stage drops its pending work first; a callback that
    /// arrives synchronously (evdns, a connect that fails at once) moves the machine on inside the
    /// call that started it, so work is kept only if the machine is still in its stage.
    private func perform(_ action: SessionMachine.Action) {
        if case .none = action { return }
        let previous = work
        work = .none
        previous.cancel()
        syncTunnelSlot()
        switch action {
        case .none:
            break
        case .reject(let refusal, let record):
            finish(.rejected(refusal, record))
            respondAndLinger(refusal, host: nil)
        case .refuse(let refusal, let record):
            if let evaluation = record.evaluation { worker.noteWarnings(evaluation, record: record) }
            finish(.refused(refusal, record))
            // No refusal is cached: the next CONNECT looks at the server again.
            if record.validation != nil, let authority = record.authority { worker.forgetProbe(authority) }
            respondAndLinger(refusal, host: record.authority?.target.description)
        case .lookUp(let name):
            let deadline = Timer(loop: worker.loop, after: settings.dnsTimeout) { [weak self] in self?.dnsTimedOut() }
            let request = worker.resolver.resolve(name) { [weak self] result in self?.resolvedName(result) }
            if case .resolving = machine.state, case .none = work { work = .resolving(request, deadline: deadline) }
        case .probe(let key):
            // A rule without mirrors leaves TLS 1.3 to the probe: it is then made for this CONNECT.
            var cacheable = true
            if case .probing(_, let rule) = machine.state { cacheable = rule.mirrorChecks > 0 }
            let waiter = worker.probe(key, settings: settings, cacheable: cacheable) { [weak self] result in
                guard let self else { return }
                perform(machine.probed(result, at: Date(), debugBypassEnabled: worker.debugBypassEnabled))
            }
            if case .probing = machine.state, case .none = work { work = .probing(waiter) }
        case .connect(let addresses):
            let authority = machine.admitted!.authority
            let settings = self.settings  // read once: each read copies the snapshot's ProxySettings
            let total = addresses.count == 1 ? settings.connectTimeout : settings.connectTotalTimeout
            // Behind a parent proxy the tunnel is a CONNECT on the parent, like the probe was.
            let hop = settings.upstreamProxy.map { ParentHop(parent: $0, target: authority) }
            let dialled = hop.map { [$0.parent.address] } ?? addresses.map { SocketAddress(ip: $0, port: authority.port) }
            let perAddress = settings.connectTimeout, deadline = hop == nil ? total : settings.connectTotalTimeout
            // A pinned tunnel's mirror connections start in the same turn, in random order with
            // the tunnel's: an interceptor sees look-alike connections arrive together.
            var mirrorCount = 0
            if case .connecting(_, .pinned(let rule, _, _)) = machine.state { mirrorCount = rule.mirrorChecks }  // a probe's chain was judged: pinned
            if mirrorCount > 0, let refusal = worker.reserveMirrors(mirrorCount, for: client) { return perform(machine.connectFailed(refusal)) }
            var mirrors: [MirrorConnection] = []
            let tunnelAt = Int.random(in: 0...mirrorCount)
            var connector: Connector?
            for index in 0...mirrorCount {
                guard index == tunnelAt else {
                    let mirror = MirrorConnection(loop: worker.loop, addresses: dialled, perAddress: perAddress, total: deadline, through: hop)
                    if mirror.ended == nil { mirror.ticket = worker.mirrorTicket(for: client) }  // not one that failed at once
                    mirrors.append(mirror)
                    continue
                }
                connector = Connector(loop: worker.loop, addresses: dialled, perAddress: perAddress, total: deadline, through: hop) { [weak self] outcome in
                    guard let self else { return }
                    switch outcome {
                    case .failed(let refusal): perform(machine.connectFailed(refusal))
                    case .connected(let fd, let address): tunnelConnected(fd: fd, address: address)
                    }
                }
            }
            if case .connecting = machine.state, case .none = work, let connector {
                work = .connecting(connector)
                pendingMirrors = mirrors
            } else {
                for mirror in mirrors { mirror.close() }
            }
        case .open(let record, let decision):
            openTunnel(record, decision)
        case .forward(let head):
            guard let clientSide else { return release() }
            let forwarder = PlainForwarder(worker: worker, conn: id, client: client, side: clientSide) { [weak self] end in
                guard let self else { return }
                switch end {
                case .finished: finish(.clientClosed)
                case .refused(let refusal): perform(machine.plainRefused(refusal))
                }
            }
            work = .forwarding(forwarder)
            forwarder.transparent = transparent  // transparent mode: origin-form heads, lines with original_dst
            forwarder.received(head)
        case .answer(let refusal):
            respondAndLinger(refusal, host: nil)
        case .release:
            release()
        case .close(let reason, let record):
            var relay: Relay?
            if case .relaying(let r, _) = previous { relay = r }
            let closed = ClosedTunnel(record: record, bytesUp: relay?.bytesUp ?? 0, bytesDown: relay?.bytesDown ?? 0,
                                      duration: ContinuousClock.now - (openedAt ?? acceptedAt), stream: relay?.summary, relay: relay?.stage)
            if case .relay(.refused(let refusal)) = reason {
                finish(.streamRefused(refusal, closed))
            } else {
                finish(.closed(reason, closed))
            }
            release()
        }
    }

    private func dnsTimedOut() { perform(machine.resolveTimedOut()) }
    private func resolvedName(_ result: Result<[IPAddress], Resolver.Failure>) { perform(machine.resolved(result)) }

    /// Takes a `max_tunnels` slot when the machine has admitted the CONNECT, and gives it back when
    /// the machine has left the stages that hold one.
    private func syncTunnelSlot() {
        if machine.holdsTunnelSlot && !tunnelSlotTaken {
            tunnelSlotTaken = true
            worker.takeTunnelSlotUnchecked()
        } else if !machine.holdsTunnelSlot && tunnelSlotTaken {
            tunnelSlotTaken = false
            worker.giveBackTunnelSlot()
        }
    }

    private var tunnelSlotTaken = false

    private func tunnelConnected(fd: Int32, address: SocketAddress) {
        guard let upstream = BufferEvent(loop: worker.loop, socket: fd) else {
            return perform(machine.connectFailed(.internalError("bufferevent_socket_new failed")))
        }
        pendingUpstream = upstream
        // The 200 waits for the mirror connections too: an interceptor that completed one connect
        // and held the others would otherwise learn from the client's hello which was the tunnel's.
        let waiting = pendingMirrors.filter { !$0.settled }
        guard waiting.isEmpty else {
            for mirror in waiting { mirror.onSettled = { [weak self] in self?.mirrorSettled(address) } }
            return
        }
        perform(machine.connected(to: address))
    }

    private func mirrorSettled(_ address: SocketAddress) {
        guard pendingUpstream != nil, pendingMirrors.allSatisfy(\.settled), case .connecting = machine.state else { return }
        perform(machine.connected(to: address))
    }

    private var pendingUpstream: BufferEvent?
    /// The mirror connections made with the tunnel's, until the stream check takes them.
    private var pendingMirrors: [MirrorConnection] = []

    private func openTunnel(_ record: DecisionRecord, _ decision: TunnelDecision) {
        guard let clientSide, let upstream = pendingUpstream, case .opened(let admitted, let passage, _) = record.stage else {
            preconditionFailure("a tunnel without both sides")
        }
        pendingUpstream = nil
        worker.tally.withLock { $0.counters.count(decision) }
        if transparent == nil { sendEstablished(on: clientSide) }  // a redirected client asked nothing of a proxy
        openedAt = .now
        // The judgement's warnings and the rotation book, after the 200 (a refusal notes them on its
        // own way out), before the decision line as they always came.
        if case .pinned(let rule, let judgement, _) = passage {
            worker.noteWarnings(judgement.evaluation, record: DecisionRecord(conn: id, client: client, .judged(admitted, rule, judgement)))
        }
        logDecision(record, decision)
        // A pinned rule's tunnel is checked against the chain its probe judged.
        let pinning: StreamCheck.Context.Pinning = switch passage {
        case .pinned(let rule, let probe, _): .pinned(rule: rule, probe: probe)
        case .unpinned: .unpinned
        }
        let settings = self.settings  // read once: each read copies the snapshot's ProxySettings
        var context = StreamCheck.Context(authority: admitted.authority, snapshot: admitted.snapshot, pinning: pinning,
                                          debugBypassEnabled: worker.debugBypassEnabled, keyLog: worker.keyLog)
        context.quarantine = worker.quarantine
        context.seenHellos = worker.seenHellos
        context.deadline = .init(loop: worker.loop, seconds: settings.probeTimeout)
        context.mirrorsOff = context.rule?.mirrorChecks == 0
        if !pendingMirrors.isEmpty {
            context.mirrors = .init(connections: pendingMirrors, loop: worker.loop, timeout: settings.probeTimeout)
        }
        pendingMirrors = []
        let check = StreamCheck(context, ledger: worker.resumptions)
        check.notify = { [weak self] note in self?.streamNoted(note) }
        // The relay owns the client's bufferevent from here: it frees it once the fast relay has the socket.
        self.clientSide = nil
        let mirrorCount = context.mirrors?.connections.count ?? 0
        let relay = Relay(loop: worker.loop, client: clientSide, upstream: upstream, idleTimeout: settings.idleTimeout,
                          helloTimeout: settings.clientHelloTimeout, check: check, method: settings.relay) { [weak self] end in
            guard let self else { return }
            finish(.relay(end))
        }
        var bypassEnd: Timer?
        if case .bypassed(_, .debugBypass(let until)) = decision {
            bypassEnd = Timer(loop: worker.loop, after: max(0, until.timeIntervalSinceNow)) { [weak self] in self?.finish(.debugBypassExpired) }
        }
        work = .relaying(relay, bypassEnd: bypassEnd)
        relay.start()
        // Until its client's hello, the tunnel is silent again, holding the client's descriptor, the
        // upstream's and its mirrors'.
        if relay.check?.awaitsClientHello == true { worker.awaitsHello(id, client: client, descriptors: 2 + mirrorCount) }
        // Keys for this tunnel's mirrors, made while its client builds the hello they will mirror.
        if let mirrors = context.mirrors { EphemeralKeyStock.shared.fill(adding: mirrors.connections.count) }
        // A reload while this CONNECT resolved, probed or connected: judged again now, as every
        // open tunnel was at the reload.
        if let admitted = machine.admitted, admitted.snapshot !== worker.snapshot { rejudge(under: worker.snapshot) }
    }

    /// What the stream check notes, logged with the open tunnel's record (made now rather than
    /// kept in the check's closure: a held tunnel keeps one copy, the machine's).
    private func streamNoted(_ note: StreamCheck.Note) {
        if case .clientHello = note { return worker.spoke(id) }
        guard case .relaying(let admitted, let passage, let address) = machine.state else { return }
        let record = DecisionRecord(conn: id, client: client, .opened(admitted, passage, address: address))
        guard case .unconfirmed(let confirmation) = note else { return worker.logStreamNote(note, record: record) }
        // Where the tunnel went (the parent, behind one), through the same hop.
        let settings = self.settings
        let hop = settings.upstreamProxy.map { ParentHop(parent: $0, target: admitted.authority) }
        worker.confirm(confirmation, dialling: [address], hop: hop, connectTimeout: settings.connectTimeout, timeout: settings.probeTimeout,
                       record: record)
    }

    /// The `200`, straight to the socket when nothing waits before it (always, at this point): the
    /// client has it before the decision line is built (a third of a warm pinned CONNECT's
    /// instructions), not after the loop's next turn. What the socket does not take at once goes
    /// through the bufferevent as before.
    private func sendEstablished(on side: BufferEvent) {
        let established = Self.established
        var sent = 0
        if evbuffer_get_length(side.output) == 0 {
            sent = max(0, established.withUnsafeBytes { send(side.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) })
        }
        if sent < established.count { evbuffer_add(side.output, established.withUnsafeBytes { $0.baseAddress! + sent }, established.count - sent) }
    }

    private static let established = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)

    /// What a client may send after its CONNECT before the tunnel opens, held until the relay
    /// passes it on (a ClientHello, even one with post-quantum key shares, is far smaller).
    private static let earlyBytesCap = 64 * 1024

    /// The tunnel opened: its decision line (`tunnel_allowed`, `tunnel_bypassed`, `tunnel_unpinned`),
    /// built only when its level is written. Counted before the `200`.
    private func logDecision(_ record: DecisionRecord, _ decision: TunnelDecision) {
        guard SessionLog.level(of: decision) >= worker.logger.logLevel else { return }
        var line = SessionLog.decision(record, decision)
        line["worker"] = .int(worker.index)  // which loop carries the tunnel (its close line comes from the same one)
        worker.logger.emit(line)
    }

    /// The session's one end line: counted from what it says, then logged (built only when its
    /// level is written). Every end that has a line comes through here, once.
    private func finish(_ end: SessionEnd) {
        worker.tally.withLock { $0.counters.count(end) }
        worker.logger.emitEnd(end)
    }

    /// Writes the refusal, then a lingering close: half-close our side once it is flushed and
    /// discard what the client still sends for a moment, so it reads the response instead of a reset.
    private func respondAndLinger(_ refusal: Refusal, host: String?) {
        pendingUpstream = nil
        dropMirrors()
        guard let clientSide else { return release() }
        // A redirected TLS client is answered in TLS (TransparentFirstFlight.refusalAlert).
        let response = transparent != nil && !transparentHTTP ? TransparentFirstFlight.refusalAlert : refusal.response(host: host)
        evbuffer_add(clientSide.output, response, response.count)
        clientSide.setWatermark(EV_READ, low: 0, high: 0)
        clientSide.route(to: self, read: sessionReadCB, write: sessionFlushedCB, event: sessionEventCB)
        clientSide.enable(EV_READ | EV_WRITE)
        work = .lingering(giveUp: Timer(loop: worker.loop, after: 2) { [weak self] in self?.release() })
    }

    private func dropMirrors() {
        for mirror in pendingMirrors { mirror.close() }
        pendingMirrors = []
    }

    /// Lets go of everything and leaves the proxy. Idempotent.
    func release() {
        if case .lingering = machine.state { machine.lingered() }
        let previous = work
        work = .none
        previous.cancel()
        syncTunnelSlot()
        pendingUpstream = nil
        dropMirrors()
        clientSide = nil
        worker.remove(self)
    }
}
