import CLibevent
import Foundation
import PinPolicy

/// What a tunnel's stream check runs with from the worker that carries it: its loop, the books the
/// workers share, and the key log.
struct TunnelServices {
    let loop: EventLoop
    let debugBypassEnabled: Bool
    let keyLog: KeyLogSource?
    let quarantine: Quarantine
    let seenHellos: SeenHellos
    let resumptions: ResumptionLedger
}

/// Opening a tunnel that passed: the `200`, then the relay between the client and the dialled
/// upstream with its stream check set up for how the tunnel passed.
enum TunnelOpening {
    /// The relay of a tunnel that passed, not started yet. A pinned rule's tunnel is checked against
    /// the chain its probe judged, with the mirror connections dialled beside it; the relay owns the
    /// client's bufferevent from here (it frees it once the fast relay has the socket).
    static func relay(_ admitted: AskedConnect, _ passage: Passage, settings: ProxySettings, client: BufferEvent,
                      dialled: UpstreamDial.Dialled, services: TunnelServices, noted: @escaping (StreamCheck.Note) -> Void,
                      ended: @escaping (RelayEnd) -> Void) -> Relay {
        let pinning: StreamCheck.Context.Pinning = switch passage {
        case .pinned(let rule, let probe, _): .pinned(rule: rule, probe: probe)
        case .unpinned: .unpinned
        }
        var context = StreamCheck.Context(authority: admitted.authority, snapshot: admitted.snapshot, pinning: pinning,
                                          debugBypassEnabled: services.debugBypassEnabled, keyLog: services.keyLog)
        context.quarantine = services.quarantine
        context.seenHellos = services.seenHellos
        context.deadline = .init(loop: services.loop, seconds: settings.probeTimeout)
        context.mirrorsOff = context.rule?.mirrorChecks == 0
        if !dialled.mirrors.isEmpty {
            context.mirrors = .init(connections: dialled.mirrors, loop: services.loop, timeout: settings.probeTimeout)
        }
        let check = StreamCheck(context, ledger: services.resumptions)
        check.notify = noted
        return Relay(loop: services.loop, client: client, upstream: dialled.upstream, idleTimeout: settings.idleTimeout,
                     helloTimeout: settings.clientHelloTimeout, check: check, method: settings.relay, onEnd: ended)
    }

    /// The `200`, straight to the socket when nothing waits before it (always, when a tunnel
    /// opens): the client has it before the decision line is built (a third of a warm pinned
    /// CONNECT's instructions), not after the loop's next turn. What the socket does not take at
    /// once goes through the bufferevent as before.
    static func sendEstablished(on side: BufferEvent) {
        var sent = 0
        if evbuffer_get_length(side.output) == 0 {
            sent = max(0, established.withUnsafeBytes { send(side.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) })
        }
        if sent < established.count { evbuffer_add(side.output, established.withUnsafeBytes { $0.baseAddress! + sent }, established.count - sent) }
    }

    private static let established = Array("HTTP/1.1 200 Connection established\r\n\r\n".utf8)
}
