/// The relay's bookkeeping as values: per side, what it sent, whether it is done sending, whether
/// we stopped reading it or shut down writing to it; each event returns the steps the relay must
/// take. No buffers and no sockets, so tests drive it directly; `Relay` carries the steps out.
struct RelayBook {
    /// Above this much data queued towards one side we stop reading from the other, until half of
    /// it has drained.
    static let maxQueued = 512 * 1024

    struct Side: Equatable {
        /// Bytes read from this side.
        var bytes = 0
        /// This side sent EOF.
        var sentEOF = false
        /// We stopped reading this side (the other side has too much queued).
        var readPaused = false
        /// We shut down our write half towards this side.
        var shutDown = false
    }

    enum Step: Equatable {
        /// Stop reading this side until the other drains.
        case pauseReading(TunnelSide)
        /// Read this side again.
        case resumeReading(TunnelSide)
        /// Shut down our write half towards this side: everything the other side sent is there.
        case shutDownWrite(TunnelSide)
        /// Both directions are done.
        case finished
    }

    /// Neither side has sent EOF or been shut down: the relay may still change hands.
    var isOpenBothWays: Bool {
        [client, upstream].allSatisfy { !$0.sentEOF && !$0.shutDown }
    }

    private(set) var client = Side()
    private(set) var upstream = Side()

    subscript(side: TunnelSide) -> Side {
        get { side == .client ? client : upstream }
        set { if side == .client { client = newValue } else { upstream = newValue } }
    }

    /// `count` bytes from `from` were queued towards the other side, which now has `queued` waiting.
    /// `limit` is how much may wait before reading stops: the fast relay stops as soon as anything
    /// waits (limit 1), since it keeps only what the other side did not take at once.
    mutating func moved(_ count: Int, from: TunnelSide, queuedAtOther queued: Int, limit: Int = maxQueued) -> [Step] {
        self[from].bytes += count
        // We're giving the other side data faster than it can pass it on: stop reading.
        guard queued >= limit, !self[from].readPaused else { return [] }
        self[from].readPaused = true
        return [.pauseReading(from)]
    }

    /// `side` has written out its queue down to `queued` bytes (`limit` as in `moved`).
    mutating func drained(_ side: TunnelSide, queued: Int, limit: Int = maxQueued) -> [Step] {
        var steps: [Step] = []
        let source = side.other
        if queued <= limit / 2, self[source].readPaused, !self[source].sentEOF {
            self[source].readPaused = false
            steps.append(.resumeReading(source))
        }
        if queued == 0 { steps += halfCloseIfDone(towards: side) }
        return steps
    }

    /// `side` sent EOF; `queuedAtOther` bytes of it still wait to be written to the other side.
    mutating func sentEOF(_ side: TunnelSide, queuedAtOther: Int) -> [Step] {
        self[side].sentEOF = true
        return queuedAtOther == 0 ? halfCloseIfDone(towards: side.other) : []
    }

    /// Once one side has sent EOF and all of it reached the other side, we shut down writing to
    /// the other side, so a request/response protocol can finish; when both are shut down (each
    /// after an EOF from its partner), the tunnel is over.
    private mutating func halfCloseIfDone(towards side: TunnelSide) -> [Step] {
        guard self[side.other].sentEOF else { return [] }
        var steps: [Step] = []
        if !self[side].shutDown {
            self[side].shutDown = true
            steps.append(.shutDownWrite(side))
        }
        if client.shutDown && upstream.shutDown { steps.append(.finished) }
        return steps
    }
}
