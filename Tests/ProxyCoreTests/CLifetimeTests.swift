import CLibevent
import Foundation
import Logging
import PinPolicy
import TestSupport
import Testing
@testable import ProxyCore

/// The owners of C objects: each frees its object in `deinit`, no callback reaches an owner that
/// is gone, and an owner may be dropped from inside its own callback.
@Suite struct CLifetimeTests {
    /// A start that fails on its second listen address leaves nothing listening on the first: the
    /// first `Listener` goes with the half-made proxy (issue 17 named this leak).
    @Test func aSecondListenFailureFreesTheFirstListener() throws {
        let first = try freePort()
        let (held, second) = try boundLoopbackSocket()
        defer { close(held) }
        #expect(listen(held, 1) == 0)
        let addresses = [first, second].map { SocketAddress(ip: IPAddress("127.0.0.1")!, port: $0) }
        let snapshot = PolicySnapshot.loaded(from: "version: 1\ndefaults: { unpinned: allow }\n")
        let logger = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }
        do {
            _ = try Proxy(snapshot: snapshot, logger: logger, options: Proxy.Options(listen: addresses))
            Issue.record("the proxy started although \(addresses[1]) is taken")
        } catch Proxy.StartError.cannotListen(let address, _) {
            #expect(address == addresses[1])
        }
        // Nothing holds the first port: a plain bind and listen on it succeed.
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(probe) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = first.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(probe, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        #expect(bound == 0, "port \(first) is still taken: \(errnoText(errno))")
        #expect(listen(probe, 1) == 0)
    }

    /// An action that drops the last reference to its own event (as a connector that fails over
    /// to its next address does) runs to its end, and the event never fires again.
    @Test func anEventMayBeDroppedInsideItsOwnAction() {
        let loop = EventLoop()
        let pipe = PipeEnds()
        defer { pipe.close() }
        final class Holder { var event: LoopEvent?; var fired = 0 }
        let holder = Holder()
        weak var dropped: LoopEvent?
        do {
            let event = LoopEvent(loop: loop, fd: pipe.read, what: Int16(EV_READ | EV_PERSIST)) { [weak holder] _ in
                guard let holder else { return }
                holder.fired += 1
                holder.event = nil  // the last reference
                loop.stop()
            }
            holder.event = event
            dropped = event
            event.add()
        }
        pipe.writeByte()
        let limit = ProxyCore.Timer(loop: loop, after: 30) { loop.stop() }
        loop.run()
        limit.cancel()
        #expect(holder.fired == 1)
        #expect(dropped == nil)
    }

    /// An event dropped before it fires never calls back, even though its descriptor is ready: a
    /// second event on the same descriptor does, in the same turn of the loop.
    @Test func aDroppedEventNeverFires() {
        let loop = EventLoop()
        let pipe = PipeEnds()
        defer { pipe.close() }
        var firedDropped = 0, firedKept = 0
        var doomed: LoopEvent? = LoopEvent(loop: loop, fd: pipe.read, what: Int16(EV_READ | EV_PERSIST)) { _ in firedDropped += 1 }
        doomed?.add()
        let kept = LoopEvent(loop: loop, fd: pipe.read, what: Int16(EV_READ | EV_PERSIST)) { _ in
            firedKept += 1
            loop.stop()
        }
        kept.add()
        doomed = nil
        pipe.writeByte()
        let limit = ProxyCore.Timer(loop: loop, after: 30) { loop.stop() }
        loop.run()
        limit.cancel()
        #expect(firedKept == 1)
        #expect(firedDropped == 0)
    }

    /// The event's owner is not kept alive by its event: the action holds it weakly, so dropping
    /// the owner frees both.
    @Test func anEventDoesNotKeepItsOwnerAlive() {
        let loop = EventLoop()
        let pipe = PipeEnds()
        defer { pipe.close() }
        final class Owner {
            var event: LoopEvent?
            init(loop: EventLoop, fd: Int32) {
                event = LoopEvent(loop: loop, fd: fd, what: Int16(EV_READ)) { [weak self] _ in _ = self }
                event?.add()
            }
        }
        var owner: Owner? = Owner(loop: loop, fd: pipe.read)
        weak let ownerGone = owner
        weak let eventGone = owner?.event
        owner = nil
        #expect(ownerGone == nil)
        #expect(eventGone == nil)
    }

    /// A bufferevent shared with a target that goes away (the session's client side after its
    /// relay): `unroute(from:)` clears the callbacks only if they still go to that target.
    @Test func unrouteClearsOnlyItsOwnTarget() throws {
        let loop = EventLoop()
        let pair = SocketPair()
        let side = try #require(BufferEvent(loop: loop, socket: pair.handOver()))
        final class Target {}
        let first = Target(), second = Target()
        side.route(to: first, read: { _, _ in }, write: nil, event: nil)
        side.unroute(from: first)
        #expect(Self.context(of: side) == nil)
        side.route(to: first, read: { _, _ in }, write: nil, event: nil)
        side.route(to: second, read: { _, _ in }, write: nil, event: nil)
        side.unroute(from: first)  // too late: the callbacks go to `second` now
        #expect(Self.context(of: side) == Unmanaged.passUnretained(second).toOpaque())
        _ = side.takeSocket()
        side.unroute(from: second)  // the socket was taken: nothing routed, nothing to clear
        #expect(Self.context(of: side) == nil)
    }

    /// A loop thread's body is released once it has run: nothing it captured outlives the thread.
    @Test func aLoopThreadReleasesItsBody() {
        final class Payload { var ran = false }
        weak var released: Payload?
        do {
            let payload = Payload()
            released = payload
            let thread = LoopThread.start { payload.ran = true }
            pthread_join(thread, nil)
            #expect(payload.ran)
        }
        #expect(released == nil)
    }

    private static func context(of side: BufferEvent) -> UnsafeMutableRawPointer? {
        var context: UnsafeMutableRawPointer?
        bufferevent_getcb(side.ref, nil, nil, nil, &context)
        return context
    }
}

/// A pipe for events to watch: `writeByte` makes its read end readable.
private final class PipeEnds {
    let read: Int32
    let write: Int32

    init() {
        var fds: [Int32] = [-1, -1]
        precondition(pipe(&fds) == 0, "pipe failed")
        (read, write) = (fds[0], fds[1])
    }

    func writeByte() {
        var byte: UInt8 = 1
        _ = Glibc.write(write, &byte, 1)
    }

    func close() {
        Glibc.close(read)
        Glibc.close(write)
    }
}
