import Foundation
import TLSInspection

/// Where the TLS 1.3 check gets a client's key-log lines and its timers: the intake on the proxy's
/// loop (or a test's source).
protocol KeyLogSource: AnyObject {
    /// How long a tunnel waits for its client's line once the ServerHello passed.
    var waitSeconds: Double { get }
    /// Where clients write their lines (for the messages that tell them).
    var path: String { get }
    /// Delivers the kept lines for one ClientHello's random until the token is released.
    func follow(clientRandom: [UInt8], _ deliver: @escaping (KeyLogDelivery) -> Void) -> AnyObject
    /// Reads what the key log holds now (before a line is declared missing), then runs `done` after
    /// the deliveries that read made.
    func readNow(then done: @escaping () -> Void)
    /// Runs `action` once after `seconds`, unless the token is released first.
    func after(_ seconds: Double, _ action: @escaping () -> Void) -> AnyObject
}

/// The key-log half of the TLS 1.3 stream check: it follows the client's key log for this
/// handshake, keeps the transcript of the hellos pinproxy relayed, opens the server's held flight
/// with the client's SERVER_HANDSHAKE_TRAFFIC_SECRET (TLSInspection verifies CertificateVerify and
/// Finished), and afterwards reads the tickets the server issues with SERVER_TRAFFIC_SECRET_0.
/// What the chain means is the stream check's business; this says only what the flight holds.
final class KeyLogCheck {
    enum Progress: Equatable {
        /// Nothing to say yet: the flight stays held.
        case pending
        /// The flight opened under the client's secret, signed by its leaf's key (an empty chain:
        /// a resumption, whose Finished was verified).
        case opened(TLS13VerifiedFlight)
        /// No line for this handshake within the wait.
        case missing
        /// A line that does not open the flight, a conflicting line, a flight that does not parse.
        case invalid(Invalid)
    }

    private enum Phase {
        /// Reading the hellos: ClientHello, and after a HelloRetryRequest the client's second one.
        case hellos(transcript: [[UInt8]], retried: Bool)
        /// The ServerHello passed; the server's encrypted flight is held until it opens.
        case holding(TLS13ServerFlight, suite: UInt16, fed: [UInt8])
        /// The ServerHello chose what pinproxy cannot open (a cipher suite it does not know): the
        /// flight is held all the same until a line comes (then it is refused: nothing was
        /// verified) or the wait runs out (as without a line).
        case unopenable(reason: String, held: Int)
        /// Opened: the stream check judges the chain; the server's later bytes wait here.
        case opened(suite: UInt16, after: [UInt8])
        /// The chain was accepted: the records after the flight, until the tickets are read.
        case readingTickets(TLS13TicketReader)
        case over
    }

    private let source: KeyLogSource
    private var phase: Phase
    private var follow: AnyObject?
    private var waitTimer: AnyObject?
    private var handshakeSecret: SecretBytes?
    private var trafficSecret: SecretBytes?
    /// The label of a second, different line for a secret already given: nothing it opens is trusted.
    private var conflict: String?
    /// The client's bytes after its first ClientHello, read for a second one after a retry.
    private var clientReader: ClientFlightReader
    private var clientAfterHello: [UInt8] = []
    /// Called when a line or the wait decides something the bytes did not.
    var onProgress: ((Progress) -> Void)?
    /// Called with the tickets read after a verified handshake.
    var onTickets: (([[UInt8]]) -> Void)?

    /// Starts following the key log for `hello`'s random. `reader` is the client reader that read
    /// it (the second ClientHello after a retry continues from there).
    init(source: KeyLogSource, hello: ClientHello, reader: ClientFlightReader) {
        self.source = source
        self.clientReader = reader
        phase = .hellos(transcript: [hello.raw], retried: false)
        follow = source.follow(clientRandom: hello.random) { [weak self] delivery in self?.received(delivery) }
    }

    /// The real ServerHello passed: every later server byte is the check's (held, then tickets).
    private(set) var pastServerHello = false

    /// The server's flight is held until it opens (or a line or the wait decides).
    var holding: Bool {
        switch phase {
        case .holding, .unopenable: return true
        case .hellos, .opened, .readingTickets, .over: return false
        }
    }

    /// The client's second ClientHello, after a HelloRetryRequest: the one the server answered.
    private(set) var secondHello: ClientHello?

    /// Whether a line for this handshake has arrived (it may not have opened anything yet).
    var sawLine: Bool { handshakeSecret != nil || conflict != nil }

    /// Stops following the key log and drops every secret.
    func stop() {
        phase = .over
        follow = nil
        waitTimer = nil
        handshakeSecret = nil
        trafficSecret = nil
    }

    // MARK: the hellos

    /// Client bytes after its first ClientHello: read only while a second hello may be needed
    /// (bounded: a second hello is at most one reader limit).
    func clientBytes(_ bytes: UnsafeRawBufferPointer) throws(TLSReadError) {
        try readClient(bytes)
    }

    private func readClient(_ bytes: some Collection<UInt8>) throws(TLSReadError) {
        guard case .hellos(var transcript, let retried) = phase else { return }
        guard retried else {
            guard clientAfterHello.count + bytes.count <= 64 * 1024 else { throw .malformed("the client sent over 64 KiB before the server's hello") }
            clientAfterHello += bytes
            return
        }
        guard transcript.count == 2 else { return }  // the second hello is in
        if let second = try clientReader.readSecondHello(bytes) {
            secondHello = second
            transcript.append(second.raw)
            phase = .hellos(transcript: transcript, retried: true)
        }
    }

    /// A HelloRetryRequest passed: the client's second ClientHello joins the transcript.
    func retried(_ hrr: ServerHello) throws(TLSReadError) {
        guard case .hellos(var transcript, false) = phase else { throw .malformed("a second HelloRetryRequest") }
        transcript.append(hrr.raw)
        phase = .hellos(transcript: transcript, retried: true)
        let early = clientAfterHello
        clientAfterHello = []
        try readClient(early)
    }

    /// The real ServerHello passed (TLS 1.3): from here the server's records are held. Starts the
    /// wait for the client's line.
    func serverHello(_ hello: ServerHello) -> Progress {
        guard case .hellos(var transcript, let retried) = phase else { return .invalid(.outOfOrder("a ServerHello out of order")) }
        if retried && transcript.count < 3 { return .invalid(.outOfOrder("the server answered before the client's second hello")) }
        transcript.append(hello.raw)
        pastServerHello = true
        clientAfterHello = []
        do {
            phase = .holding(try TLS13ServerFlight(suite: hello.cipherSuite, transcript: transcript, resumed: hello.selectedIdentity != nil),
                             suite: hello.cipherSuite, fed: [])
        } catch {
            phase = .unopenable(reason: "the server chose what pinproxy cannot open (\(error))", held: 0)
        }
        waitTimer = source.after(source.waitSeconds) { [weak self] in self?.waitRanOut() }
        return attempt()
    }

    // MARK: the held flight

    /// Server bytes after the ServerHello (while holding), then after the flight (reading tickets).
    func serverBytes(_ bytes: UnsafeRawBufferPointer) -> Progress {
        switch phase {
        case .holding(var flight, let suite, var fed):
            phase = .over  // the payload is copied out: mutated in place, not copied per chunk
            do {
                try flight.feed(bytes)
            } catch {
                phase = .over
                return .invalid(.unreadableFlight("\(error)"))
            }
            fed += bytes
            phase = .holding(flight, suite: suite, fed: fed)
            return attempt()
        case .readingTickets(var reader):
            do {
                try reader.feed(bytes)
            } catch {
                return endTickets([])  // tickets are a bonus: a flight we cannot follow records none
            }
            phase = .readingTickets(reader)
            readTickets()
            return .pending
        case .unopenable(let reason, let held):
            guard held + bytes.count <= 128 * 1024 else {
                stop()
                return .invalid(.flightTooLarge)
            }
            phase = .unopenable(reason: reason, held: held + bytes.count)
            return .pending
        case .opened(let suite, var after):
            phase = .over
            guard after.count + bytes.count <= 64 * 1024 else { return endTickets([]) }
            after += bytes
            phase = .opened(suite: suite, after: after)
            return .pending
        case .hellos, .over:
            return .pending
        }
    }

    /// Whether the check still wants to see server bytes (tickets not read yet).
    var readingTickets: Bool {
        switch phase {
        case .opened, .readingTickets: return true
        case .hellos, .holding, .unopenable, .over: return false
        }
    }

    private func received(_ delivery: KeyLogDelivery) {
        switch delivery {
        case .conflict(let label):
            conflict = label
        case .secret(.serverHandshake(let secret)):
            if let known = handshakeSecret, !known.matches(secret) {
                conflict = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
            } else {
                handshakeSecret = secret
            }
        case .secret(.serverTraffic0(let secret)):
            if let known = trafficSecret, !known.matches(secret) { return endTicketsQuietly() }
            trafficSecret = secret
            if readingTickets { readTickets() }
            return
        }
        guard holding else { return }
        let progress = attempt()
        if progress != .pending { onProgress?(progress) }
    }

    /// Opens the held flight if the client's line is here.
    private func attempt() -> Progress {
        if case .unopenable(let reason, _) = phase, sawLine {
            stop()
            return .invalid(.unopenable(reason: reason))
        }
        guard case .holding(var flight, let suite, let fed) = phase else { return .pending }
        if let conflict {
            stop()
            return .invalid(.conflictingLine(label: conflict))
        }
        guard let secret = handshakeSecret else { return .pending }
        phase = .over
        let opening: TLS13Opening
        do {
            opening = try flight.open(with: secret)
        } catch {
            stop()
            return .invalid(.wrongSecret("\(error)"))
        }
        guard case .verified(let verified) = opening else {
            phase = .holding(flight, suite: suite, fed: fed)
            return .pending
        }
        handshakeSecret = nil
        waitTimer = nil
        phase = .opened(suite: suite, after: Array(fed.dropFirst(verified.flightEnd)))
        return .opened(verified)
    }

    private func waitRanOut() {
        waitTimer = nil
        guard holding, !sawLine else { return }
        source.readNow { [weak self] in self?.lastReadDone() }
    }

    /// No line came within the wait: the key log has no word on this handshake.
    private(set) var declaredMissing = false

    private func lastReadDone() {
        guard holding, !sawLine else { return }
        stop()
        declaredMissing = true
        onProgress?(.missing)
    }

    // MARK: tickets

    /// The stream check accepted the chain (or the resumption): read the tickets the server issues
    /// next, so that resuming them is verified too.
    func accepted() {
        guard case .opened(let suite, let rest) = phase else { return }
        startTickets(suite: suite, after: rest[...])
    }

    private func startTickets(suite: UInt16, after rest: ArraySlice<UInt8>) {
        guard var reader = try? TLS13TicketReader(suite: suite) else { return endTicketsQuietly() }
        let fed = rest.withUnsafeBytes { bytes in Result { () throws(TLS13FlightError) in try reader.feed(bytes) } }
        guard case .success = fed else { return endTicketsQuietly() }
        phase = .readingTickets(reader)
        // The client writes SERVER_TRAFFIC_SECRET_0 once it has the flight; the server's tickets
        // follow the client's Finished. Bounded: after this long the tunnel is not followed further.
        waitTimer = source.after(10) { [weak self] in self?.endTicketsQuietly() }
        readTickets()
    }

    private func readTickets() {
        guard case .readingTickets(var reader) = phase, let secret = trafficSecret else { return }
        do {
            switch try reader.read(with: secret) {
            case .needMore:
                phase = .readingTickets(reader)
            case .done(let tickets):
                _ = endTickets(tickets)
            }
        } catch {
            endTicketsQuietly()
        }
    }

    @discardableResult
    private func endTickets(_ tickets: [[UInt8]]) -> Progress {
        stop()
        if !tickets.isEmpty { onTickets?(tickets) }
        onTickets = nil
        return .pending
    }

    private func endTicketsQuietly() { _ = endTickets([]) }
}
