import CLibevent
import Foundation
import Synchronization

/// One libevent `event_base`, driven by one thread. Everything created on it (sessions, timers,
/// bufferevents) is used only from that thread.
final class EventLoop {
    let base: OpaquePointer
    /// What the fast relays on this loop share (one scratch block, idle pipes).
    let relayShared = RelayShared()

    /// libevent must be told about pthreads before the first base exists, or a loopbreak from
    /// another thread is unsafe.
    private static let threadingReady: Bool = {
        evthread_use_pthreads()
        event_set_log_callback { severity, message in
            guard severity >= Int32(EVENT_LOG_WARN), let message else { return }
            libeventMessages.withLock { $0?(String(cString: message)) }
        }
        return true
    }()

    init() {
        _ = Self.threadingReady
        guard let config = event_config_new() else { fatalError("event_config_new failed (out of memory)") }
        defer { event_config_free(config) }
        // One thread per base; changelist saves epoll_ctl calls (+20 % relay throughput when the stack was chosen).
        event_config_set_flag(config, Int32(EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST.rawValue))
        guard let base = event_base_new_with_config(config) else { fatalError("event_base_new failed") }
        self.base = base
    }

    deinit { event_base_free(base) }

    func run() { event_base_dispatch(base) }
    func stop() { event_base_loopbreak(base) }
}

/// Where libevent's own warnings go (set once by the proxy; libevent's log callback is process-global).
let libeventMessages = Mutex<(@Sendable (String) -> Void)?>(nil)

extension Double {
    var timeval: timeval {
        let whole = self.rounded(.down)
        return CLibevent.timeval(tv_sec: Int(whole), tv_usec: Int((self - whole) * 1_000_000))
    }
}

/// A one-shot or repeating timer on a loop. The closure runs on the loop's thread; cancel or drop
/// the timer to stop it.
final class Timer {
    private var event: OpaquePointer?
    private let action: () -> Void
    /// Kept so the base outlives the event freed in `deinit`.
    private let loop: EventLoop

    init(loop: EventLoop, after seconds: Double, repeating: Bool = false, _ action: @escaping () -> Void) {
        self.action = action
        self.loop = loop
        let flags = Int16(repeating ? EV_PERSIST : 0)
        event = event_new(loop.base, -1, flags, { _, _, ctx in
            guard let ctx else { preconditionFailure("timer callback without its Timer") }
            let timer = Unmanaged<Timer>.fromOpaque(ctx).takeUnretainedValue()
            withExtendedLifetime(timer) { timer.action() }
        }, Unmanaged.passUnretained(self).toOpaque())  // safe: `deinit` frees the event first
        var tv = seconds.timeval
        event_add(event, &tv)
    }

    func cancel() {
        guard let event else { return }
        event_free(event)
        self.event = nil
    }

    deinit { cancel() }
}

/// A signal watcher on a loop (SIGTERM, SIGINT, SIGHUP).
final class SignalWatcher {
    private var event: OpaquePointer?
    private let action: () -> Void
    /// Kept so the base outlives the event freed in `deinit`.
    private let loop: EventLoop

    init(loop: EventLoop, signal: Int32, _ action: @escaping () -> Void) {
        self.action = action
        self.loop = loop
        event = event_new(loop.base, signal, Int16(EV_SIGNAL | EV_PERSIST), { _, _, ctx in
            guard let ctx else { preconditionFailure("signal callback without its SignalWatcher") }
            let watcher = Unmanaged<SignalWatcher>.fromOpaque(ctx).takeUnretainedValue()
            withExtendedLifetime(watcher) { watcher.action() }
        }, Unmanaged.passUnretained(self).toOpaque())  // safe: `deinit` frees the event first
        event_add(event, nil)
    }

    deinit { if let event { event_free(event) } }
}

@available(*, unavailable) extension Timer: Sendable {}
@available(*, unavailable) extension SignalWatcher: Sendable {}
