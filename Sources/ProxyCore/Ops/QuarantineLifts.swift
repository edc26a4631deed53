import Foundation
import Logging

/// Lifts the quarantines that ran out, each with its `quarantine_lifted` line: looked at every
/// second on the supervisor's loop, for as long as this is held.
final class QuarantineLifts {
    private var timer: Timer?

    init(loop: EventLoop, quarantine: Quarantine, logger: Logger) {
        timer = Timer(loop: loop, after: 1, repeating: true) {
            for (key, entry) in quarantine.lift(at: Date()) {
                logger.emit(SessionLog.quarantineLifted(key, entry: entry, because: .expired))
            }
        }
    }
}

@available(*, unavailable) extension QuarantineLifts: Sendable {}
