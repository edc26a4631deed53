import CLibevent
import Foundation
import PinPolicy

/// A worker's view of the key-log intake: the watches its tunnels make, their deliveries run on the
/// worker's own loop (the line was read on the intake's thread),
/// its timers on its loop, and the `wait` of the snapshot the worker holds.
final class WorkerKeyLog: KeyLogSource, @unchecked Sendable {
    let intake: KeyLogIntake
    private let loop: EventLoop
    private let mailbox: Mailbox
    /// Deliveries read on another thread (or by `readNow`), waiting to run on this worker.
    private let pending = Locked([() -> Void]())
    /// Set by the worker from its snapshot (worker thread only).
    var waitSeconds: Double
    var path: String { intake.settings.path }

    init(intake: KeyLogIntake, loop: EventLoop, mailbox: Mailbox) {
        self.intake = intake
        self.loop = loop
        self.mailbox = mailbox
        waitSeconds = intake.settings.wait
    }

    func follow(clientRandom: [UInt8], _ deliver: @escaping (KeyLogDelivery) -> Void) -> AnyObject {
        let token = Following()
        let live = token.live
        token.watch = intake.watch(clientRandom: clientRandom) { [weak self] delivery in
            self?.handOver { if live.following { deliver(delivery) } }
        }
        return token
    }

    /// Has the intake read the file now, then runs `done` on this worker after what that read (or an
    /// earlier one) delivered here: the caller is about to declare a line missing and must see every
    /// line already written.
    func readNow(then done: @escaping () -> Void) {
        intake.readNow { [weak self] in self?.handOver(done) }
    }

    func after(_ seconds: Double, _ action: @escaping () -> Void) -> AnyObject {
        Timer(loop: loop, after: seconds, action)
    }

    private func handOver(_ job: @escaping () -> Void) {
        let first = pending.withLock { queue -> Bool in
            queue.append(job)
            return queue.count == 1
        }
        if first { mailbox.post { [weak self] in self?.runPending() } }
    }

    private func runPending() {
        let jobs = pending.withLock { queue -> [() -> Void] in
            defer { queue = [] }
            return queue
        }
        for job in jobs { job() }
    }

    /// Whether the tunnel still follows (worker thread only): a delivery queued before it stopped is dropped.
    private final class Live { var following = true }

    private final class Following {
        let live = Live()
        var watch: KeyLogWatch?
        deinit {
            live.following = false
            watch?.cancel()
        }
    }
}
