import CLibevent
import Foundation

/// How another thread hands work to a loop: a locked queue of closures and a pipe the loop
/// watches. `post` may be called from any thread; the closures run on the owner loop's thread, in
/// the order they were posted. No libevent call is ever made on another thread's base: the poster
/// only appends and writes a byte to the pipe.
final class Mailbox: @unchecked Sendable {
    private let queue = Locked(Queue())
    /// The pipe's read end (the loop watches it) and write end (posters wake the loop).
    private let wakeRead: Int32
    private let wakeWrite: Int32
    /// The loop's watch on `wakeRead`; set once the mailbox is complete.
    private var wake: LoopEvent?

    private struct Queue {
        var jobs: [() -> Void] = []
        /// Jobs after close are dropped: the loop that would run them has ended.
        var closed = false
    }

    /// Made on (or before the start of) the owner loop's thread.
    init(loop: EventLoop) {
        var ends: [Int32] = [-1, -1]
        precondition(pipe(&ends) == 0, "pipe failed: \(errnoText(errno))")
        for end in ends {
            _ = fcntl(end, F_SETFL, fcntl(end, F_GETFL) | O_NONBLOCK)
            _ = fcntl(end, F_SETFD, FD_CLOEXEC)
        }
        (wakeRead, wakeWrite) = (ends[0], ends[1])
        wake = LoopEvent(loop: loop, fd: wakeRead, what: Int16(EV_READ | EV_PERSIST)) { [weak self] _ in self?.runPending() }
        wake?.add()
    }

    deinit {
        wake = nil  // the event goes before the descriptor it watches
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    /// Queues `job` for the owner loop. False when the mailbox was closed (the job is dropped).
    @discardableResult
    func post(_ job: @escaping () -> Void) -> Bool {
        let (accepted, first) = queue.withLock { queue -> (Bool, Bool) in
            guard !queue.closed else { return (false, false) }
            queue.jobs.append(job)
            return (true, queue.jobs.count == 1)
        }
        // One byte per empty-to-busy change: the loop takes every job per wake-up, so the pipe
        // never fills, and a busy queue costs its posters no system call.
        if first {
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)
        }
        return accepted
    }

    /// Refuses later posts (the owner loop is ending) and returns what was queued, for the owner to
    /// run once more on its thread: a job accepted is never dropped (an accepted connection's
    /// descriptor, a reload the supervisor waits for).
    func shut() -> [() -> Void] {
        queue.withLock { queue in
            queue.closed = true
            defer { queue.jobs = [] }
            return queue.jobs
        }
    }

    /// On the owner loop: runs every job queued so far (jobs they post wait for the next wake-up,
    /// so a job that posts to its own mailbox cannot starve the loop).
    private func runPending() {
        var bytes = (UInt64(0), UInt64(0))
        while withUnsafeMutableBytes(of: &bytes, { read(wakeRead, $0.baseAddress, $0.count) }) > 0 {}
        let jobs = queue.withLock { queue -> [() -> Void] in
            defer { queue.jobs = [] }
            return queue.jobs
        }
        for job in jobs { job() }
    }
}
