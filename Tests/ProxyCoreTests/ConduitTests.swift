import Foundation
import PinPolicy
import TestSupport
import Testing
@testable import ProxyCore

/// One direction of the fast relay on socketpairs, without a loop: what `pump` and `flush` report,
/// what a conduit holds when the receiver is full, and where the splice pipes go.
@Suite struct ConduitTests {
    static func conduit(_ method: RelayMethod, _ shared: RelayShared) -> Conduit {
        method == .splice ? SpliceConduit(shared: shared) : CopyConduit(shared: shared)
    }

    static let bytes: [UInt8] = (0..<(2 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ $0 >> 11) }

    @Test(arguments: [RelayMethod.copy, .splice])
    func whatTheSenderSentReachesTheReceiverAndNothingIsHeld(method: RelayMethod) {
        let sender = SocketPair(), receiver = SocketPair()
        let conduit = Self.conduit(method, RelayShared())
        #expect(conduit.pump(from: sender.near, to: receiver.near) == .moved(0))  // nothing was waiting
        sender.peerSends(Array("hello".utf8))
        #expect(conduit.pump(from: sender.near, to: receiver.near) == .moved(5))
        #expect(conduit.held == 0)
        #expect(receiver.peerReceives() == Array("hello".utf8))
    }

    /// A receiver that does not read: the conduit keeps what it could not write (one wakeup's
    /// worth at most) and hands it over, in order, as the receiver drains.
    @Test(arguments: [RelayMethod.copy, .splice])
    func whatTheReceiverDidNotTakeIsHeldAndFlushedInOrder(method: RelayMethod) {
        let sender = SocketPair(), receiver = SocketPair()
        receiver.shrinkBuffers()
        let conduit = Self.conduit(method, RelayShared())
        var sent = 0, received: [UInt8] = []
        var sawHeld = false
        for _ in 0..<10_000 where received.count < Self.bytes.count {
            sent += sender.peerSends(Array(Self.bytes[sent...]))
            if conduit.held > 0 {
                sawHeld = true
                #expect(conduit.flush(to: receiver.near) == .moved(0))
            } else {
                guard case .moved = conduit.pump(from: sender.near, to: receiver.near) else { Issue.record("pump failed"); return }
            }
            received += receiver.peerReceives()
        }
        #expect(sawHeld)
        #expect(received == Self.bytes)
        #expect(conduit.held == 0)
    }

    @Test(arguments: [RelayMethod.copy, .splice])
    func aSenderThatHungUpIsAnEOF(method: RelayMethod) {
        let sender = SocketPair(), receiver = SocketPair()
        let conduit = Self.conduit(method, RelayShared())
        sender.peerSends(Array("last words".utf8))
        shutdown(sender.far, Int32(SHUT_WR))
        #expect(conduit.pump(from: sender.near, to: receiver.near) == .moved(10))  // the EOF waits for the next wakeup
        #expect(conduit.pump(from: sender.near, to: receiver.near) == .eof)
        #expect(receiver.peerReceives() == Array("last words".utf8))
    }

    @Test(arguments: [RelayMethod.copy, .splice])
    func aReceiverThatClosedIsAWriteFailure(method: RelayMethod) {
        let sender = SocketPair(), receiver = SocketPair()
        shutdown(receiver.far, Int32(SHUT_RDWR))
        let conduit = Self.conduit(method, RelayShared())
        sender.peerSends(Array("to nobody".utf8))
        #expect(withoutSIGPIPE { conduit.pump(from: sender.near, to: receiver.near) } == .writeFailed(EPIPE))
    }

    /// A descriptor that cannot be read (a pipe's write end) is a read failure with its errno.
    @Test(arguments: [RelayMethod.copy, .splice])
    func anUnreadableSenderIsAReadFailure(method: RelayMethod) throws {
        let pipe = try #require(PipePair())
        let receiver = SocketPair()
        let conduit = Self.conduit(method, RelayShared())
        guard case .readFailed(let code) = conduit.pump(from: pipe.write, to: receiver.near) else {
            Issue.record("expected a read failure")
            return
        }
        #expect(code == EBADF || code == EINVAL)
    }

    /// A splice direction borrows a pipe only while bytes are in flight and gives it back empty;
    /// the idle pipes go when the last splice direction ends.
    @Test func splicePipesGoBackToThePoolAndCloseWithTheLastDirection() {
        let shared = RelayShared()
        let sender = SocketPair(), receiver = SocketPair()
        do {
            let conduit = SpliceConduit(shared: shared)
            #expect(shared.spliceConduits == 1)
            sender.peerSends(Array("through a pipe".utf8))
            #expect(conduit.pump(from: sender.near, to: receiver.near) == .moved(14))
            #expect(shared.idlePipes.count == 1)  // taken for the bytes, given back once they were out
            #expect(conduit.pump(from: sender.near, to: receiver.near) == .moved(0))
            #expect(shared.idlePipes.count == 1)  // the same pipe, not a second one
        }
        #expect(shared.spliceConduits == 0)
        #expect(shared.idlePipes.isEmpty)
    }

    /// A pipe still holding bytes when its direction ends is not put back in the pool.
    @Test func aPipeThatStillHoldsBytesIsNotPooled() {
        let shared = RelayShared()
        let other = SpliceConduit(shared: shared)  // keeps the pool alive
        let sender = SocketPair(), receiver = SocketPair()
        receiver.shrinkBuffers()
        do {
            let conduit = SpliceConduit(shared: shared)
            var sent = 0
            for _ in 0..<1_000 where conduit.held == 0 {
                sent += sender.peerSends(Array(Self.bytes[sent...]))
                _ = conduit.pump(from: sender.near, to: receiver.near)
            }
            #expect(conduit.held > 0)
            #expect(shared.idlePipes.isEmpty)
        }
        #expect(shared.idlePipes.isEmpty)
        withExtendedLifetime(other) {}
    }

    @Test func pendingBytesGoOutAcrossFlushes() {
        let receiver = SocketPair()
        receiver.shrinkBuffers()
        let pending = Self.bytes.prefix(1 << 20).withUnsafeBytes { PendingBytes(copying: $0) }
        var received: [UInt8] = []
        for _ in 0..<10_000 where pending.remaining > 0 {
            #expect(pending.flush(to: receiver.near) == .moved(0))
            received += receiver.peerReceives()
        }
        received += receiver.peerReceives()
        #expect(pending.remaining == 0)
        #expect(received == Array(Self.bytes.prefix(1 << 20)))
    }
}
