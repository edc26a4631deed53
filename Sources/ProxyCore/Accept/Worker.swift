import CLibevent
import Foundation
import Logging
import PinPolicy

/// One worker loop (`proxy.workers`): a thread with its own `EventLoop`, the sessions the
/// supervisor handed it, their resolver, probes and verification cache, and its counters. Sessions
/// talk to their worker only. Everything else reaches a worker through its `mailbox`; what workers
/// share (the `max_tunnels` budget, the TLS 1.2 resumption ledger, the rule-expiry book, the key-log
/// intake) sits behind small locked types.
final class Worker: @unchecked Sendable {
    /// What the supervisor gives every worker; fixed for the process's life.
    struct Shared {
        let logger: Logger
        let debugBypassEnabled: Bool
        /// The listeners' addresses (a tunnel to one of them would loop back to us).
        let boundAddresses: [SocketAddress]
        let budget: TunnelBudget
        let resumptions: ResumptionLedger
        let expiries: RuleExpiryBook
        /// Rotation warnings, once per host a day across all workers.
        let rotation: RotationWatch
        let keyLogIntake: KeyLogIntake?
        /// The host:ports where a check caught an interception.
        let quarantine: Quarantine
        /// The host:ports whose cached probe chains no worker may use any more (a refusal on one).
        let forgottenChains = ForgottenChains()
        /// The randoms of the ClientHellos pinned tunnels carried, so that a replayed one is refused.
        let seenHellos = SeenHellos()
        /// How many workers share the accepted connections.
        let workerCount: Int
        /// Where the transparent listeners are bound (`proxy.transparent_listen`).
        var transparentListeners: [SocketAddress] = []
    }

    /// A worker's counters as the supervisor reads them for `stats`; written by the worker under
    /// the lock, so a read from another thread sees a consistent set.
    struct Tally {
        var counters = Counters()
        var sessions = 0
        var probes = 0
        var probeCacheHits = 0
        var probeLatency = ProbeLatency()
    }

    let index: Int
    let loop: EventLoop
    let mailbox: Mailbox
    private let shared: Shared
    private(set) var snapshot: PolicySnapshot
    let tally = Locked(Tally())
    private(set) lazy var resolver = Resolver(loop: loop, settings: snapshot.policy.proxy.dns, deadline: snapshot.policy.proxy.dnsTimeout)
    private lazy var probes: ProbeHub = {
        let hub = ProbeHub(loop: loop, forgotten: shared.forgottenChains)
        hub.probeEnded = { [weak self, weak hub] in
            guard let self, let hub else { return }
            let latency = hub.latency
            tally.withLock { $0.probeLatency = latency }
        }
        return hub
    }()
    /// The key-log intake as this worker's tunnels see it (nil without `proxy.keylog`).
    let keyLog: WorkerKeyLog?
    private var sessions: [Int: Session] = [:]
    /// Sessions waiting for a request head (their first, or the next on a kept plain-HTTP
    /// connection), and which to close in a flood.
    private var silent = SilentConnections(limit: Worker.silentLimit(workers: 1))
    /// This worker's pinned tunnels still without their client's hello, oldest first.
    private var helloWaiters = HelloWaiters()
    /// The mirror connections this worker's tunnels hold.
    private let mirrorBudget = MirrorBudget(limit: Worker.silentLimit(workers: 1))
    /// Silent connections closed since the last `silent_connections_reaped` line, and from where.
    private var reapLog = LogThrottle(interval: .seconds(10))
    private var reapedSinceLine = 0
    private(set) var stopping = false
    private var drainTimer: Timer?
    /// Sessions freed since memory was last handed back to the system.
    private var freedSinceTrim = 0
    private var trimTimer: Timer?
    /// Confirming looks in flight, by host:port (`confirm`).
    private var confirmingLooks: [Authority: ConfirmingLook] = [:]
    /// Signalled as the thread's body ends (its loop is over); `join` then waits for the thread itself.
    private let exited = DispatchSemaphore(value: 0)
    /// A plain pthread rather than Foundation's `Thread`, so the supervisor can join it: the exit
    /// must wait until each thread's own teardown (OpenSSL's per-thread state) has run.
    private var thread: pthread_t?

    init(index: Int, snapshot: PolicySnapshot, shared: Shared) {
        self.index = index
        self.snapshot = snapshot
        self.shared = shared
        let loop = EventLoop()
        let mailbox = Mailbox(loop: loop)
        self.loop = loop
        self.mailbox = mailbox
        keyLog = shared.keyLogIntake.map { WorkerKeyLog(intake: $0, loop: loop, mailbox: mailbox) }
    }

    /// Starts the thread; `finished` runs on it once the loop has ended (drained or stopped).
    func start(finished: @escaping @Sendable (Worker) -> Void) {
        thread = LoopThread.start(stackSize: 8 << 20) { [self] in
            trimAfterBursts()
            loop.run()
            drainTimer = nil
            trimTimer = nil
            for session in Array(sessions.values) { session.release() }
            for job in mailbox.shut() { job() }  // posted before the loop ended: each still runs
            finished(self)
            exited.signal()
        }
    }

    /// Waits (bounded) until the worker's loop has ended, then joins its thread; false (and no
    /// join) when the loop did not end in time.
    func join(timeout: Double) -> Bool {
        guard exited.wait(timeout: .now() + timeout) == .success else { return false }
        if let thread { pthread_join(thread, nil) }
        thread = nil
        return true
    }

    var logger: Logger { shared.logger }
    var debugBypassEnabled: Bool { shared.debugBypassEnabled }
    var resumptions: ResumptionLedger { shared.resumptions }
    var quarantine: Quarantine { shared.quarantine }
    var seenHellos: SeenHellos { shared.seenHellos }

    // MARK: from the supervisor (on this worker's thread, through the mailbox)

    /// Descriptors the supervisor has accepted for this worker that it has not taken yet.
    private let handOvers = Locked(0)
    var waitingHandOvers: Int { handOvers.withLock { $0 } }

    /// From the supervisor's thread: posts an accepted connection to this worker. Returns how many
    /// now wait for it (the supervisor pauses accepting when workers fall behind).
    func handOver(fd: Int32, client: SocketAddress, id: Int) -> Int {
        let waiting = handOvers.withLock { count -> Int in
            count += 1
            return count
        }
        if !mailbox.post({ [self] in
            handOvers.withLock { $0 -= 1 }
            adopt(fd: fd, client: client, id: id)
        }) {
            handOvers.withLock { $0 -= 1 }
            close(fd)
        }
        return waiting
    }

    /// A connection the supervisor accepted (and found in `allow_clients`).
    private func adopt(fd: Int32, client: SocketAddress, id: Int) {
        guard !stopping else {
            close(fd)
            return
        }
        let transparent = TransparentOrigin.of(fd, listeners: shared.transparentListeners)  // nil: the proxy port
        guard let session = Session(worker: self, id: id, fd: fd, client: client, transparent: transparent) else { return }
        sessions[id] = session
        tally.withLock { $0.sessions = sessions.count }
        admitSilent(id, client: client)
    }

    /// A kept plain-HTTP connection waits for its next request: silent again (see `noteSilence`).
    func silentAgain(_ id: Int, client: SocketAddress) {
        guard sessions[id] != nil else { return }
        admitSilent(id, client: client)
    }

    /// A pinned tunnel waits for its client's ClientHello after the `200`: silent again, holding
    /// `descriptors` (see `SilentConnections`), and the first to give up its room.
    func awaitsHello(_ id: Int, client: SocketAddress, descriptors: Int) {
        guard sessions[id] != nil else { return }
        helloWaiters.arrived(id, client: SilentConnections.Client(client.ip))
        admitSilent(id, client: client, weight: descriptors)
    }

    /// The oldest tunnel still without its client's hello (of `client`, when given). Reaped, it
    /// leaves every book as any session does (`remove`).
    private func oldestHelloWaiter(of client: SilentConnections.Client? = nil) -> Session? {
        helloWaiters.oldest(of: client).flatMap { sessions[$0] }
    }

    /// Puts a connection in the book of silent ones, closing the idlest if there are too many.
    private func admitSilent(_ id: Int, client: SocketAddress, weight: Int = 1) {
        silent.setLimit(Self.silentLimit(workers: shared.workerCount))
        let victims = silent.arrived(id, from: client.ip, weight: weight) { [sessions] candidate in sessions[candidate]?.silentActivity ?? .idle }
        guard !victims.isEmpty else { return }
        let busiest = sessions[victims[0]]?.client.ip ?? client.ip
        for victim in victims { sessions[victim]?.reap() }
        tally.withLock { $0.counters.count(CloseCode.reaped.entry, times: victims.count) }
        reapedSinceLine += victims.count
        if let suppressed = reapLog.note(at: ContinuousClock.now) {
            logger.emit(LogRecord(.warning, "silent_connections_reaped", [
                ("reaped", .int(reapedSinceLine)), ("silent", .int(silent.weight)), ("limit", .int(silent.limit)),
                ("client", .string(busiest.description)), ("worker", .int(index)), ("suppressed", .int(suppressed)),
                ("detail", .string("more connections than the limit have sent no request; the oldest were closed to keep descriptors for clients that speak")),
            ]))
            reapedSinceLine = 0
        }
    }

    /// The most connections one worker lets wait for their first request head: a quarter of the
    /// descriptor limit (RLIMIT_NOFILE, read each time: an operator may change it while pinproxy
    /// runs), shared out over the workers. The other three quarters are the reserve of the
    /// connections that have spoken: tunnels, probes, plain-HTTP exchanges, the log.
    static func silentLimit(workers: Int) -> Int {
        var limit = rlimit()
        let descriptors = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0 ? Int(clamping: limit.rlim_cur) : 1024
        return max(8, descriptors / 4 / max(1, workers))
    }

    /// The session sent its (first, or next) request head: it no longer counts as silent.
    func spoke(_ session: Session) { spoke(session.id) }
    func spoke(_ id: Int) {
        silent.left(id)
        helloWaiters.left(id)
    }

    /// A reload: the new snapshot for the CONNECTs to come, and every open tunnel judged again
    /// under it. Returns how many were checked and how many it closed.
    func apply(_ fresh: PolicySnapshot) -> (checked: Int, closed: Int) {
        snapshot = fresh
        if let settings = fresh.policy.proxy.keylog {
            keyLog?.waitSeconds = settings.wait
            keyLog?.intake.wait = settings.wait
        }
        resolver.giveUpAfter(fresh.policy.proxy.dnsTimeout)
        probes.forgetAll()  // a chain seen under the old policy is looked at again under the new one
        let open = Array(sessions.values)
        let before = tally.withLock { $0.counters.closedByReload }
        for session in open { session.rejudge(under: fresh) }
        return (open.count, tally.withLock { $0.counters.closedByReload } - before)
    }

    /// Stops taking requests, lets tunnels drain up to `drain_timeout`, then closes the rest; the
    /// loop ends when the last session has gone.
    func beginStop() {
        guard !stopping else { return }
        stopping = true
        for session in Array(sessions.values) where session.isReadingRequest { session.finish(.shutdown) }
        if sessions.isEmpty { return loop.stop() }
        drainTimer = Timer(loop: loop, after: snapshot.policy.proxy.drainTimeout) { [weak self] in
            guard let self else { return }
            for session in Array(sessions.values) { session.finish(.shutdown) }
            for session in Array(sessions.values) { session.release() }  // those still writing a refusal
            loop.stop()
        }
    }

    // MARK: for sessions

    /// Takes a `max_tunnels` slot from the budget every worker shares.
    func takeTunnelSlot() -> Bool { shared.budget.take(limit: snapshot.policy.proxy.maxTunnels) }

    /// No slot was left for a CONNECT the policy admits: this worker's oldest tunnel whose client
    /// has sent no ClientHello since its `200` gives up its slot, so that a flood of CONNECTs that
    /// never speak does not take the slots of clients that do. (Only this worker's: the others'
    /// are on their own threads.)
    func reclaimTunnelSlot() -> Bool {
        guard let session = oldestHelloWaiter(), session.awaitsClientHello else { return false }
        // The slot passes from that tunnel (a relaying session holds one) to this CONNECT: taken
        // past the limit first, then given back as the tunnel closes, so that no other worker's
        // CONNECT takes it in between.
        _ = shared.budget.take(limit: .max)
        session.reap()
        return true
    }

    /// Room for `count` mirror connections of `client`: this worker's oldest tunnels still without
    /// their client's hello (of that client, when it is the one over its share) are closed for it
    /// first. Nil when there is room; else the refusal.
    func reserveMirrors(_ count: Int, for client: SocketAddress) -> Refusal? {
        mirrorBudget.setLimit(Self.silentLimit(workers: shared.workerCount))
        let key = SilentConnections.Client(client.ip)
        for _ in 0..<64 {  // bounded: each round closes one tunnel
            guard let short = mirrorBudget.shortfall(count, for: key) else { return nil }
            guard let session = oldestHelloWaiter(of: short == .all ? nil : key) else { break }
            session.reap()
        }
        switch mirrorBudget.shortfall(count, for: key) {
        case nil:
            return nil
        case .client(let held)?:
            return .network(.mirrorLimitReached, "\(client.ip) holds \(held) of the \(mirrorBudget.perClientLimit) mirror connections one client may hold on a worker, and this CONNECT needs \(count) more; its other tunnels' servers have not answered yet")
        case .all?:
            return .network(.mirrorLimitReached, "this worker's \(mirrorBudget.limit) mirror connections are all held by tunnels whose servers have not answered yet, and this CONNECT needs \(count)")
        }
    }

    /// A mirror connection's share of the budget `reserveMirrors` found room in.
    func mirrorTicket(for client: SocketAddress) -> MirrorBudget.Ticket { mirrorBudget.take(for: SilentConnections.Client(client.ip)) }

    /// A slot the machine holds without having asked (kept balanced whatever the machine does).
    func takeTunnelSlotUnchecked() { _ = shared.budget.take(limit: .max) }
    func giveBackTunnelSlot() { shared.budget.giveBack() }

    func remove(_ session: Session) {
        guard sessions.removeValue(forKey: session.id) != nil else { return }
        silent.left(session.id)
        helloWaiters.left(session.id)
        tally.withLock { $0.sessions = sessions.count }
        freedSinceTrim += 1
        if stopping && sessions.isEmpty { loop.stop() }
    }

    func sessionObjectMade() { tally.withLock { $0.counters.liveSessionObjects += 1 } }
    func sessionObjectFreed() { tally.withLock { $0.counters.liveSessionObjects -= 1 } }

    func probe(_ key: ProbeHub.Key, settings: ProxySettings, cacheable: Bool, _ callback: @escaping (ProbeResult) -> Void) -> ProbeHub.Waiter {
        let waiter = probes.probe(key, settings: settings, cacheable: cacheable, callback)
        let (started, hits) = (probes.started, probes.cacheHits)
        tally.withLock {
            $0.probes = started
            $0.probeCacheHits = hits
        }
        return waiter
    }

    /// Whether a tunnel to `address` would reach one of our listeners. It sees through every IPv4
    /// embedding (`IPAddress.embeddedIPv4`): a NAT64 or IPv4-compatible spelling of our address loops
    /// back to us as surely as the mapped one, and a false positive only refuses.
    func isOwnAddress(_ address: SocketAddress) -> Bool {
        let isIt = { (bound: SocketAddress) in
            bound.port == address.port
                && (bound.ip == address.ip.unmapped || bound.ip == address.ip.embeddedIPv4 || bound.ip.bytes.allSatisfy { $0 == 0 })
        }
        return shared.boundAddresses.contains(where: isIt) || shared.transparentListeners.contains(where: isIt)  // transparent ones too
    }

    /// Warnings the probe revealed; a rule past its `expires` is reported at error level once an
    /// hour, a rule without a real backup once a day (across all workers).
    func noteWarnings(_ evaluation: Evaluation, record: DecisionRecord) {
        for warning in evaluation.warnings {
            if case .ruleExpired = warning, !shared.expiries.shouldReport(line: evaluation.rule.line, at: Date()) { continue }
            if case .noRealBackup = warning, !shared.rotation.noRealBackupDue(evaluation.rule) { continue }
            logger.emit(SessionLog.warning(warning, record: record))
        }
        // Rotation is about pins: a host looked at only for CT has none to rotate.
        guard evaluation.rule.mode != .unpinned else { return }
        for line in shared.rotation.judged(record, evaluation: evaluation) { logger.emit(line) }
    }

    /// What the stream check notes while a tunnel runs: a would-refuse let through, a TLS version
    /// other than the probe's.
    func logStreamNote(_ note: StreamCheck.Note, record: DecisionRecord) {
        switch note {
        case .overlooked(let overlooked):
            logger.emit(SessionLog.overlooked(overlooked, record: record))
        case .negotiated(let version, let clientOfferedTLS13):
            if let probe = record.tlsVersion, version != probe {
                logger.emit(SessionLog.versionChanged(to: version, from: probe, record: record, clientOfferedTLS13: clientOfferedTLS13))
            }
        case .caught(let caught, let judged):
            suspectInterception(caught, judged: judged, record: record)
        case .unconfirmed, .clientHello:
            preconditionFailure("the session handles \(note) itself")
        }
    }

    /// The most confirming looks one worker has in flight: each costs a descriptor and a server
    /// handshake, and a client that keeps being refused must not make pinproxy open connections
    /// for it without bound.
    static let maxConfirmingLooks = 8

    /// Starts a confirming look for a refusal no other look with the same hello explained: at most
    /// one per host:port at a time, `maxConfirmingLooks` in all; past that the refusal stands
    /// alone (it is refused either way) and no incident is concluded from it.
    func confirm(_ confirmation: StreamCheck.Confirmation, dialling addresses: [SocketAddress], hop: ParentHop?, connectTimeout: Double,
                 timeout: Double, record: DecisionRecord) {
        guard let authority = record.authority else { return }
        // The cached probe chain no longer speaks for what this server shows (its key changed, or
        // someone answers for it): the next CONNECT probes again, whatever the look concludes.
        probes.forget(target: authority)
        guard confirmingLooks[authority] == nil, confirmingLooks.count < Self.maxConfirmingLooks else { return }
        let failed = confirmation.failed
        confirmingLooks[authority] = ConfirmingLook(
            loop: loop, addresses: addresses, hop: hop, connectTimeout: connectTimeout, timeout: timeout, hello: confirmation.hello,
            records: confirmation.records, judge: confirmation.judge
        ) { [weak self] outcome in
            guard let self else { return }
            confirmingLooks[authority] = nil
            switch outcome {
            case .passes(let judged):
                let detail = "\(failed.detail), while a second copy of the same ClientHello, on a fresh connection, was shown a chain that passes (leaf \(StreamCheck.leafPin(judged.der)))"
                suspectInterception(InterceptionCatch(stage: failed.stage, reason: failed.reason, detail: detail, chain: failed.judged.der),
                                    judged: failed.judged, record: record)
            case .failsAgain(let judged):
                logger.emit(SessionLog.confirmingLook(failed, shown: judged, undecided: nil, record: record))
            case .undecided(let why):
                logger.emit(SessionLog.confirmingLook(failed, shown: nil, undecided: why, record: record))
            }
        }
    }

    /// Forgets the probe chains cached for `authority`.
    func forgetProbe(_ authority: Authority) { probes.forget(target: authority) }

    /// A check caught what only an interceptor shows: the host:port goes into quarantine (under
    /// its rule's `quarantine`), the cached probe chain for it is forgotten, and one error line says
    /// so — one per quarantine, not per caught tunnel, so an attack does not flood the log.
    func suspectInterception(_ caught: InterceptionCatch, judged: StreamSummary.JudgedChain?, record: DecisionRecord) {
        guard let authority = record.authority, let rule = record.rule else { return }
        let entered = quarantine.enter(authority, rule: rule, at: Date())
        tally.withLock { $0.counters.interceptionsSuspected += 1 }
        probes.forget(target: authority)
        if case .extended = entered { return }
        logger.emit(SessionLog.interceptionSuspected(caught, judged: judged, record: record, quarantine: entered))
    }

    /// After a burst of tunnels ends, hand the freed heap back to the system: glibc keeps freed
    /// memory below a live allocation, so without this a burst of stalled tunnels left the RSS at its
    /// peak for good. Checked every few seconds, so a steady trickle of sessions costs nothing.
    private func trimAfterBursts() {
        trimTimer = Timer(loop: loop, after: 5, repeating: true) { [weak self] in
            guard let self else { return }
            guard freedSinceTrim >= 64 || (freedSinceTrim > 0 && sessions.isEmpty) else { return }
            freedSinceTrim = 0
            MemoryTrim.run()
        }
    }
}
