import CLibevent
import Foundation

/// The relay, after le-proxy: a read callback that moves bytes to the partner and applies
/// backpressure, a write callback that lifts it, and an event callback that half-closes on EOF.
extension Session {
    /// Above this much data queued towards one side we stop reading from the other.
    static let maxQueued = 512 * 1024

    func startRelay() {
        guard let clientBev, let upstreamBev else { return }
        stage = .relaying
        lastActivity = .now
        let ctx = Unmanaged.passUnretained(self).toOpaque()
        bufferevent_setwatermark(clientBev, Int16(EV_READ), 0, 0)
        for bev in [clientBev, upstreamBev] {
            bufferevent_setcb(bev, sessionReadCB, sessionFlushedCB, sessionEventCB, ctx)
            bufferevent_enable(bev, Int16(EV_READ | EV_WRITE))
        }
        armIdleTimer()
        relayRead(from: clientBev)  // bytes the client sent right after its CONNECT
    }

    private func partner(of bev: OpaquePointer) -> OpaquePointer? { bev == clientBev ? upstreamBev : clientBev }

    func relayRead(from bev: OpaquePointer) {
        guard let partner = partner(of: bev), let input = bufferevent_get_input(bev), let output = bufferevent_get_output(partner) else { return }
        let count = evbuffer_get_length(input)
        guard count > 0 else { return }
        if bev == clientBev { bytesUp += count } else { bytesDown += count }
        lastActivity = .now
        Self.copy(from: input, to: output)
        if evbuffer_get_length(output) >= Self.maxQueued {
            // We're giving the other side data faster than it can pass it on: stop reading until
            // it has drained half of it (the write callback fires at the low watermark).
            bufferevent_setwatermark(partner, Int16(EV_WRITE), Self.maxQueued / 2, Self.maxQueued)
            bufferevent_disable(bev, Int16(EV_READ))
        }
    }

    /// Copies rather than moves (`evbuffer_add_buffer`): libevent 2.1 reads 4 KiB at a time, each
    /// into a fresh 8 KiB chain, and moving those chains would keep each read in its own
    /// allocation — a stalled tunnel's 512 KiB would cost 1 MiB. Copied, the output packs densely.
    private static func copy(from input: OpaquePointer, to output: OpaquePointer) {
        let count = evbuffer_get_length(input)
        var extents = [iovec](repeating: iovec(), count: 8)  // evbuffer_iovec is a #define for iovec
        let needed = Int(evbuffer_peek(input, count, nil, &extents, Int32(extents.count)))
        guard needed <= extents.count else {  // rare: many small chains; moving them is still correct
            evbuffer_add_buffer(output, input)
            return
        }
        for extent in extents.prefix(needed) { evbuffer_add(output, extent.iov_base, extent.iov_len) }
        evbuffer_drain(input, count)
    }

    func relayWritten(to bev: OpaquePointer) {
        guard stage == .relaying, let partner = partner(of: bev) else { return }
        let queued = evbuffer_get_length(bufferevent_get_output(bev))
        if queued <= Self.maxQueued / 2, !eofFrom.contains(partner),
           bufferevent_get_enabled(partner) & Int16(EV_READ) == 0 {
            bufferevent_setwatermark(bev, Int16(EV_WRITE), 0, 0)
            bufferevent_enable(partner, Int16(EV_READ))
        }
        if queued == 0 { halfCloseIfDone(towards: bev) }
    }

    func relayEvent(_ bev: OpaquePointer, _ what: Int16, errno savedErrno: Int32) {
        // An error on either side ends the tunnel, whatever else is set: with deferred callbacks
        // libevent merges a read EOF and a write error into one event, and a write side that has
        // failed will never drain, so waiting for it would hold the tunnel until idle_timeout.
        if what & Int16(BEV_EVENT_ERROR) != 0 {
            let side = bev == clientBev ? "client" : "upstream"
            return finish(.closed(savedErrno == ECONNRESET || savedErrno == EPIPE ? "\(side)_reset" : "\(side)_error"))
        }
        if what & Int16(BEV_EVENT_EOF) != 0 {
            relayRead(from: bev)  // anything still buffered goes first
            eofFrom.insert(bev)
            if let partner = partner(of: bev) { halfCloseIfDone(towards: partner) }
        }
    }

    /// Once one side has sent EOF and everything it sent is written to the other side, we shut
    /// down the other side's write half, so a request/response protocol can finish. When both
    /// directions are done, the tunnel is over.
    private func halfCloseIfDone(towards bev: OpaquePointer) {
        guard let source = partner(of: bev), eofFrom.contains(source),
              evbuffer_get_length(bufferevent_get_output(bev)) == 0 else { return }
        if shutDown.insert(bev).inserted {
            shutdown(bufferevent_getfd(bev), Int32(SHUT_WR))
        }
        if shutDown.count == 2 { finish(.closed("eof")) }  // each shutdown followed an EOF from the other side
    }
}
