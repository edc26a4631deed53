import Foundation
import Logging
import PinPolicy

/// What the control socket answers, against the process's `Quarantine`: a list, or a lift (each
/// lift logged `quarantine_lifted reason=operator`, as the other ways a quarantine ends are).
/// No socket here, so the answers are tested without one.
struct QuarantineControl {
    let quarantine: Quarantine
    let logger: Logger

    /// The answer to one request line: its lines, each ending in a newline (none for an empty list).
    func answer(_ line: String, at now: Date) -> String {
        switch ControlRequest.parse(line) {
        case .failure(let why):
            return "error \(why)\n"
        case .success(.list):
            return quarantine.entries(at: now).map { key, entry in
                "\(Self.fields(key)) since=\(RFC3339.format(entry.since)) until=\(RFC3339.format(entry.until)) rule=\(entry.rule.name)\n"
            }.joined()
        case .success(.lift(let key)):
            guard let entry = quarantine.lift(key, at: now) else { return "not_quarantined \(Self.fields(key))\n" }
            logger.emit(SessionLog.quarantineLifted(key, entry: entry, because: .operator))
            return "lifted \(Self.fields(key))\n"
        case .success(.liftAll):
            return quarantine.liftAll(at: now).map { key, entry in
                logger.emit(SessionLog.quarantineLifted(key, entry: entry, because: .operator))
                return "lifted \(Self.fields(key))\n"
            }.joined()
        }
    }

    /// `host=… port=…`, as `quarantine_lifted` writes them.
    static func fields(_ key: Quarantine.Key) -> String { "host=\(key.target.description) port=\(key.port)" }
}
