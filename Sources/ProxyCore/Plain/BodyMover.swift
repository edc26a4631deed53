import CLibevent
import Foundation

/// Moves HTTP body bytes from one bufferevent's input to another's output, never past the high-water
/// mark: the byte work of `PlainForwarder`, with the framing read through a `BodyMeter`.
enum BodyMover {
    /// libevent reads and writes at most 16 KiB per callback by default: a GiB body would take
    /// 65,536 turns of the loop each way. 64 KiB (within the 256 KiB bound) cuts that fourfold.
    static func widen(_ side: BufferEvent) {
        bufferevent_set_max_single_read(side.ref, 64 * 1024)
        bufferevent_set_max_single_write(side.ref, 64 * 1024)
    }

    /// Moves what belongs to the body from `source`'s input to `sink`'s output until the input is
    /// empty, the body ends, or the output holds `highWater` bytes (a move never goes past it).
    /// Data is copied without being looked at (`copy`); framing (chunk-size lines, trailers) is
    /// read through the meter a little at a time and passed on — or dropped, `dechunk`. Returns
    /// what it found and how many bytes it passed on.
    static func move(from source: BufferEvent, to sink: BufferEvent, meter: inout BodyMeter, dechunk: Bool = false,
                     highWater: Int) -> (ExchangeMachine.Moved, bytes: Int) {
        let input = source.input
        var count = 0
        // Each round takes at least one byte or returns: bounded by what the input holds.
        var rounds = evbuffer_get_length(input) + 1
        while !meter.isDone && rounds > 0 {
            rounds -= 1
            let room = highWater - evbuffer_get_length(sink.output)
            guard room > 0 else { return (.blocked, count) }
            let available = evbuffer_get_length(input)
            guard available > 0 else { return (.moved, count) }
            let slice = min(available, room)
            if let data = meter.plainBytesAhead {
                let taken = min(data, slice)
                meter.consume(count: taken)
                copy(from: input, to: sink.output, count: taken)
                count += taken
            } else if meter.state == .untilClose {
                copy(from: input, to: sink.output, count: slice)
                count += slice
            } else {
                let window = min(slice, 4096)
                guard let bytes = evbuffer_pullup(input, window) else { return (.moved, count) }
                switch meter.consume(UnsafeRawBufferPointer(start: bytes, count: window), stopAtData: true) {
                case .consumed(let n) where dechunk:
                    evbuffer_drain(input, n)
                case .consumed(let n):
                    copy(from: input, to: sink.output, count: n)
                    count += n
                case .malformed(let why):
                    return (.malformed(why), count)
                }
            }
        }
        return (.moved, count)
    }

    /// Copies the first `count` bytes of `input` onto the end of `output`, then drains them. A copy,
    /// not `evbuffer_remove_buffer`'s move of whole chains: libevent 2.1 reads 4 KiB at a time,
    /// each read in its own 8 KiB allocation (as the relay found), and moved as they were, those
    /// half-empty chains queued toward a side that does not read held about twice `highWater` (511–523 KiB per stalled exchange, issue 16).
    /// Copied, the output's chains are packed full.
    private static func copy(from input: OpaquePointer, to output: OpaquePointer, count: Int) {
        withUnsafeTemporaryAllocation(of: iovec.self, capacity: 8) { vecs in  // evbuffer_iovec is a #define for iovec
            var left = count
            while left > 0 {
                let segments = min(Int(evbuffer_peek(input, left, nil, vecs.baseAddress, 8)), 8)
                var copied = 0
                for vec in vecs.prefix(segments) where copied < left {
                    let take = min(vec.iov_len, left - copied)
                    evbuffer_add(output, vec.iov_base, take)
                    copied += take
                }
                guard copied > 0 else { return }
                evbuffer_drain(input, copied)
                left -= copied
            }
        }
    }
}
