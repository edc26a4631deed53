import Foundation
import PinPolicy
import TLSInspection

/// One more mirror of a client's hello, on a fresh connection to the address its tunnel used,
/// opened after a look with that hello showed a proved chain that fails the rule and nothing else
/// had looked with the same hello (`SameHelloLooks`). The tunnel is refused already (fail closed);
/// this decides only whether that refusal is an incident:
///
/// - the server proves a chain that passes: it answered the same hello two ways, which a genuine
///   server does not do and a guessing interceptor does — `interception_suspected`, quarantine;
/// - it proves a failing chain again: the server's own answer to this client's hello (dual
///   certificates, a vhost, an ALPN challenge certificate) or a key change — `chain_confirmed`,
///   no incident;
/// - no proved chain (an alert, silence, a retry it cannot follow): nothing is concluded.
///
/// Bound to its worker's loop thread; the worker keeps it until `done` is called.
final class ConfirmingLook {
    enum Outcome {
        /// A proved chain that passes the rule (judged).
        case passes(StreamSummary.JudgedChain)
        /// A proved chain that fails the rule too.
        case failsAgain(StreamSummary.JudgedChain)
        /// No proved chain: why.
        case undecided(String)
    }

    private let connection: MirrorConnection
    private var handshake: MirrorHandshake?
    private let judge: LookJudge
    private var deadline: Timer?
    private var done: ((Outcome) -> Void)?

    /// Connects to `addresses` (through `hop` behind a parent proxy) and sends a fresh mirror of
    /// `hello`, carried in `records` as the client sent it; `done` is called once, on a later
    /// loop turn at the earliest.
    init(loop: EventLoop, addresses: [SocketAddress], hop: ParentHop?, connectTimeout: Double, timeout: Double,
         hello: ClientHello, records: [UInt8], judge: LookJudge, done: @escaping (Outcome) -> Void) {
        self.judge = judge
        self.done = done
        connection = MirrorConnection(loop: loop, addresses: addresses, perAddress: connectTimeout, total: timeout, through: hop)
        let mirror: MirrorHello
        do {
            mirror = try MirrorHello(of: hello, records: records, tls12: true)
        } catch {
            finishLater(loop, .undecided("the client's ClientHello cannot be mirrored: \(error)"))
            return
        }
        if let end = connection.ended {  // the connect failed at once
            finishLater(loop, Self.undecided(after: end))
            return
        }
        handshake = MirrorHandshake(hello: mirror)
        connection.onBytes = { [weak self] bytes in self?.serverBytes(bytes) }
        connection.onEnd = { [weak self] end in self?.connectionEnded(end) }
        connection.send(mirror.bytes, order: .beforeClient)
        let milliseconds = Int((timeout * 1000).rounded())
        deadline = Timer(loop: loop, after: timeout) { [weak self] in
            self?.finish(.undecided("the server did not answer the confirming look within \(milliseconds) ms"))
        }
    }

    deinit { connection.close() }

    private func serverBytes(_ bytes: UnsafeRawBufferPointer) {
        guard var reading = handshake else { return }
        handshake = nil  // mutated in place, not copied per chunk
        let verdict = reading.feed(bytes)
        handshake = reading
        switch verdict {
        case .pending:
            return
        case .helloRetry:
            // No client here to mirror a second hello from: the one a client would send.
            do {
                let second = try reading.secondHelloAnsweringRetry()
                handshake = reading
                connection.send(second, order: .beforeClient)
            } catch {
                finish(.undecided("the confirming look cannot answer the server's HelloRetryRequest: \(error)"))
            }
        case .tls12(let chain):
            conclude(chain, delivered: .none)
        case .verified(let flight):
            conclude(flight.chain, delivered: DeliveredSCTs(flight))
        case .unverifiable(let why):
            finish(.undecided("\(why)"))
        case .failed(let why):
            finish(.undecided("\(why)"))
        }
    }

    private func conclude(_ chain: [[UInt8]], delivered: DeliveredSCTs) {
        guard let judged = judge.judge(chain, delivered: delivered, at: Date()) else {
            return finish(.undecided("a certificate the server sent the confirming look does not parse"))
        }
        finish(judged.passes ? .passes(judged) : .failsAgain(judged))
    }

    private func connectionEnded(_ end: MirrorConnection.End) { finish(Self.undecided(after: end)) }

    private static func undecided(after end: MirrorConnection.End) -> Outcome {
        switch end {
        case .connectFailed(let why): return .undecided("the confirming look's connection could not be made: \(why)")
        case .closed(let why): return .undecided("the confirming look's connection ended before a proved chain: \(why)")
        case .closedByPinproxy: return .undecided("closed")
        }
    }

    /// A decision reached inside the constructor is told on the loop's next turn, so the worker
    /// has stored this look before it hears of its end.
    private func finishLater(_ loop: EventLoop, _ outcome: Outcome) {
        deadline = Timer(loop: loop, after: 0) { [weak self] in self?.finish(outcome) }
    }

    private func finish(_ outcome: Outcome) {
        guard let done else { return }
        self.done = nil
        deadline = nil
        handshake = nil  // drops the mirror's private keys
        connection.close()
        done(outcome)
    }
}

@available(*, unavailable) extension ConfirmingLook: Sendable {}
