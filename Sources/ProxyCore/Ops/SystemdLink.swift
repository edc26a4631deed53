import Foundation

/// What the process says to and hears from its service manager: sd_notify states, the watchdog's
/// keep-alives, and the signals that stop or reload it. Loop-bound: the signal watchers and the
/// watchdog timer are events on the supervisor's loop, freed with it.
final class SystemdLink {
    private let loop: EventLoop
    private let notifier: SystemdNotifier
    private var signals: [SignalWatcher] = []
    private var watchdog: Timer?

    init(loop: EventLoop, notifier: SystemdNotifier = SystemdNotifier()) {
        self.loop = loop
        self.notifier = notifier
    }

    /// SIGTERM and SIGINT call `stop` with the signal's name; SIGHUP calls `reload`.
    func handleSignals(stop: @escaping (String) -> Void, reload: @escaping () -> Void) {
        // A parent may have spawned us with these blocked (the mask survives exec; test runners'
        // threads do this), and a blocked SIGTERM would leave us unstoppable.
        var handled = sigset_t()
        sigemptyset(&handled)
        for sig in [SIGTERM, SIGINT, SIGHUP] { sigaddset(&handled, sig) }
        pthread_sigmask(SIG_UNBLOCK, &handled, nil)
        signals = [
            SignalWatcher(loop: loop, signal: SIGTERM) { stop("SIGTERM") },
            SignalWatcher(loop: loop, signal: SIGINT) { stop("SIGINT") },
            SignalWatcher(loop: loop, signal: SIGHUP) { reload() },
        ]
    }

    /// `READY=1`: started, or a reload done.
    func ready(status: String) { notifier.notify("READY=1\nSTATUS=\(status)") }

    /// The watchdog's keep-alives, when systemd asked for them (`$WATCHDOG_USEC`), at half its period.
    func startWatchdog() {
        guard let interval = notifier.watchdogInterval else { return }
        let notifier = notifier
        watchdog = Timer(loop: loop, after: interval, repeating: true) { notifier.notify("WATCHDOG=1") }
    }

    /// The line `systemctl status` shows.
    func status(_ status: String) { notifier.notify("STATUS=\(status)") }

    func stopping(status: String) { notifier.notify("STOPPING=1\nSTATUS=\(status)") }

    /// `RELOADING=1` with the monotonic clock systemd ≥ 253 requires; `ready` ends the reload.
    func reloading() { notifier.notify("RELOADING=1\nMONOTONIC_USEC=\(SystemdNotifier.monotonicMicroseconds())") }

    /// The loop has ended: no more keep-alives, and the signal handlers libevent found are put back.
    /// Those are the defaults, which would kill us; we are exiting already, and a second SIGTERM (a
    /// supervisor's) must not turn the bounded log flush that follows into a death by signal.
    func end() {
        watchdog = nil
        signals = []
        signal(SIGTERM, SIG_IGN)
        signal(SIGINT, SIG_IGN)
    }
}

@available(*, unavailable) extension SystemdLink: Sendable {}
