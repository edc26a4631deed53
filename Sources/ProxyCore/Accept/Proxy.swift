import CLibevent
import Foundation
import Logging
import PinPolicy
import TLSInspection

/// The proxy, wired: its `Listener`s (with `allow_clients` checked at accept and the accept
/// backoff), the current policy snapshot and its reloads, the `Supervisor` that carries the sessions
/// on the worker loops, the `SystemdLink` (notify, watchdog, signals), `stats`, `/metrics` and the
/// key-log intake. It runs on the caller's thread, one loop. A reload publishes the new immutable
/// snapshot to every worker; `stats` adds up the proxy's and the workers' `Counters`.
public final class Proxy {
    let loop = EventLoop()
    private(set) var snapshot: PolicySnapshot
    let logger: Logger
    let debugBypassEnabled: Bool
    private let options: Options
    private var listeners: [Listener] = []
    public private(set) var boundAddresses: [SocketAddress] = []
    /// The worker loops that carry the sessions.
    private let supervisor: Supervisor
    /// `max_tunnels`, counted across every worker.
    private let budget = TunnelBudget()
    private(set) var stopping = false
    /// The supervisor's own counts: connections accepted, and those closed at accept (outside
    /// allow_clients). The workers count the rest.
    var counters = Counters()
    private var statsTimer: Timer?
    /// `stats` lines only when a counter moved (and hourly): an idle proxy's log stays quiet.
    private var statsGate = StatsGate()
    /// Lets a client be told "out of descriptors" when there are none (see `acceptFailed`).
    private let reserve = ReserveDescriptor()
    /// Clients answered from the reserve since the last `accept_failed` line.
    private var answeredSinceLine = 0
    private static let outOfDescriptorsAnswer = Refusal.outOfFileDescriptors(
        "pinproxy is out of file descriptors (its RLIMIT_NOFILE); retry when tunnels have closed").response(host: nil)
    private var acceptFailureLog = LogThrottle(interval: .seconds(10))
    /// sd_notify, the watchdog and the signals that stop or reload us.
    private let systemd: SystemdLink
    /// Connections from outside allow_clients: one log line a second at most.
    private var outsiderLog = LogThrottle(interval: .seconds(1))
    /// Rotation warnings, at most once per host a day (the bypass banner once an hour).
    let rotation = RotationWatch()
    private var rotationTimer: Timer?
    /// `proxy.metrics_listen`'s server, when configured; made at start, kept across reloads.
    var metrics: MetricsServer?
    /// `proxy.control_socket`'s server, when configured; made at start, kept across reloads, its
    /// socket file removed when the run ends.
    var control: ControlServer?
    private let startTime = Date()
    /// When `ct_list_stale` was last said.
    var ctListLog = CTListLog()

    public init(snapshot: PolicySnapshot, logger: Logger, options: Options = Options()) throws {
        self.snapshot = snapshot
        self.logger = logger
        self.options = options
        self.debugBypassEnabled = options.debugBypass
        systemd = SystemdLink(loop: loop)
        supervisor = Supervisor(loop: loop)
        signal(SIGPIPE, SIG_IGN)
        let messages = logger
        libeventMessages.withLock { $0 = { messages.emit(LogRecord(.warning, "libevent", [("detail", .string($0))])) } }
        // The key log first: a start that fails on it leaves no listener behind.
        if let settings = snapshot.policy.proxy.keylog {
            do {
                keyLog = try KeyLogIntake(settings: settings, maxWatches: snapshot.policy.proxy.maxTunnels, logger: logger)
            } catch {
                throw StartError.keyLog(error.description)
            }
        }
        let inherited = SocketActivation.inheritedSockets()
        if !inherited.isEmpty && options.listen == nil {
            for fd in inherited { try adopt(fd) }
        } else {
            for address in options.listen ?? snapshot.policy.proxy.listen { try listen(on: address) }
        }
        // Transparent mode (issue 32): its listeners, then its start checks (Transparent/).
        do {
            for address in snapshot.policy.proxy.transparent.listen { transparentAddresses.append(try listenTransparent(on: address)) }
            try TransparentStart.check(snapshot.policy.proxy.transparent)
        } catch {
            closeListeners()
            throw error
        }
        workerCount = WorkerCount.resolve(snapshot.policy.proxy.workers)
        var shared = Worker.Shared(logger: logger, debugBypassEnabled: debugBypassEnabled, boundAddresses: boundAddresses,
                                   budget: budget, resumptions: resumptions, expiries: RuleExpiryBook(), rotation: rotation, keyLogIntake: keyLog,
                                   quarantine: quarantine, workerCount: workerCount)
        shared.transparentListeners = transparentAddresses
        supervisor.take((0..<workerCount).map { Worker(index: $0, snapshot: snapshot, shared: shared) })
        if let address = snapshot.policy.proxy.metricsListen {
            do {
                metrics = try MetricsServer(loop: loop, address: address) { [weak self] in
                    self.map { MetricsText.render($0.metricsSample()) } ?? ""  // the proxy owns the server: never ""
                }
            } catch {
                closeListeners()  // a start that fails leaves no listener behind (LeakSanitizer found this one)
                throw error
            }
        }
        // Last: nothing after it can fail, so a failed start never leaves its socket file behind.
        if let path = snapshot.policy.proxy.controlSocket {
            let control = QuarantineControl(quarantine: quarantine, logger: logger)
            do {
                self.control = try ControlServer(loop: loop, path: path) { control.answer($0, at: Date()) }
            } catch {
                closeListeners()
                metrics = nil
                throw error
            }
        }
    }

    /// How many workers this process runs (fixed at start: a change needs a restart).
    public private(set) var workerCount = 1

    /// `proxy.keylog`'s intake, when configured: made at start, kept across reloads (a new path or
    /// mode needs a restart). The stream check asks it for a TLS 1.3 tunnel's server secrets.
    private(set) var keyLog: KeyLogIntake?

    private func listen(on address: SocketAddress) throws {
        try checkNotOpen(address)
        register(try Listener(loop: loop, address: address, onAccept: acceptCallback, onError: failureCallback))
    }

    /// Where the transparent listeners are bound (`proxy.transparent_listen`); apart from
    /// `boundAddresses`, which are the proxy ports.
    private(set) var transparentAddresses: [SocketAddress] = []

    /// A transparent listener: accepted and handed over like the proxy port's connections (the
    /// worker tells them apart by their local address, `TransparentOrigin`).
    private func listenTransparent(on address: SocketAddress) throws -> SocketAddress {
        try checkNotOpen(address)
        let listener = try Listener(loop: loop, address: address, onAccept: acceptCallback, onError: failureCallback)
        listeners.append(listener)
        return listener.boundAddress ?? address
    }

    /// A listening socket systemd made for us (socket activation).
    private func adopt(_ fd: Int32) throws {
        guard let address = SocketAddress.local(of: fd) else { throw StartError.notAListeningSocket(fd) }
        try checkNotOpen(address)
        register(try Listener(loop: loop, adopting: fd, address: address, onAccept: acceptCallback, onError: failureCallback))
    }

    /// The listeners' callbacks: weak, since the supervisor owns the listeners.
    private var acceptCallback: (Int32, SocketAddress?) -> Void {
        { [weak self] fd, client in
            guard let self else { return _ = close(fd) }
            accept(fd: fd, from: client)
        }
    }

    private var failureCallback: (Listener, Int32) -> Void {
        { [weak self] listener, code in self?.acceptFailed(listener, errno: code) }
    }

    /// Never an open proxy by accident: beyond loopback only with an explicit `allow_clients`.
    private func checkNotOpen(_ address: SocketAddress) throws {
        if !AddressSet.parse(["loopback"])!.contains(address.ip) && !snapshot.policy.proxy.allowClientsExplicit {
            throw StartError.openProxy(address)
        }
    }

    private func register(_ listener: Listener) {
        listeners.append(listener)
        if let bound = listener.boundAddress { boundAddresses.append(bound) }
    }

    /// Runs until stopped by SIGTERM/SIGINT (or `stop()`), after draining tunnels.
    public func run() {
        systemd.handleSignals(stop: { [weak self] in self?.stop(signal: $0) }, reload: { [weak self] in self?.reload() })
        logStarted()
        scheduleStats()
        quarantineLifts = QuarantineLifts(loop: loop, quarantine: quarantine, logger: logger)
        rotationTimer = Timer(loop: loop, after: rotation.clock.tickInterval, repeating: true) { [weak self] in
            guard let self else { return }
            if let banner = rotation.bypassBanner(snapshot.policy, enabled: debugBypassEnabled) { logger.emit(banner) }
            if let book = snapshot.ct, let stale = ctListLog.tick(book, at: rotation.clock.now()) { logger.emit(stale) }
        }
        MemoryTrim.run()  // glibc's arenas set up here, before any worker thread trims
        keyLog?.start()
        supervisor.start()
        systemd.ready(status: statusLine())
        systemd.startWatchdog()
        loop.run()
        for index in supervisor.join(timeout: 5) {
            logger.emit(LogRecord(.error, "worker_stuck", [("worker", .int(index)), ("detail", .string("the worker's thread did not end within 5 s of its loop"))]))
        }
        keyLog?.stop()
        rotationTimer = nil
        metrics = nil
        control = nil
        closeListeners()
        logger.emit(LogRecord(.info, "stopped", statsSample().fields + [("version", .string(BuildInfo.version))]))
        systemd.end()
        statsTimer = nil
        quarantineLifts = nil
    }

    // MARK: accepting

    private func accept(fd: Int32, from client: SocketAddress?) {
        guard let client, !stopping else {
            close(fd)
            return
        }
        counters.accepted += 1
        // Gone already without a byte (a flood that connects and drops, or the kernel's deferral
        // ended by the client's FIN): closed here, without a hand-off to a worker or a session.
        if peerLeftWithoutAByte(fd) {
            setAbortiveClose(fd)
            close(fd)
            counters.count(CloseCode.silent.entry)
            return
        }
        // A client outside allow_clients is closed at once: it never gets to hold a session or
        // feed the request parser. Throttled, so a flood from outside cannot fill the log.
        if let refused = AdmissionGate.refusesClient(client.ip, policy: snapshot.policy)?.refusal {
            close(fd)
            counters.rejected += 1
            if let suppressed = outsiderLog.note(at: ContinuousClock.now) {
                logger.emit(LogRecord(.warning, "request_rejected", [
                    ("client", .string(client.description)), ("reason", .string(refused.reason)),
                    ("detail", .string("\(refused.detail); closed at accept")), ("suppressed", .int(suppressed)),
                ]))
            }
            return
        }
        if supervisor.handOver(fd: fd, client: client) { pauseForWorkers() }
    }

    private var workersBehind: Timer?

    private func pauseForWorkers() {
        guard workersBehind == nil else { return }
        for listener in listeners { listener.hold(.workersBehind) }
        workersBehind = Timer(loop: loop, after: 0.002, repeating: true) { [weak self] in
            guard let self else { return }
            guard stopping || supervisor.caughtUp else { return }
            workersBehind = nil
            for listener in listeners { listener.release(.workersBehind) }
        }
    }

    /// EMFILE and friends: stop accepting for a moment instead of spinning (as httpd and NIO do).
    /// While it lasts, this happens about once a second per listener; one line every 10 s, with how
    /// many failures it stands for, says as much without flooding the log.
    ///
    /// Out of descriptors (EMFILE, ENFILE), the client waiting first is answered from the reserve
    /// at once — 503 `out_of_file_descriptors` — and accepting goes on (the listener stays readable
    /// while clients wait, so each turn of the loop answers one); it pauses only when no client could
    /// be answered.
    private func acceptFailed(_ listener: Listener, errno code: Int32) {
        let outOfDescriptors = code == EMFILE || code == ENFILE
        let policy = snapshot.policy
        let answered = outOfDescriptors && reserve.answerOne(from: listener.fd, with: Self.outOfDescriptorsAnswer) {
            AdmissionGate.refusesClient($0.ip, policy: policy) == nil
        }
        if answered {
            counters.countRefusal(.decision(.network(.outOfFileDescriptors)))
            answeredSinceLine += 1
        }
        if let suppressed = acceptFailureLog.note(at: ContinuousClock.now) {
            logger.emit(LogRecord(.error, "accept_failed", [
                ("detail", .string(errnoText(code))), ("answered_503", .int(answeredSinceLine)), ("suppressed", .int(suppressed)),
            ]))
            answeredSinceLine = 0
        }
        guard !answered else { return }
        listener.pauseAfterFailure()
    }

    /// Tunnels open (or being set up) on every worker.
    private var tunnels: Int { budget.count }

    // MARK: stop, reload

    /// Stops accepting, lets tunnels drain up to `drain_timeout`, then closes the rest.
    public func stop(signal: String = "stop") {
        guard !stopping else { return }
        stopping = true
        // Close the listening sockets now, not when the drain ends: a new client is refused at
        // once instead of waiting in the backlog for a reset. Before the `stopping` line, so that
        // whoever reads it knows new connections are refused.
        closeListeners()
        systemd.stopping(status: "stopping: draining \(tunnels) tunnels")
        logger.emit(LogRecord(.info, "stopping", [("signal", .string(signal)), ("tunnels", .int(tunnels)),
                                                   ("drain_timeout_s", .int(Int(snapshot.policy.proxy.drainTimeout)))]))
        supervisor.stop()
    }

    private func closeListeners() {
        workersBehind = nil
        listeners = []  // each frees its evconnlistener and closes its socket
    }

    /// SIGHUP: load the file again; an invalid file keeps the old policy. Tunnels in flight keep
    /// the snapshot they were decided under.
    public func reload() {
        guard let load = options.reload else { return }
        systemd.reloading()
        defer { systemd.ready(status: statusLine()) }
        do {
            let fresh = try load()
            let previous = snapshot.policy
            let diff = PolicyDiff(from: previous, to: fresh.policy)
            snapshot = fresh
            // Open tunnels are judged again on the chains already verified for them: a key just
            // deny-listed or a pin removed closes its tunnels now, not when they end.
            // A session verified under the old rules, pins or deny list is not verified under new
            // ones, and the ledger keeps no chain to judge again: it starts empty (a client that
            // resumes one is refused once, then makes a full handshake). Other edits keep it.
            let old = previous, new = fresh.policy
            if old.rules != new.rules || old.deny != new.deny || old.pinsets != new.pinsets || old.defaults != new.defaults {
                resumptions.forgetAll()
            }
            for (key, entry) in quarantine.reloaded(new) {
                logger.emit(SessionLog.quarantineLifted(key, entry: entry, because: .ruleChanged))
            }
            // Every worker takes the snapshot and judges its open tunnels again; the one
            // `policy_reloaded` line is written once all have answered, with their sums.
            var fields = policyFields(fresh.policy)
            fields.append(("changes", .string(diff.summary)))
            counters.reloadsSucceeded += 1
            supervisor.reload(fresh) { [weak self] checked, closed in
                self?.reloaded(fields: fields, policy: fresh.policy, previous: previous, checked: checked, closed: closed)
            }
        } catch {
            counters.reloadsFailed += 1
            logger.emit(LogRecord(.error, "policy_reload_failed", [("detail", .string("\(error)")), ("hint", .string("the previous policy stays in force; fix the file and send SIGHUP again"))]))
        }
    }

    /// Every worker has answered a reload: the one `policy_reloaded` line, with their sums.
    private func reloaded(fields: [(String, LogValue)], policy: Policy, previous: Policy, checked: Int, closed: Int) {
        logger.emit(LogRecord(.info, "policy_reloaded", fields + [("tunnels_checked", .int(checked)), ("tunnels_closed", .int(closed))]))
        logLint(policy)
        logCTList()
        logRestartNeeded(from: previous, to: policy)
    }

    /// One `restart_required` line per setting a reload changed but cannot apply, so it is not missed.
    private func logRestartNeeded(from old: Policy, to new: Policy) {
        let running = RestartCheck(listensWherePolicySays: options.listen == nil, boundAddresses: boundAddresses,
                                   metricsAddress: metrics?.boundAddress, controlSocket: control?.path, workerCount: workerCount, keyLog: keyLog?.settings)
        for (key, detail) in running.changes(from: old, to: new) {
            logger.emit(LogRecord(.warning, "restart_required", [("setting", .string(key)),
                                                                  ("detail", .string("\(key) changed: \(detail) until it restarts")),
                                                                  ("hint", .string("restart pinproxy (systemctl restart pinproxy) to apply \(key)"))]))
        }
    }

    private func scheduleStats() {
        let interval = snapshot.policy.proxy.statsInterval
        guard interval > 0 else { return }
        statsTimer = Timer(loop: loop, after: interval, repeating: true) { [weak self] in
            guard let self else { return }
            var fields = statsSample().fields
            if let heap = HeapFigure.field { fields.append(heap) }  // tests only: a changed heap is a new line
            if statsGate.shouldLog(fields, at: ContinuousClock.now) { logger.emit(LogRecord(.info, "stats", fields)) }
            systemd.status(statusLine())
        }
    }

    /// The one-line summary systemd shows in `systemctl status`.
    private func statusLine() -> String {
        let counters = merged().counters
        return "\(tunnels) tunnels open; \(counters.allowed) allowed, \(counters.refused) refused, \(counters.bypassed) bypassed, \(counters.unpinned) unpinned; \(snapshot.policy.rules.count) rules"
    }

    /// The proxy's counters plus every worker's.
    private func merged() -> Worker.Tally { supervisor.tally(adding: counters) }

    /// The `stats` values, added up over every worker. Call it on the supervisor's thread (its own
    /// counters are not locked); the workers' are read under their locks.
    func statsSample() -> StatsSample {
        statsSample(merged())
    }

    private func statsSample(_ all: Worker.Tally) -> StatsSample {
        StatsSample(counters: all.counters, activeSessions: all.sessions, tunnels: tunnels, probes: all.probes,
                    probeCacheHits: all.probeCacheHits, keyLog: keyLog?.counters ?? KeyLogBook.Counters(),
                    keyLogWatches: keyLog?.watchCount ?? 0, workers: workerCount, quarantined: quarantine.count(at: Date()))
    }

    /// What a scrape of `/metrics` reports: the `stats` values and the metrics' own, added up over
    /// the supervisor and every worker.
    func metricsSample() -> MetricsSample {
        let all = merged()
        return MetricsSample(stats: statsSample(all), probeLatency: all.probeLatency,
                             logLinesDropped: options.logLinesDropped?() ?? 0,
                             metricsConnectionsRefused: metrics?.refusedConnections ?? 0, startTime: startTime)
    }

    /// Resumable TLS 1.2 sessions the stream check saw verified, on any worker.
    let resumptions = ResumptionLedger()
    /// The host:ports where a check caught an interception, for every worker.
    let quarantine = Quarantine()
    /// Lifts the quarantines that ran out.
    private var quarantineLifts: QuarantineLifts?
}

@available(*, unavailable) extension Proxy: Sendable {}
