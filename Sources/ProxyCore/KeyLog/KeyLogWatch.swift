import Foundation

/// Interest in one client random's key lines; cancelled by `cancel()` or when released.
final class KeyLogWatch {
    private weak var intake: KeyLogIntake?
    private var id: Int?
    private let clientRandom: [UInt8]

    init(intake: KeyLogIntake, id: Int?, clientRandom: [UInt8]) {
        self.intake = intake
        self.id = id
        self.clientRandom = clientRandom
    }

    /// Whether the watch was registered (false: the table was full, or the random not 32 bytes).
    var isActive: Bool { id != nil }

    func cancel() {
        guard let id else { return }
        self.id = nil
        intake?.cancel(id: id, clientRandom: clientRandom)
    }

    deinit { cancel() }
}

@available(*, unavailable) extension KeyLogWatch: Sendable {}
