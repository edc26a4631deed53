import Foundation
import TLSInspection

/// Every look of a pinned tunnel has a deadline. The mirrors have theirs (`MirrorCheck`), the key
/// log its `wait`; this is the tunnel's own: from the client's hello, the server has `probe_timeout`
/// — the probe's deadline — to send its first flight up to where the check can speak (a TLS 1.3
/// ServerHello, a TLS ≤ 1.2 Certificate). A server that answers neither the tunnel nor a mirror
/// would otherwise hold the tunnel, its client and its descriptors until `idle_timeout`.
extension StreamCheck {
    /// Where the check arms its timers.
    struct Deadline {
        let loop: EventLoop
        /// `probe_timeout`.
        let seconds: Double
    }

    /// What a pinned tunnel's check holds the tunnel for, while it holds it: the `stage` of a
    /// `tunnel_closed` line whose client left then.
    enum HeldStage: String, Sendable {
        /// The client's ClientHello is not complete.
        case clientHello = "client_hello"
        /// The client's hello went out; the server's first bytes (its ServerHello) are awaited.
        case serverHello = "server_hello"
        /// TLS ≤ 1.2: the server's flight is held until its Certificate is judged.
        case certificate
        /// TLS 1.3: the server's encrypted flight is held for the client's key-log line.
        case keylog
        /// TLS 1.3: the server's encrypted flight is held for the mirror checks.
        case mirror
    }

    /// A pinned tunnel whose client has not completed its ClientHello yet.
    var awaitsClientHello: Bool {
        guard context.isPinned, case .awaitingClientHello = phase else { return false }
        return true
    }

    /// What the check holds the tunnel for now; nil when it holds nothing back.
    var heldStage: HeldStage? {
        guard context.isPinned else { return nil }
        switch phase {
        case .awaitingClientHello: return .clientHello
        case .awaitingServerHello: return .serverHello
        case .tls12Certificate, .tls12Chain: return .certificate
        case .tls13Held(_, let checks): return checks.keyLog?.holding == true ? .keylog : .mirror
        case .tls12Judged, .resumption, .watchingApplicationData, .done: return nil
        }
    }

    /// The client's hello is complete: the server's first flight is due within `probe_timeout`.
    func armFirstFlightDeadline() {
        guard let deadline = context.deadline, let reading = madeReading else { return }
        let milliseconds = Int((deadline.seconds * 1000).rounded())
        reading.firstFlightDeadline = Timer(loop: deadline.loop, after: deadline.seconds) { [weak self] in
            self?.madeReading?.firstFlightDeadline = nil
            self?.firstFlightLate(milliseconds)
        }
    }

    /// `probe_timeout` passed since the client's hello. A tunnel whose mirror was answered is left to
    /// the mirror's own watch (`tunnelLate`, a silent look): that is `mirror_lost`, not a server that
    /// answers no one.
    private func firstFlightLate(_ milliseconds: Int) {
        let detail: String
        switch phase {
        case .awaitingServerHello(_, let checks):
            guard !checks.mirrors.contains(where: \.heard) else { return }
            let mirrors = checks.mirrors.count
            let looks = mirrors == 0 ? "" : mirrors == 1 ? " nor on pinproxy's mirror check" : " nor on any of pinproxy's \(mirrors) mirror checks"
            detail = madeReading?.tunnelAnswered == true
                ? "the server's ServerHello in the tunnel was not complete within probe_timeout (\(milliseconds) ms) of the client's hello"
                : "the server sent no byte in the tunnel\(looks) within probe_timeout (\(milliseconds) ms) of the client's hello"
        case .tls12Certificate, .tls12Chain:
            detail = "the server's first flight in the tunnel did not reach its Certificate within probe_timeout (\(milliseconds) ms) of the client's hello"
        case .awaitingClientHello, .tls12Judged, .resumption, .tls13Held, .watchingApplicationData, .done:
            return
        }
        phase.tls13Checks?.stop()
        phase = .done
        deliver(refuse(.firstFlightTimeout, detail, .now))
    }
}
