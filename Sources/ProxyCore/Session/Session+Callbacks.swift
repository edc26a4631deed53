import CLibevent
import PinPolicy

// The C trampolines: non-capturing, they find the session and hand the event over. The callback may
// drop the last reference to the session, so it stays alive until they return.
private func session(_ ctx: UnsafeMutableRawPointer?) -> Session {
    guard let ctx else { preconditionFailure("bufferevent callback without its session") }
    return Unmanaged<Session>.fromOpaque(ctx).takeUnretainedValue()
}

let sessionReadCB: bufferevent_data_cb = { _, ctx in
    let s = session(ctx)
    withExtendedLifetime(s) { s.onReadable() }
}
let sessionFlushedCB: bufferevent_data_cb = { _, ctx in
    let s = session(ctx)
    withExtendedLifetime(s) { s.onFlushed() }
}
let sessionEventCB: bufferevent_event_cb = { _, what, ctx in
    let s = session(ctx)
    withExtendedLifetime(s) { s.onEvent(what) }
}

// The events libevent brings, turned into the machine's.
extension Session {
    /// What a client may send after its CONNECT before the tunnel opens, held until the relay
    /// passes it on (a ClientHello, even one with post-quantum key shares, is far smaller).
    static let earlyBytesCap = 64 * 1024

    func onReadable() {
        guard case .readingRequest = machine.state, let clientSide else { return heldBack() }
        if let transparent { return readTransparent(transparent, clientSide) }  // its first bytes stand for its CONNECT
        let head: [UInt8]
        switch RequestHead.take(from: clientSide.input, limit: settings.maxRequestBytes) {
        case .incomplete: return
        case .refused(let refusal): return perform(machine.requestRejected(refusal))
        case .read(let read): head = read
        }
        host.spoke(id)
        // Any other method is plain HTTP (forwarded, or refused with a reason, request by request).
        guard head.starts(with: "CONNECT ".utf8) else { return perform(machine.plainRequest(head)) }
        switch ConnectRequest.parse(head: head) {
        case .success(let request): connectRequested(request.authority, on: clientSide)
        case .failure(let problem): perform(machine.requestRejected(problem.refusal))
        }
    }

    /// Bytes that arrive while no head is awaited: discarded while a refusal lingers; else early
    /// tunnel bytes, which wait in the input buffer up to the cap. Reading stops there: libevent,
    /// finding its read callback left the input at the read watermark with reading on, calls it
    /// again (deferred), and again, a worker spinning at full speed until the probe ends. Nothing
    /// behind the cap could be read before the relay anyway (an EOF waits behind the unread
    /// bytes); the relay reads on.
    private func heldBack() {
        guard let clientSide else { return }
        if case .lingering = machine.state {
            evbuffer_drain(clientSide.input, evbuffer_get_length(clientSide.input))
        } else if evbuffer_get_length(clientSide.input) >= Self.earlyBytesCap {
            clientSide.disable(EV_READ)
        }
    }

    /// What a CONNECT asked for (or a transparent connection's ClientHello stands for), through the
    /// one admission: the machine decides, judged by the policy in force now.
    private func connectRequested(_ authority: Authority, on clientSide: BufferEvent) {
        // Early tunnel bytes may wait in the input buffer, but not without bound; reading on lets
        // us notice a client that hangs up while we resolve and probe.
        clientSide.setWatermark(EV_READ, low: 0, high: Self.earlyBytesCap)
        let snapshot = host.snapshot  // this CONNECT is judged by the policy in force now
        // The slot is taken before the machine decides (workers share max_tunnels: a check now and a
        // take later could let two workers both take the last one); the machine's answer keeps it
        // or gives it back (syncTunnelSlot).
        var slot = !host.stopping && host.takeTunnelSlot()
        // At max_tunnels, a CONNECT the policy admits takes the slot of a tunnel still without its
        // hello; one it refuses needs none (and closes nobody's tunnel).
        if !slot, !host.stopping, AdmissionGate.admit(authority, client: client.ip, policy: snapshot.policy, kind: .connect).refusal == nil {
            slot = host.reclaimTunnelSlot()
        }
        tunnelSlot = slot
        perform(machine.requestParsed(authority, snapshot: snapshot, stopping: host.stopping, tunnelAvailable: slot))
        syncTunnelSlot()
    }

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
            host.spoke(id)
            connectRequested(authority, on: clientSide)
        case .http(let headLength):  // a redirected plain port: forwarded as plain HTTP is (TransparentPlainHead)
            transparentHTTP = true
            let head = Array(UnsafeBufferPointer(start: bytes, count: headLength))
            evbuffer_drain(input, headLength)
            host.spoke(id)
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
}
