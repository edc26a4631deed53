import CLibevent
import Foundation
import PinPolicy
import TLSInspection

/// One client connection: a CONNECT request through the stages request → admission → resolve →
/// probe → verdict → tunnel → relay. Callbacks only translate libevent events into calls here;
/// `finish(_:)` is the one place a session ends, writes its refusal, logs its line and lets go.
///
/// Bound to its proxy's loop thread.
final class Session {
    enum Stage: String {
        case readingRequest, resolving, probing, connecting, relaying, closing, closed
    }

    /// How a session ends.
    enum End {
        /// The request was not a CONNECT pinproxy accepts (400, 405, 408, 431): `request_rejected`.
        case rejected(Refusal)
        /// A CONNECT refused, with its evidence: `tunnel_refused`.
        case refused(Refusal)
        /// A tunnel (or a request before its decision) closed: `tunnel_closed`.
        case closed(String)
    }

    unowned let proxy: Proxy
    let id: Int
    let client: SocketAddress
    /// Monotonic, so a wall-clock step neither ends a tunnel early nor skews `duration_ms`.
    let acceptedAt = ContinuousClock.now
    var stage = Stage.readingRequest

    // The request, and what was decided about it.
    private(set) var authority: Authority?
    private(set) var snapshot: PolicySnapshot?
    private(set) var rule: Rule?
    private(set) var address: SocketAddress?
    private(set) var tlsVersion = ""
    /// How the probed server proved it holds its key.
    private(set) var keyProof: KeyProof?
    private(set) var validation: ChainValidation?
    private(set) var evaluation: Evaluation?
    private(set) var verdict: Verdict?
    private var countedAsTunnel = false

    // I/O.
    var clientBev: OpaquePointer?
    var upstreamBev: OpaquePointer?
    private var timer: Timer?
    private var bypassTimer: Timer?
    private var resolveRequest: ResolveRequest?
    private var probeWaiter: ProbeHub.Waiter?
    private var connector: Connector?

    // Relay state (Session+Relay.swift).
    var bytesUp = 0
    var bytesDown = 0
    var lastActivity = ContinuousClock.now
    var eofFrom: Set<OpaquePointer> = []
    var shutDown: Set<OpaquePointer> = []
    var decidedAt: ContinuousClock.Instant?

    init(proxy: Proxy, id: Int, fd: Int32, client: SocketAddress) {
        self.proxy = proxy
        self.id = id
        self.client = client
        let options = Int32(BEV_OPT_CLOSE_ON_FREE.rawValue | BEV_OPT_DEFER_CALLBACKS.rawValue)
        clientBev = bufferevent_socket_new(proxy.loop.base, fd, options)
        guard let clientBev else {
            close(fd)
            return
        }
        setNoDelay(fd)
        bufferevent_setcb(clientBev, sessionReadCB, nil, sessionEventCB, Unmanaged.passUnretained(self).toOpaque())
        bufferevent_enable(clientBev, Int16(EV_READ))
        timer = Timer(loop: proxy.loop, after: proxy.snapshot.policy.proxy.headerTimeout) { [unowned self] in
            finish(.rejected(.headerTimeout))
        }
    }

    var settings: ProxySettings { (snapshot ?? proxy.snapshot).policy.proxy }
    var host: String? { authority.map { $0.target.description } }

    // MARK: request

    func onReadable(_ bev: OpaquePointer) {
        switch stage {
        case .readingRequest: readRequest()
        case .relaying: relayRead(from: bev)
        case .closing: drainDiscarded(bev)
        default: break  // early tunnel bytes wait in the input buffer (read watermark caps them)
        }
    }

    private func readRequest() {
        guard let input = bufferevent_get_input(clientBev) else { return }
        let limit = settings.maxRequestBytes
        let available = evbuffer_get_length(input)
        let window = min(available, limit + 4)
        guard let bytes = evbuffer_pullup(input, window) else { return }
        guard let headLength = ConnectRequest.headLength(in: UnsafeRawBufferPointer(start: bytes, count: window)) else {
            if available > limit { finish(.rejected(.tooLarge("the request head is over max_request_bytes (\(limit) bytes)"))) }
            return
        }
        guard headLength <= limit else {
            return finish(.rejected(.tooLarge("the request head is \(headLength) bytes, over max_request_bytes (\(limit))")))
        }
        let head = Array(UnsafeBufferPointer(start: bytes, count: headLength))
        evbuffer_drain(input, headLength)
        switch ConnectRequest.parse(head: head) {
        case .success(let request):
            begin(request.authority)
        case .failure(let problem):
            switch problem {
            case .methodNotAllowed: finish(.rejected(.methodNotAllowed(problem.detail)))
            case .tooManyHeaders: finish(.rejected(.tooLarge(problem.detail)))
            case .malformed, .badTarget: finish(.rejected(.badRequest(problem.detail)))
            }
        }
    }

    // MARK: admission

    private func begin(_ authority: Authority) {
        self.authority = authority
        let snapshot = proxy.snapshot  // this CONNECT is judged by the policy in force now
        self.snapshot = snapshot
        timer = nil
        // Early tunnel bytes may wait in the input buffer, but not without bound; reading on lets
        // us notice a client that hangs up while we resolve and probe.
        bufferevent_setwatermark(clientBev, Int16(EV_READ), 0, 64 * 1024)
        if proxy.stopping { return finish(.refused(.shuttingDown)) }

        // What the policy says comes first: a CONNECT it refuses is a 403 whatever the load, and
        // only one that may open a tunnel counts against max_tunnels.
        let admission = snapshot.policy.admit(authority, client: client.ip)
        if case .decided(.refused(let reason), _) = admission {
            verdict = .refused(reason)
            return finish(.refused(.policy(reason, detail: admissionDetail(reason))))
        }
        guard proxy.admitTunnel() else { return finish(.refused(.tunnelLimit)) }
        countedAsTunnel = true
        switch admission {
        case .decided(let decided, let rule):
            self.rule = rule
            self.verdict = decided
        case .probe(let rule):
            self.rule = rule
        }
        resolve()
    }

    private func admissionDetail(_ reason: RefusalReason) -> String {
        let p = settings
        switch reason {
        case .portNotAllowed: return "port \(authority!.port) is not in allowed_ports (\(p.allowedPorts.map(String.init).joined(separator: ", ")))"
        case .destinationProhibited: return "\(host!) is in deny_destinations (\(p.denyDestinations.entry(containingAnyFormOf: authority!.target.ipValue!)?.name ?? "?"))"
        case .clientNotAllowed: return "client \(client.ip) is not in allow_clients"
        case .unpinnedDenied: return "no rule pins \(host!) and defaults.unpinned is deny"
        default: return reason.rawValue
        }
    }

    // MARK: resolve

    private func resolve() {
        stage = .resolving
        guard let authority else { return }
        switch authority.target {
        case .ip(let ip):
            return resolved([ip])
        case .name(let name):
            if TestFault.dns.isInjected { return resolved(name, .failure(.failed(TestFault.detail))) }
            if let mapped = snapshot!.policy.resolve[name] { return resolved(mapped) }
            timer = Timer(loop: proxy.loop, after: settings.dnsTimeout) { [unowned self] in
                finish(.refused(.dnsTimeout))
            }
            resolveRequest = proxy.resolver.resolve(name) { [unowned self] result in
                resolveRequest = nil
                timer = nil
                resolved(name, result)
            }
        }
    }

    private func resolved(_ name: String, _ result: Result<[IPAddress], Resolver.Failure>) {
        switch result {
        case .success(let addresses): resolved(addresses)
        case .failure(.notFound(let why)): finish(.refused(.dnsError("\(name) did not resolve: \(why)")))
        case .failure(.failed(let why)): finish(.refused(.dnsError("resolving \(name) failed: \(why)")))
        }
    }

    /// Drops denied destinations (also by the IPv4 address a mapped, compatible or NAT64 address
    /// embeds), refuses loops, then probes or connects.
    private func resolved(_ all: [IPAddress]) {
        guard let authority else { return }
        let deny = settings.denyDestinations
        let allowed = all.filter { !deny.containsAnyForm(of: $0) }
        guard !allowed.isEmpty else {
            let names = all.map { "\($0) (\(deny.entry(containingAnyFormOf: $0)?.name ?? "?"))" }.joined(separator: ", ")
            return finish(.refused(.policy(.destinationProhibited, detail: "\(host!) resolved only to denied destinations: \(names)")))
        }
        if let loop = allowed.first(where: { proxy.isOwnAddress(SocketAddress(ip: $0, port: authority.port)) }) {
            return finish(.refused(.loop("\(authority) is pinproxy's own listening address \(SocketAddress(ip: loop, port: authority.port))")))
        }
        if verdict != nil {  // unpinned: no probe, tunnel to the first address that accepts
            return connectTunnel(allowed)
        }
        stage = .probing
        let serverName: String? = if case .name(let n) = authority.target { n } else { nil }
        let key = ProbeHub.Key(serverName: serverName, port: authority.port, addresses: allowed)
        probeWaiter = proxy.probes.probe(key, settings: settings) { [unowned self] result in
            probeWaiter = nil
            probed(result)
        }
    }

    // MARK: verdict

    private func probed(_ result: ProbeResult) {
        guard let authority, let rule, let snapshot else { return }
        tlsVersion = result.tlsVersion
        address = result.address
        let presented: [Certificate]
        switch result.outcome {
        case .failed(let refusal): return finish(.refused(refusal))
        case .chain(let certificates, let proof):
            presented = certificates
            keyProof = proof
        }
        let validation = snapshot.validate(presented, for: authority.target, trust: rule.trust, pins: rule.pins)
        let evaluation = snapshot.policy.evaluate(validation, rule: rule, target: authority.target, at: Date(),
                                                  debugBypassEnabled: proxy.debugBypassEnabled)
        self.validation = validation
        self.evaluation = evaluation
        self.verdict = evaluation.verdict
        if TestFault.evaluation.isInjected {
            verdict = nil
            return finish(.refused(.internalError("pin evaluation failed: \(TestFault.detail)")))
        }
        proxy.noteWarnings(evaluation, session: self)
        switch evaluation.verdict {
        case .refused(let reason):
            finish(.refused(.policy(reason, detail: refusalDetail(reason, evaluation))))
        case .allowed, .bypassed, .unpinned:
            // The tunnel goes to the address the probe verified, never a fresh resolution.
            connectTunnel([result.address!.ip])
        }
    }

    private func refusalDetail(_ reason: RefusalReason, _ evaluation: Evaluation) -> String {
        switch reason {
        case .pinMismatch: return "no certificate in the verified chain of \(host!) matches a pin of its rule"
        case .chainInvalid, .hostnameMismatch: return "the certificate chain of \(host!) is not valid: \(evaluation.chainFailure?.detail ?? reason.rawValue)"
        case .denylistedKey: return "the chain of \(host!) carries a deny-listed key"
        default: return reason.rawValue
        }
    }

    // MARK: tunnel

    private func connectTunnel(_ addresses: [IPAddress]) {
        stage = .connecting
        let port = authority!.port
        let total = addresses.count == 1 ? settings.connectTimeout : settings.connectTotalTimeout
        connector = Connector(loop: proxy.loop, addresses: addresses.map { SocketAddress(ip: $0, port: port) },
                              perAddress: settings.connectTimeout, total: total) { [unowned self] outcome in
            connector = nil
            switch outcome {
            case .failed(let refusal): finish(.refused(refusal))
            case .connected(let fd, let address): tunnelConnected(fd: fd, address: address)
            }
        }
    }

    private func tunnelConnected(fd: Int32, address: SocketAddress) {
        self.address = address
        let options = Int32(BEV_OPT_CLOSE_ON_FREE.rawValue | BEV_OPT_DEFER_CALLBACKS.rawValue)
        guard let upstream = bufferevent_socket_new(proxy.loop.base, fd, options) else {
            close(fd)
            return finish(.refused(.internalError("bufferevent_socket_new failed")))
        }
        upstreamBev = upstream
        let established = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)
        evbuffer_add(bufferevent_get_output(clientBev), established, established.count)
        decidedAt = .now
        proxy.logDecision(self)
        if case .bypassed(_, .debugBypass(let until)) = verdict {
            bypassTimer = Timer(loop: proxy.loop, after: max(0, until.timeIntervalSinceNow)) { [unowned self] in
                finish(.closed("debug_bypass_expired"))
            }
        }
        startRelay()
    }

    /// A timer that rearms itself until nothing moved for `idle_timeout`.
    func armIdleTimer() {
        let idle = settings.idleTimeout
        let remaining = idle - (ContinuousClock.now - lastActivity).seconds
        timer = Timer(loop: proxy.loop, after: max(0.05, remaining)) { [unowned self] in
            if (ContinuousClock.now - lastActivity).seconds >= idle { finish(.closed("idle_timeout")) } else { armIdleTimer() }
        }
    }

    // MARK: events

    func onEvent(_ bev: OpaquePointer, _ what: Int16, errno savedErrno: Int32) {
        if stage == .relaying { return relayEvent(bev, what, errno: savedErrno) }
        if stage == .closing { return release() }
        // Before a tunnel exists, any event on the client is a hang-up or an error.
        finish(.closed(what & Int16(BEV_EVENT_EOF) != 0 ? "client_closed" : "client_error"))
    }

    // MARK: the end

    /// Ends the session: cancels what is pending, writes the refusal if no response has started,
    /// logs the one line, and frees both sides in a fixed order.
    func finish(_ end: End) {
        guard stage != .closed && stage != .closing else { return }
        let previous = stage
        stage = .closed
        timer = nil
        bypassTimer = nil
        resolveRequest?.cancel()
        resolveRequest = nil
        probeWaiter?.cancel()
        probeWaiter = nil
        connector?.cancel()
        connector = nil
        if countedAsTunnel {
            countedAsTunnel = false
            proxy.tunnelEnded()
        }
        proxy.log(end, for: self, stageBefore: previous)

        if let upstreamBev {
            bufferevent_free(upstreamBev)
            self.upstreamBev = nil
        }
        switch end {
        case .rejected(let refusal), .refused(let refusal):
            respondAndClose(refusal)
        case .closed:
            release()
        }
    }

    /// Writes the refusal, then a lingering close: half-close our side once it is flushed and
    /// discard what the client still sends for a moment, so it reads the response instead of a reset.
    private func respondAndClose(_ refusal: Refusal) {
        guard let clientBev else { return release() }
        stage = .closing
        let response = refusal.response(host: host)
        evbuffer_add(bufferevent_get_output(clientBev), response, response.count)
        bufferevent_setwatermark(clientBev, Int16(EV_READ), 0, 0)
        bufferevent_setcb(clientBev, sessionReadCB, sessionFlushedCB, sessionEventCB, Unmanaged.passUnretained(self).toOpaque())
        bufferevent_enable(clientBev, Int16(EV_READ | EV_WRITE))
        timer = Timer(loop: proxy.loop, after: 2) { [unowned self] in release() }
    }

    func onFlushed(_ bev: OpaquePointer) {
        guard stage == .closing else { return relayWritten(to: bev) }
        shutdown(bufferevent_getfd(bev), Int32(SHUT_WR))
    }

    private func drainDiscarded(_ bev: OpaquePointer) {
        guard let input = bufferevent_get_input(bev) else { return }
        evbuffer_drain(input, evbuffer_get_length(input))
    }

    /// Frees the client side and lets the proxy drop the session.
    func release() {
        timer = nil
        if let clientBev {
            bufferevent_free(clientBev)
            self.clientBev = nil
        }
        if let upstreamBev {
            bufferevent_free(upstreamBev)
            self.upstreamBev = nil
        }
        stage = .closed
        proxy.remove(self)
    }

    deinit { proxy.sessionObjectFreed() }
}

extension Duration {
    var seconds: Double { Double(components.seconds) + Double(components.attoseconds) / 1e18 }
}

extension Target {
    var ipValue: IPAddress? {
        if case .ip(let a) = self { return a }
        return nil
    }
}

// The C trampolines: non-capturing, they find the session and hand the event over.
private func session(_ ctx: UnsafeMutableRawPointer?) -> Session {
    guard let ctx else { preconditionFailure("bufferevent callback without its session") }
    return Unmanaged<Session>.fromOpaque(ctx).takeUnretainedValue()
}

let sessionReadCB: bufferevent_data_cb = { bev, ctx in
    let s = session(ctx)
    withExtendedLifetime(s) { s.onReadable(bev!) }
}
let sessionFlushedCB: bufferevent_data_cb = { bev, ctx in
    let s = session(ctx)
    withExtendedLifetime(s) { s.onFlushed(bev!) }
}
let sessionEventCB: bufferevent_event_cb = { bev, what, ctx in
    let savedErrno = errno
    let s = session(ctx)
    withExtendedLifetime(s) { s.onEvent(bev!, what, errno: savedErrno) }
}
