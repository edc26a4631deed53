import Foundation

/// A server that serves one connection at a time (`openssl s_server`, a Python server that makes
/// its handshakes in `accept`, many embedded servers) answers one of a tunnel's look-alike
/// connections — the client's or a mirror — and leaves the other without a byte until the first
/// is done, which it never is: the tunnel's flight is held for the mirror, or the mirror waits
/// silent so as not to say which connection was the client's. Waiting for `probe_timeout` to say so
/// left the client with a bare TLS error after 10 s.
///
/// So when one look has its server's answer and another has had no byte back for a grace scaled
/// on how long that answer took, the tunnel is refused `mirror_lost` at once, saying why: before
/// the client has a byte of the server's flight, as at the deadline. Refusing sooner gives an
/// interceptor nothing: it still cannot tell which connection to stall, and a stall refuses.
extension StreamCheck {
    /// When the client's hello and its mirrors' went out, on which loop, and the mirrors' deadline.
    struct LookClock {
        let loop: EventLoop
        let timeout: Double
        let sentAt: ContinuousClock.Instant
    }

    /// How long a look may stay without a byte once another look with the same hello was answered
    /// after `answeredAfter` seconds: at least 250 ms, and eight times that answer (a loaded server
    /// or a long round trip answers both looks late). Measured in `SilentLookTests` and
    /// docs/performance.md: `openssl s_server` is refused within about 0.3 s of the CONNECT.
    static func silentLookGrace(answeredAfter seconds: Double) -> Double { max(0.25, 8 * seconds) }

    /// The tunnel's server sent its first bytes: a mirror still without a byte after the grace is
    /// given up (then the tunnel is refused as for any lost mirror).
    func serverAnsweredTunnel() {
        guard let reading = madeReading, !reading.tunnelAnswered else { return }
        reading.tunnelAnswered = true
        guard case .awaitingServerHello(_, let checks) = phase, checks.mirrors.contains(where: \.isSilent) else { return }
        watchSilence { [weak self] answered, waited in
            guard let self, let checks = phase.tls13Checks else { return }
            for mirror in checks.mirrors where mirror.isSilent {
                mirror.giveUp("the server answered the tunnel in \(answered) ms and has sent pinproxy's look-alike connection (the mirror check) no byte in the \(waited) ms since: a server that serves one connection at a time does that (give its rule mirror_checks: 0), and so does an interceptor that stalls one of the two")
            }
        }
    }

    /// A mirror has its server's answer: a tunnel still without a byte after the grace is refused.
    func serverAnsweredMirror() {
        guard let reading = madeReading, !reading.tunnelAnswered, reading.silenceWatch == nil,
              case .awaitingServerHello = phase else { return }
        watchSilence { [weak self] answered, waited in
            guard let self, let reading = madeReading, !reading.tunnelAnswered,
                  case .awaitingServerHello(_, let checks) = phase else { return }
            checks.stop()
            phase = .done
            deliver(refuse(.mirrorLost, "the server answered pinproxy's look-alike connection (the mirror check) in \(answered) ms and has sent the tunnel no byte in the \(waited) ms since: a server that serves one connection at a time does that (give its rule mirror_checks: 0), and so does an interceptor that stalls one of the two", .now, stage: .mirror))
        }
    }

    /// Runs `expired` after the grace for an answer that came now, if that is before the mirrors'
    /// own deadline (which says the same later); `expired` gets the answer's and the grace's
    /// milliseconds.
    private func watchSilence(_ expired: @escaping (_ answered: Int, _ waited: Int) -> Void) {
        guard let reading = madeReading, let clock = reading.lookClock, reading.silenceWatch == nil else { return }
        let answeredAfter = (ContinuousClock.now - clock.sentAt).seconds
        let grace = Self.silentLookGrace(answeredAfter: answeredAfter)
        guard answeredAfter + grace < clock.timeout else { return }
        let milliseconds = (Int((answeredAfter * 1000).rounded()), Int((grace * 1000).rounded()))
        reading.silenceWatch = Timer(loop: clock.loop, after: grace) { [weak reading] in
            reading?.silenceWatch = nil
            expired(milliseconds.0, milliseconds.1)
        }
    }
}

extension MirrorCheck {
    /// Still reading, and not a byte from the server yet.
    var isSilent: Bool { progress == .pending && !heard && isReading }
}
