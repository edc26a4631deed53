import Foundation
import TLSInspection

/// A server that serves one connection at a time (`openssl s_server`, a Python server that makes
/// its handshakes in `accept`, many embedded servers) answers one of a tunnel's look-alike
/// connections — the client's or a mirror — and leaves the other without a byte until the first
/// is done, which it never is: the tunnel's flight is held for the mirror, or the mirror waits
/// silent so as not to say which connection was the client's. Waiting for `probe_timeout` to say so
/// left the client with a bare TLS error after 10 s.
///
/// So from the first byte any look gets, a look that has had no byte back within a grace scaled
/// on how long that first answer took ends the wait: a silent mirror is lost (and the tunnel
/// refused as for any lost mirror), a silent tunnel is refused `mirror_lost`, before the client has
/// a byte of the server's flight. The watch starts the same way whichever look answered first, so
/// when pinproxy gives up says nothing of which connection was the client's; and refusing sooner
/// admits nothing.
extension StreamCheck {
    /// When the client's hello and its mirrors' went out, on which loop, and the mirrors' deadline.
    struct LookClock {
        let loop: EventLoop
        let timeout: Double
        let sentAt: ContinuousClock.Instant
    }

    /// How long a look may stay without a byte once another look with the same hello had its first
    /// byte after `answeredAfter` seconds: at least 250 ms, and eight times that answer (a loaded
    /// server or a long round trip answers both looks late). Measured by Benchmarks/oneatatime.sh
    /// (docs/performance.md): `openssl s_server` is refused about 0.26 s after the CONNECT.
    static func silentLookGrace(answeredAfter seconds: Double) -> Double { max(0.25, 8 * seconds) }

    /// The tunnel's server sent its first bytes.
    func serverAnsweredTunnel() {
        guard let reading = madeReading, !reading.tunnelAnswered else { return }
        reading.tunnelAnswered = true
        watchForASilentLook()
    }

    /// A mirror's server sent its first bytes.
    func serverAnsweredMirror() { watchForASilentLook() }

    /// Arms the watch at the first byte of any look, unless every look has already answered, the
    /// client offered a resumption (the tunnel may resume in a round trip while the mirror makes a
    /// full handshake: a slow signer is no silence), or the mirrors' own deadline comes first.
    private func watchForASilentLook() {
        guard let reading = madeReading, reading.silenceWatch == nil, let clock = reading.lookClock,
              case .awaitingServerHello(let hello, let checks) = phase, hello.pskIdentities.isEmpty,
              !reading.tunnelAnswered || checks.mirrors.contains(where: \.isSilent) else { return }
        let answeredAfter = (ContinuousClock.now - clock.sentAt).seconds
        let grace = Self.silentLookGrace(answeredAfter: answeredAfter)
        guard answeredAfter + grace < clock.timeout else { return }
        let answered = Int((answeredAfter * 1000).rounded()), waited = Int((grace * 1000).rounded())
        reading.silenceWatch = Timer(loop: clock.loop, after: grace) { [weak self] in
            self?.madeReading?.silenceWatch = nil
            self?.silentLookFound(answered: answered, waited: waited)
        }
    }

    /// The grace ended: what is still silent ends the wait.
    private func silentLookFound(answered: Int, waited: Int) {
        guard let reading = madeReading, case .awaitingServerHello(let hello, let checks) = phase else {
            // The tunnel's ServerHello came: only its mirrors can still be silent.
            for mirror in phase.tls13Checks?.mirrors ?? [] where mirror.isSilent { mirror.giveUp(Self.silentMirror(answered, waited)) }
            return
        }
        guard !reading.tunnelAnswered else {
            for mirror in checks.mirrors where mirror.isSilent { mirror.giveUp(Self.silentMirror(answered, waited)) }
            return
        }
        refuseSilentTunnel("a look-alike connection of this tunnel got the server's first bytes after \(answered) ms and the tunnel has had no byte in the \(waited) ms since: \(Self.why)",
                           hello, checks)
    }

    /// Refuses a tunnel whose server has sent it no byte while a mirror was answered. Let through
    /// (report mode, a debug bypass: noted as a would-refuse), nothing is delivered — there is
    /// nothing held — and the tunnel's own answer is judged when it comes (a TLS 1.2 chain; TLS 1.3
    /// rests on the probe), without the mirrors: `.done` would end the inspection unjudged.
    func refuseSilentTunnel(_ detail: String, _ hello: ClientHello, _ checks: TLS13Checks) {
        let answer = refuse(.mirrorLost, detail, .now, stage: .mirror)
        for mirror in checks.mirrors { mirror.stop() }
        guard case .refuse = answer else {
            phase = .awaitingServerHello(hello, TLS13Checks(keyLog: checks.keyLog, mirrors: []))
            return
        }
        checks.keyLog?.stop()
        phase = .done
        deliver(answer)
    }

    private static let why = "a server that serves one connection at a time does that (give its rule mirror_checks: 0), and so does an interceptor that stalls one of the two"

    private static func silentMirror(_ answered: Int, _ waited: Int) -> String {
        "a look-alike connection of this tunnel got the server's first bytes after \(answered) ms and pinproxy's mirror check has had no byte in the \(waited) ms since: \(why)"
    }
}

extension MirrorCheck {
    /// Still reading, and not a byte from the server yet.
    var isSilent: Bool { progress == .pending && !heard && isReading }
}
