import Foundation
import PinPolicy
import Synchronization
import TestSupport
import Testing
@testable import ProxyCore

/// The fast relay on a real EventLoop between two socketpairs: what reaches each peer, how it ends,
/// and what its book counted. The peers' bytes are in the sockets before the loop runs, or come
/// from threads of the test (for a transfer larger than the sockets hold).
@Suite struct FastRelayLoopTests {
    /// A relay between a client and an upstream socketpair on its own loop.
    final class Bench {
        let loop = EventLoop()
        let client = SocketPair(), upstream = SocketPair()
        private(set) var relay: FastRelay?
        private(set) var ended: RelayEnd?

        init(_ method: RelayMethod, carriedFromClient: [UInt8] = []) {
            let carried = carriedFromClient.isEmpty ? nil : carriedFromClient.withUnsafeBytes { PendingBytes(copying: $0) }
            relay = FastRelay(loop: loop, method: method, client: client.handOver(), upstream: upstream.handOver(), book: RelayBook(),
                              carried: (fromClient: carried, fromUpstream: nil)) { [weak self] how in
                self?.ended = how
                self?.loop.stop()
            }
        }

        /// Runs the loop until the relay ends (30 s at most) and returns how it ended.
        func run() -> RelayEnd? {
            relay?.start()
            let limit = ProxyCore.Timer(loop: loop, after: 30) { self.loop.stop() }
            withoutSIGPIPE { loop.run() }
            limit.cancel()
            return ended
        }
    }

    /// A request/response exchange: each side sends and half-closes; each EOF is passed on after
    /// its bytes, and the relay ends once both directions are done.
    @Test(arguments: [RelayMethod.copy, .splice])
    func anExchangeWithHalfClosesFinishes(method: RelayMethod) throws {
        let bench = Bench(method)
        bench.client.peerSends(Array("ping".utf8))
        shutdown(bench.client.far, Int32(SHUT_WR))
        bench.upstream.peerSends(Array("pong!".utf8))
        shutdown(bench.upstream.far, Int32(SHUT_WR))
        #expect(bench.run() == .finished)
        #expect(bench.upstream.peerReceives() == Array("ping".utf8))
        #expect(bench.client.peerReceives() == Array("pong!".utf8))
        let book = try #require(bench.relay?.book)
        #expect(book.client.bytes == 4 && book.upstream.bytes == 5)
        #expect(book.client.shutDown && book.upstream.shutDown)
    }

    /// What the bufferevent stage had not passed on yet goes before anything read later.
    @Test(arguments: [RelayMethod.copy, .splice])
    func carriedBytesGoFirst(method: RelayMethod) {
        let bench = Bench(method, carriedFromClient: Array("early ".utf8))
        bench.client.peerSends(Array("late".utf8))
        shutdown(bench.client.far, Int32(SHUT_WR))
        shutdown(bench.upstream.far, Int32(SHUT_WR))
        #expect(bench.run() == .finished)
        #expect(bench.upstream.peerReceives() == Array("early late".utf8))
    }

    /// An upstream that is gone while the client still sends: a reset on the upstream side.
    @Test(arguments: [RelayMethod.copy, .splice])
    func aVanishedUpstreamIsAResetOnItsSide(method: RelayMethod) {
        let bench = Bench(method)
        shutdown(bench.upstream.far, Int32(SHUT_RDWR))
        bench.client.peerSends(Array("anyone there?".utf8))
        #expect(bench.run() == .reset(.upstream))
    }

    /// 4 MiB one way through a receiver that reads slowly in small pieces: the relay holds only what
    /// the receiver did not take, stops reading meanwhile, and every byte arrives in order.
    @Test(arguments: [RelayMethod.copy, .splice])
    func aLargeTransferUnderBackpressureArrivesWhole(method: RelayMethod) throws {
        let bench = Bench(method)
        bench.upstream.shrinkBuffers()
        let bytes: [UInt8] = (0..<(4 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 13) }
        // Checked as it arrives, so the test holds no second copy (other suites measure the heap).
        let received = Mutex((count: 0, inOrder: true))
        let done = DispatchGroup()
        let clientFar = bench.client.far, upstreamFar = bench.upstream.far
        DispatchQueue.global().async(group: done) {
            Self.blocking(clientFar)
            _ = bytes.withUnsafeBytes { send(clientFar, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            shutdown(clientFar, Int32(SHUT_WR))
        }
        DispatchQueue.global().async(group: done) {
            Self.blocking(upstreamFar)
            var buffer = [UInt8](repeating: 0, count: 1024)
            while true {
                let n = recv(upstreamFar, &buffer, buffer.count, 0)
                guard n > 0 else { break }
                received.withLock { seen in
                    let expected = bytes[seen.count..<min(seen.count + n, bytes.count)]
                    seen.inOrder = seen.inOrder && expected.elementsEqual(buffer[0..<n])
                    seen.count += n
                }
            }
            shutdown(upstreamFar, Int32(SHUT_WR))
        }
        #expect(bench.run() == .finished)
        #expect(done.wait(timeout: .now() + 30) == .success)
        #expect(received.withLock { $0.count } == bytes.count)
        #expect(received.withLock { $0.inOrder })
        #expect(try #require(bench.relay?.book).client.bytes == bytes.count)
    }

    /// A peer socket made blocking, with 30 s bounds on each send and receive.
    static func blocking(_ fd: Int32) {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)
        var tv = timeval(tv_sec: 30, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }
}
