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
    private let event: LoopEvent

    init(loop: EventLoop, after seconds: Double, repeating: Bool = false, _ action: @escaping () -> Void) {
        event = LoopEvent(loop: loop, fd: -1, what: Int16(repeating ? EV_PERSIST : 0)) { _ in action() }
        event.add(timeout: seconds)
    }

    func cancel() { event.cancel() }
}

/// A signal watcher on a loop (SIGTERM, SIGINT, SIGHUP); drop it to stop watching.
final class SignalWatcher {
    private let event: LoopEvent

    init(loop: EventLoop, signal: Int32, _ action: @escaping () -> Void) {
        event = LoopEvent(loop: loop, fd: signal, what: Int16(EV_SIGNAL | EV_PERSIST)) { _ in action() }
        event.add()
    }
}

@available(*, unavailable) extension Timer: Sendable {}
@available(*, unavailable) extension SignalWatcher: Sendable {}
