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

    /// A tunnel opened pinned whose client has not completed its ClientHello yet (a reload that
    /// unpins the host since changes nothing: it entered the worker's books as such).
    var awaitsClientHello: Bool {
        guard openedPinned, case .awaitingClientHello = phase else { return false }
        return true
    }

    /// What the check holds the tunnel for now; nil when it holds nothing back (an unpinned
    /// tunnel's first bytes are held too, until its ClientHello's SNI is read).
    var heldStage: HeldStage? {
        switch phase {
        case .awaitingClientHello: return .clientHello
        case _ where !context.isPinned: return nil
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

    /// `probe_timeout` passed since the client's hello and the tunnel has no ServerHello yet. Whatever
    /// its mirrors heard: a server that sends a look one byte and stalls, or a client that never
    /// sends its second hello after a HelloRetryRequest, holds the tunnel as surely as silence. A
    /// mirror that passed while the tunnel stayed silent is `mirror_lost` (a look-alike connection
    /// was answered and this one not), as its own deadline says.
    private func firstFlightLate(_ milliseconds: Int) {
        let detail: String
        switch phase {
        case .awaitingServerHello(let hello, let checks):
            if checks.mirrors.contains(where: { if case .shown = $0.progress { return true } else { return false } }) {
                return refuseSilentTunnel("the server answered the mirror but not the tunnel within \(milliseconds) ms", hello, checks)
            }
            let mirrors = checks.mirrors.count
            let looks = mirrors == 0 ? "" : mirrors == 1 ? " nor on pinproxy's mirror check" : " nor on any of pinproxy's \(mirrors) mirror checks"
            if madeReading?.helloRetried == true {
                detail = "the handshake did not reach the server's ServerHello within probe_timeout (\(milliseconds) ms) of the client's hello: after the server's HelloRetryRequest, the client's second ClientHello or the server's answer to it did not come"
            } else if madeReading?.tunnelAnswered == true {
                detail = "the server's ServerHello in the tunnel was not complete within probe_timeout (\(milliseconds) ms) of the client's hello"
            } else {
                detail = "the server sent no byte in the tunnel\(looks) within probe_timeout (\(milliseconds) ms) of the client's hello"
            }
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
