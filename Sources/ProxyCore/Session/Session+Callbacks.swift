import CLibevent

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
