import Foundation
import PinPolicy

/// The worker loops as the proxy's own loop sees them: it starts them, hands each accepted
/// connection to the next in turn, hands them a reloaded snapshot and adds up their answers, tells
/// them to stop, and ends the proxy's loop when the last has finished. Everything here runs on the
/// proxy's loop; the workers answer through `mailbox`.
final class Supervisor {
    /// Accepted descriptors a worker has not taken yet count against no limit: past this many, the
    /// proxy stops accepting until the workers have caught up (the kernel's backlog holds the next
    /// clients meanwhile), so a flood cannot pile descriptors up between the two.
    static let maxWaitingHandOvers = 128

    /// Fixed once `take` has run (a change of `proxy.workers` needs a restart).
    private(set) var workers: [Worker] = []
    private let loop: EventLoop
    /// Where workers post back (a finished reload, a finished worker).
    private let mailbox: Mailbox
    /// Who gets the next connection (round robin).
    private var nextWorker = 0
    private(set) var running = 0
    private var nextID = 1
    /// Reloads whose workers have not all answered yet (a second SIGHUP may come before).
    private var reloadRounds: [Int: ReloadRound] = [:]
    private var nextRound = 1

    init(loop: EventLoop) {
        self.loop = loop
        mailbox = Mailbox(loop: loop)
    }

    /// The workers, made once the proxy knows its listeners' addresses (which they must not connect to).
    func take(_ made: [Worker]) {
        precondition(workers.isEmpty && !made.isEmpty, "workers are taken once, at least one")
        workers = made
    }

    /// Starts every worker's thread; the last one to finish stops the proxy's loop.
    func start() {
        running = workers.count
        for worker in workers {
            // The job runs on our loop (the mailbox's); only the mailbox crosses to the worker's thread.
            nonisolated(unsafe) let finished: () -> Void = { [weak self] in self?.workerFinished() }
            worker.start { [mailbox] _ in _ = mailbox.post(finished) }
        }
    }

    private func workerFinished() {
        running -= 1
        if running == 0 { loop.stop() }
    }

    /// Gives `fd` to the next worker in turn. True when that worker now has more waiting than it
    /// should (`maxWaitingHandOvers`): the caller pauses accepting.
    func handOver(fd: Int32, client: SocketAddress) -> Bool {
        let id = nextID
        nextID += 1
        // Round robin: the workers are alike, and a connection's cost is not known at accept.
        let worker = workers[nextWorker]
        nextWorker = (nextWorker + 1) % workers.count
        return worker.handOver(fd: fd, client: client, id: id) > Self.maxWaitingHandOvers
    }

    /// Whether every worker has taken all but half of what `maxWaitingHandOvers` allows.
    var caughtUp: Bool { workers.allSatisfy { $0.waitingHandOvers <= Self.maxWaitingHandOvers / 2 } }

    /// Each worker drains on its own loop; the last to finish ends ours. Stops ours now when none
    /// was started.
    func stop() {
        for worker in workers { _ = worker.mailbox.post { worker.beginStop() } }
        if running == 0 { loop.stop() }
    }

    /// After the proxy's loop has ended: each worker's thread joined, bounded; the indices of those
    /// that did not end in time.
    func join(timeout: Double) -> [Int] {
        workers.filter { !$0.join(timeout: timeout) }.map(\.index)
    }

    /// A reload: every worker takes `fresh` and judges its open tunnels again; `done` runs once all
    /// have answered (at once when no worker runs), with how many tunnels they checked and closed.
    func reload(_ fresh: PolicySnapshot, done: @escaping (_ checked: Int, _ closed: Int) -> Void) {
        let round = nextRound
        nextRound += 1
        reloadRounds[round] = ReloadRound(pending: workers.count, done: done)
        if running == 0 { return finish(round) }
        for worker in workers {
            nonisolated(unsafe) let answer: (Int, Int) -> Void = { [weak self] checked, closed in
                self?.workerReloaded(round, checked: checked, closed: closed)
            }
            let posted = worker.mailbox.post { [mailbox] in
                let (checked, closed) = worker.apply(fresh)
                _ = mailbox.post { answer(checked, closed) }
            }
            if !posted { workerReloaded(round, checked: 0, closed: 0) }
        }
    }

    /// One reload while its workers answer.
    private struct ReloadRound {
        var pending: Int
        var checked = 0
        var closed = 0
        let done: (_ checked: Int, _ closed: Int) -> Void
    }

    private func workerReloaded(_ round: Int, checked: Int, closed: Int) {
        guard var entry = reloadRounds[round] else { return }
        entry.pending -= 1
        entry.checked += checked
        entry.closed += closed
        reloadRounds[round] = entry
        if entry.pending <= 0 { finish(round) }
    }

    private func finish(_ round: Int) {
        guard let entry = reloadRounds.removeValue(forKey: round) else { return }
        entry.done(entry.checked, entry.closed)
    }

    /// `own` (the proxy's counters) plus every worker's tally, each read under its lock.
    func tally(adding own: Counters) -> Worker.Tally {
        var sum = Worker.Tally()
        sum.counters = own
        for worker in workers {
            let tally = worker.tally.withLock { $0 }
            sum.counters = sum.counters + tally.counters
            sum.sessions += tally.sessions
            sum.probes += tally.probes
            sum.probeCacheHits += tally.probeCacheHits
            sum.probeLatency = sum.probeLatency + tally.probeLatency
        }
        return sum
    }
}

@available(*, unavailable) extension Supervisor: Sendable {}
