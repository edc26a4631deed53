import Foundation
import TLSInspection

/// The mirror check of one pinned TLS 1.3 tunnel, part of the stream check: on its own connection, opened
/// with the tunnel's, it sends a mirror of the client's ClientHello — the same bytes but for what
/// must be fresh (random, session id, key shares of pinproxy's own, PSK fields) — in random order
/// with the client's, computes the handshake secrets itself, and reads the chain the server shows
/// *this* ClientHello, signed over the mirror's transcript. An interceptor that cannot tell the two
/// connections apart cannot choose the client's without risking the mirror's.
///
/// What the chain means is the stream check's business; this says only what the mirror saw.
final class MirrorCheck {
    enum Progress: Equatable {
        case pending
        /// The server showed this chain and proved its key (TLS 1.3: CertificateVerify over the
        /// mirror's transcript and Finished; TLS ≤ 1.2: in clear, as the stream check reads it).
        case shown(chain: [[UInt8]], version: UInt16, delivered: DeliveredSCTs)
        /// The mirror's flight parsed but does not verify: a CertificateVerify or Finished that
        /// fails, records that do not open under the mirror's own secret.
        case invalid(String)
        /// The server's answer proves no chain: an alert, bytes that do not parse, a key share or
        /// retry pinproxy cannot follow.
        case failed(String)
        /// The server did not answer the mirror as it answered the tunnel: the connection failed,
        /// closed or stayed silent. Killing one of two look-alike connections must not buy an
        /// interceptor the other, so this refuses the tunnel too.
        case lost(String)
        /// The mirror cannot be made or read for what the client offered or the server chose (a
        /// group or suite pinproxy cannot compute, a hello it cannot parse): said in the log.
        case unavailable(String)
    }

    private enum Phase {
        /// The mirror hello went out; the server's answer is being read.
        case reading(MirrorHandshake)
        /// The server sent a HelloRetryRequest to the mirror: waiting for the client's second hello
        /// (which it sends once the tunnel's own retry reached it).
        case awaitingSecondHello(MirrorHandshake)
        case decided
    }

    private let connection: MirrorConnection
    private let loop: EventLoop
    /// Tells `onProgress` on a loop turn of its own.
    private var notifyTimer: Timer?
    private var firstByteTimer: Timer?
    private var phase: Phase
    private(set) var progress: Progress = .pending
    /// The client's bytes after its first hello: its second hello after a retry, early data.
    private var clientReader: ClientFlightReader
    private var clientRecords = MirrorClientRecords()
    /// The client's second hello, when it came before the mirror's retry.
    private var secondHello: ClientHello?
    /// The records that carried it (a compatibility ChangeCipherSpec included).
    private var secondFlight: [UInt8] = []
    /// The mirror's server asked for another group by a HelloRetryRequest.
    private var retried = false
    /// The tunnel's server answered the client's hello without a HelloRetryRequest: a retry the
    /// mirror gets is answered by the mirror itself.
    private var tunnelGotNoRetry = false
    private var deadline: Timer?
    /// The server has sent the mirror a byte.
    private(set) var heard = false
    /// Called at the server's first byte on the mirror connection.
    var onFirstByte: (() -> Void)?
    /// Called once when the mirror decides, on a loop turn after the decision.
    var onProgress: ((Progress) -> Void)?
    /// What the stream check made of it, once it decided (its chain judged under the rule).
    var finding: MirrorFinding?
    /// The deadline passed after the mirror decided, and the check still runs: the tunnel's own
    /// server has not answered (a server that serves one connection at a time, busy with the
    /// silent mirror, or an interceptor stalling the tunnel).
    var tunnelLate: ((String) -> Void)?

    /// Sends the mirror of `hello` (whose records were `flight`) on `connection`, in `order` with the
    /// client's hello; gives up after `timeout` seconds. `reader` read the hello (a second one
    /// after a retry continues from there).
    init(connection: MirrorConnection, hello: ClientHello, flight: [UInt8], reader: ClientFlightReader, order: MirrorConnection.Order,
         loop: EventLoop, timeout: Double) {
        self.connection = connection
        self.clientReader = reader
        self.loop = loop
        phase = .decided
        let mirror: MirrorHello
        do {
            mirror = try MirrorHello(of: hello, records: flight)
        } catch {
            decide(.unavailable("the client's ClientHello cannot be mirrored: \(error)"))
            return
        }
        if let end = connection.ended {
            decide(Self.progress(after: end))
            return
        }
        phase = .reading(MirrorHandshake(hello: mirror))
        connection.onBytes = { [weak self] bytes in self?.serverBytes(bytes) }
        connection.onEnd = { [weak self] end in self?.decide(Self.progress(after: end)) }
        connection.send(mirror.bytes, order: order)
        let milliseconds = Int((timeout * 1000).rounded())
        deadline = Timer(loop: loop, after: timeout) { [weak self] in
            guard let self else { return }
            guard progress == .pending else {
                tunnelLate?("the server answered the mirror but not the tunnel within \(milliseconds) ms")
                return
            }
            decide(.lost("the server did not answer the mirror within \(milliseconds) ms"))
        }
    }

    /// A mirror connection that failed while the tunnel's was made is lost like one closed after its
    /// hello: an interceptor that refused one of two look-alike connects at random must not win
    /// the other by it.
    static func progress(after end: MirrorConnection.End) -> Progress {
        switch end {
        case .connectFailed(let why): return .lost("the mirror connection could not be made while the tunnel's was: \(why)")
        case .closed(let why): return .lost("the mirror connection ended before the server's flight: \(why)")
        case .closedByPinproxy: return .lost("closed")
        }
    }

    /// Still reading the server's first answer.
    var isReading: Bool {
        if case .reading = phase { return true }
        return false
    }

    /// The server answered another look with this hello and left this one silent for the grace
    /// (`StreamCheck+SilentLook`): lost now rather than at the deadline.
    func giveUp(_ detail: String) {
        guard isSilent else { return }
        decide(.lost(detail))
    }

    /// Stops: closes the mirror connection, drops its secrets.
    func stop() {
        phase = .decided
        deadline = nil
        notifyTimer = nil
        firstByteTimer = nil
        onProgress = nil
        onFirstByte = nil
        tunnelLate = nil
        connection.close()
    }

    private func decide(_ outcome: Progress) {
        guard progress == .pending else { return }
        progress = outcome
        phase = .decided
        if case .shown = outcome {} else { deadline = nil }  // a pass waits on for the tunnel's answer
        // The connection stays open, silent, until the stream check stops this check — after the
        // tunnel's own ServerHello, when whoever answers has committed to the tunnel's server. A
        // mirror closed as soon as it verified would tell an interceptor that held the other
        // connection back which of the two was the client's.
        // Told on a turn of its own: a decision reached inside the relay's call (the client's
        // bytes, the tunnel's ServerHello) must not act on the relay from within that call.
        notifyTimer = Timer(loop: loop, after: 0) { [weak self] in
            guard let self, let notify = onProgress else { return }
            onProgress = nil
            notifyTimer = nil
            notify(outcome)
        }
    }

    // MARK: the server's answer

    private func serverBytes(_ bytes: UnsafeRawBufferPointer) {
        if !heard {
            heard = true
            // On a turn of its own, as a decision is told: the watch must not act inside this read.
            let first = onFirstByte
            onFirstByte = nil
            if let first { firstByteTimer = Timer(loop: loop, after: 0) { [weak self] in self?.firstByteTimer = nil; first() } }
        }
        guard case .reading(var handshake) = phase else {
            if case .awaitingSecondHello = phase { decide(.failed("the server went on past its HelloRetryRequest before the mirror's second hello")) }
            return
        }
        phase = .decided  // mutated in place, not copied per chunk
        let verdict = handshake.feed(bytes)
        phase = .reading(handshake)
        answer(verdict, handshake)
    }

    private func answer(_ verdict: MirrorVerdict, _ handshake: MirrorHandshake) {
        switch verdict {
        case .pending:
            break
        case .helloRetry:
            phase = .awaitingSecondHello(handshake)
            if let second = secondHello {
                retry(with: second)
            } else if tunnelGotNoRetry {
                answerRetryItself()
            }
        case .tls12(let chain):
            decide(.shown(chain: chain, version: 0x0303, delivered: .none))  // TLS-extension SCTs of a 1.2 mirror are not kept
        case .verified(let flight):
            decide(.shown(chain: flight.chain, version: 0x0304, delivered: DeliveredSCTs(flight)))
        case .unverifiable(let why):
            // Only a key share the client itself sent, in a group pinproxy cannot compute (FFDHE;
            // a share of any other such group stops the mirror before it is sent), leaves the
            // tunnel to the probe, saying so. Anything else the server alone chose — a suite
            // pinproxy does not open, a retry to such a group, a resumption of the mirror's random
            // ticket or session — an interceptor could choose for every connection to blind the
            // mirror and take the client's: not an answer.
            if case .group = why, !retried { return decide(.unavailable(why.description)) }
            decide(.lost("the server answered the mirror with what pinproxy cannot check: \(why)"))
        case .failed(let why):
            decide(why.isUnprovedFlight ? .invalid(why.description) : .failed(why.description))
        }
    }

    private func retry(with second: ClientHello) {
        guard case .awaitingSecondHello(var handshake) = phase else { return }
        do {
            let bytes = try handshake.secondHello(mirroring: second, records: secondFlight)
            retried = true
            phase = .reading(handshake)
            connection.send(bytes, order: .random())
        } catch MirrorError.uncomputableShare(let group) {
            // The server alone asked for a group pinproxy cannot compute: as with any retry to such
            // a group, not an answer (an interceptor could ask it of every mirror).
            decide(.lost("the mirror's HelloRetryRequest asks for group \(String(format: "0x%04x", group)), which pinproxy cannot compute"))
        } catch {
            // The client's retry and the mirror's disagree (another group, a cookie in one only):
            // the two connections were answered differently, which a server does not do.
            decide(.lost("the mirror's HelloRetryRequest does not match the client's: \(error)"))
        }
    }

    /// The tunnel's server answered with its real ServerHello. A mirror waiting for the client's
    /// second hello (or that gets a retry later) will not get one: the server asked the mirror for
    /// another key share but not the client. Behind a balancer whose backends prefer different
    /// groups that is an ordinary answer, so the mirror answers the retry as the client would
    /// (RFC 8446 §4.1.2) and reads on; what it is then shown is judged as any mirror's.
    func tunnelAnswered() {
        tunnelGotNoRetry = true
        guard case .awaitingSecondHello = phase, secondHello == nil else { return }
        answerRetryItself()
    }

    private func answerRetryItself() {
        guard case .awaitingSecondHello(var handshake) = phase else { return }
        do {
            let bytes = try handshake.secondHelloAnsweringRetry()
            retried = true
            phase = .reading(handshake)
            connection.send(bytes, order: .beforeClient)  // no client's bytes to go with
        } catch {
            decide(.lost("the server sent the mirror a HelloRetryRequest but not the client, and the mirror cannot answer it: \(error)"))
        }
    }

    // MARK: the client's bytes after its first hello

    /// The client's bytes after its first ClientHello: a compatibility ChangeCipherSpec is copied,
    /// early data goes as random records of the same lengths, a second hello (after a retry) is
    /// mirrored. Read only while the mirror is undecided, and bounded.
    func clientBytes(_ bytes: UnsafeRawBufferPointer) {
        guard progress == .pending else { return }
        let records: [MirrorClientRecords.Record]
        do {
            records = try clientRecords.feed(bytes)
        } catch {
            return decide(.unavailable("the client's records after its hello: \(error)"))
        }
        for record in records {
            switch record.type {
            case 20:  // change_cipher_spec: one byte, the same for everyone
                connection.send(record.bytes, order: .random())
                if secondHello == nil { secondFlight += record.bytes }
            case 23:  // early data: what the server would skip, of the same length
                var early = MirrorEarlyData()
                connection.send(early.mirror(record.bytes), order: .random())
            case 22:
                secondFlight += record.bytes
                do {
                    guard let second = try clientReader.readSecondHello(record.bytes) else { continue }
                    secondHello = second
                    retry(with: second)
                } catch {
                    return decide(.unavailable("the client's second ClientHello does not parse: \(error)"))
                }
            default:
                break
            }
        }
    }
}

/// Splits the client's byte stream after its first hello into whole records (bounded).
struct MirrorClientRecords {
    struct Record {
        let type: UInt8
        /// Header and payload.
        let bytes: [UInt8]
    }

    enum Problem: Error, CustomStringConvertible {
        case tooMuch
        var description: String { "over 64 KiB before the mirror decided" }
    }

    private var pending: [UInt8] = []
    private var total = 0

    mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(Problem) -> [Record] {
        total += bytes.count
        guard total <= 64 * 1024 else { throw .tooMuch }
        pending += bytes
        var records: [Record] = []
        var offset = 0
        while offset + 5 <= pending.count {
            let length = Int(pending[offset + 3]) << 8 | Int(pending[offset + 4])
            guard offset + 5 + length <= pending.count else { break }
            records.append(Record(type: pending[offset], bytes: Array(pending[offset..<(offset + 5 + length)])))
            offset += 5 + length
        }
        pending.removeFirst(offset)
        return records
    }
}

@available(*, unavailable) extension MirrorCheck: Sendable {}

extension MirrorFailure {
    /// The flight was read but its proof failed: the server (or whoever answered) did not sign
    /// this handshake with the chain's key, or used another secret than the mirror's.
    var isUnprovedFlight: Bool {
        guard case .flight(let error) = self else { return false }
        switch error {
        case .certificateVerifyFailed, .finishedMismatch, .undecryptable: return true
        case .unsupportedSuite, .malformed, .tooLarge: return false
        }
    }
}
