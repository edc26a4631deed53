import Foundation
import PinPolicy
import TLSInspection

/// Whether a server answers a second TLS connection while a first one is open. pinproxy's mirror
/// check (TLS 1.3 without a key log) opens its connection at the same moment as the client's, and
/// holds the client's flight until the mirror is answered: a server that serves one connection at
/// a time (`openssl s_server`, a Python `ssl.wrap_socket` server, some embedded ones) never answers
/// the second while the first waits, so every such tunnel is refused `mirror_lost`. `pinproxy pin`
/// and `check --probe` ask this before anyone hits it, and say `mirror_checks: 0` for such a rule.
public enum ServerConcurrency: Equatable, Sendable {
    /// The second connection's handshake completed while the first was held open.
    case concurrent
    /// The second connection got no answer while the first was open, and completed its handshake
    /// once the first was closed.
    case oneAtATime
    /// Neither could be told: why, in words (the first or the second connection failed, or the
    /// second got no answer even after the first closed).
    case undetermined(String)
}

/// Two handshakes with one server address: the first completes and is held open; the second is
/// made then. If the second gets no handshake within a bound, the first is closed, and a second
/// handshake that then completes shows a server that serves one connection at a time.
public enum ConcurrencyProbe {
    /// How long the second handshake has while the first is held: the first's own handshake time
    /// ten times over (a loaded server answers the second about as fast as the first), and at least
    /// `minimumWait`, at most `probe_timeout`.
    static func wait(firstHandshake seconds: Double, probeTimeout: Double) -> Double {
        min(probeTimeout, max(minimumWait, 10 * seconds))
    }

    /// Two seconds: a server that serves connections side by side answers a second one on loopback
    /// within milliseconds, even on a loaded machine; one that serves one at a time never does.
    static let minimumWait = 2.0

    /// How one of the two handshakes ended.
    private enum Look {
        case connectFailed(String)
        case probed(ProbeResult)
    }

    /// Two handshakes with `authority` at `address` (the one a probe verified), as the proxy makes
    /// them: through `proxy.upstream_proxy` when it is set.
    public static func run(_ authority: Authority, at address: SocketAddress, settings: ProxySettings) -> ServerConcurrency {
        let hop = settings.upstreamProxy.map { ParentHop(parent: $0, target: authority) }
        let address = hop?.parent.address ?? address
        let serverName: String? = if case .name(let name) = authority.target { name } else { nil }
        let loop = EventLoop()
        let context = ProbeTLSContext()
        var verdict: ServerConcurrency?
        var connectors: [Connector] = []
        var probes: [Probe] = []
        var timers: [Timer] = []
        func finish(_ result: ServerConcurrency) {
            guard verdict == nil else { return }
            verdict = result
            loop.stop()
        }
        /// Connects and shakes hands; the first look holds its connection open after its chain.
        func look(holds: Bool, _ done: @escaping (Look) -> Void) {
            connectors.append(Connector(loop: loop, addresses: [address], perAddress: settings.connectTimeout,
                                        total: settings.connectTotalTimeout, through: hop) { outcome in
                switch outcome {
                case .failed(let refusal): done(.connectFailed(refusal.detail))
                case .connected(let fd, let connected):
                    // The first is an ordinary probe. The second's own timeout is longer than the
                    // waits below (beside the first, then after it): they decide, not it.
                    probes.append(Probe(loop: loop, context: context, fd: fd, address: connected, serverName: serverName,
                                        timeout: holds ? settings.probeTimeout : 2 * settings.probeTimeout + 1,
                                        holdsConnection: holds) { done(.probed($0)) })
                }
            })
        }

        let started = ContinuousClock.now
        look(holds: true) { first in
            guard case .probed(let held) = first, case .chain = held.outcome else {
                return finish(.undetermined("the first handshake failed: \(Self.detail(first))"))
            }
            let patience = wait(firstHandshake: (ContinuousClock.now - started).seconds, probeTimeout: settings.probeTimeout)
            var firstClosed = false
            look(holds: false) { second in
                guard case .probed(let answered) = second, case .chain = answered.outcome else {
                    return finish(.undetermined("a second handshake \(firstClosed ? "after" : "beside") the first failed: \(Self.detail(second))"))
                }
                finish(firstClosed ? .oneAtATime : .concurrent)
            }
            timers.append(Timer(loop: loop, after: patience) {
                // No answer beside the first: close it, and see whether the second is answered now.
                firstClosed = true
                probes.first?.cancel()  // the first look's probe: the second starts only once it has its chain
                timers.append(Timer(loop: loop, after: settings.probeTimeout) {
                    finish(.undetermined("a second connection got no TLS answer within \(Int(patience)) s beside the first, nor within \(Int(settings.probeTimeout)) s after the first closed"))
                })
            })
        }
        // Bounded: each step has its own deadline; this is the backstop.
        let backstop = Timer(loop: loop, after: 2 * (settings.connectTotalTimeout + settings.probeTimeout) + 1) {
            finish(.undetermined("no answer in time"))
        }
        if verdict == nil { loop.run() }
        // Free the bufferevents and sockets while the loop's base still exists.
        withExtendedLifetime(loop) {
            backstop.cancel()
            timers.forEach { $0.cancel() }
            probes.forEach { $0.cancel() }
            connectors.forEach { $0.cancel() }
            timers = []
            probes = []
            connectors = []
        }
        return verdict ?? .undetermined("no answer in time")
    }

    private static func detail(_ look: Look) -> String {
        switch look {
        case .connectFailed(let detail): return detail
        case .probed(let result):
            if case .failed(let refusal) = result.outcome { return refusal.detail }
            return "no chain"
        }
    }
}
