import CLibevent

/// One libevent `event` on a loop (a descriptor to watch, a signal, or none for a timer), owned
/// here and freed in `deinit`.
///
/// Its C callback reaches this object through an unretained context. That is safe because the
/// event is freed in `deinit`, before this object's memory goes, and the loop runs one callback at
/// a time on its own thread: once the object is gone, nothing can fire. While its action runs the
/// object is kept alive, so an action may drop the last reference to it (or to its owner).
///
/// The action captures its owner weakly: the owner holds the `LoopEvent`, not the other way round.
/// Inside its own action, dropping the last reference frees the event only once the action returns:
/// `cancel()` it before closing its descriptor, or libevent would still count a watch on that
/// descriptor number when a new socket gets it.
final class LoopEvent {
    private var event: OpaquePointer?
    /// What to do when the event fires, with libevent's `what` (EV_READ, EV_WRITE, EV_TIMEOUT).
    /// Set before `add`; an event made before its owner is complete gets it once the owner is.
    var action: (_ what: Int16) -> Void
    /// Kept so the base outlives the event freed in `deinit`.
    private let loop: EventLoop

    init(loop: EventLoop, fd: Int32, what: Int16, _ action: @escaping (_ what: Int16) -> Void = { _ in }) {
        self.loop = loop
        self.action = action
        // Only after every property is set can `self` be the context.
        guard let made = event_new(loop.base, fd, what, loopEventCB, Unmanaged.passUnretained(self).toOpaque()) else {
            fatalError("event_new failed (out of memory)")
        }
        event = made
    }

    /// Arms the event, with a timeout (EV_TIMEOUT fires after it) or without.
    func add(timeout seconds: Double? = nil) {
        guard let event else { return }
        if var tv = seconds?.timeval { event_add(event, &tv) } else { event_add(event, nil) }
    }

    /// Disarms it (it can be added again).
    func remove() {
        guard let event else { return }
        event_del(event)
    }

    /// Frees the event now: it never fires again, and libevent forgets its descriptor.
    func cancel() {
        guard let event else { return }
        event_free(event)
        self.event = nil
    }

    deinit { cancel() }

    fileprivate func fire(_ what: Int16) { action(what) }
}

@available(*, unavailable) extension LoopEvent: Sendable {}

private let loopEventCB: event_callback_fn = { _, what, ctx in
    guard let ctx else { preconditionFailure("event callback without its LoopEvent") }
    let event = Unmanaged<LoopEvent>.fromOpaque(ctx).takeUnretainedValue()
    withExtendedLifetime(event) { event.fire(what) }
}
