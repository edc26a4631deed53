/// What the ticket reader has found so far.
public enum TLS13TicketReading: Equatable, Sendable {
    /// Every record fed so far was a handshake record: feed more, read again. `tickets` are all
    /// found so far.
    case needMore(tickets: [[UInt8]])
    /// The first record that is not a handshake one was reached (application data, an alert) or a
    /// KeyUpdate (the secret no longer applies): nothing more is read.
    case done(tickets: [[UInt8]])
}

/// NewSessionTicket messages after the handshake, read with the client's SERVER_TRAFFIC_SECRET_0:
/// the tickets a client may later resume with, each one known to come from the server whose
/// flight was verified (RFC 8446 §4.6.1).
public struct TLS13TicketReader: Sendable {
    private let suite: TLS13Suite
    private let limit: Int
    private var records: TLS13RecordSplitter
    private var handshake = HandshakeReassembler()
    private var tickets: [[UInt8]] = []
    private var finished = false
    private var failure: TLS13FlightError?
    private var secret: SecretBytes?
    private var opener: TLS13RecordOpener?

    public init(suite: UInt16, limit: Int = 64 * 1024) throws(TLS13FlightError) {
        self.suite = try TLS13Suite(suite)
        self.limit = max(0, limit)
        records = TLS13RecordSplitter(limit: limit, allowsChangeCipherSpec: false)
    }

    /// Server bytes following the handshake flight (from TLS13VerifiedFlight.flightEnd on), in any
    /// pieces, bounded by limit. Once done, further bytes are not kept.
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(TLS13FlightError) {
        if let failure { throw failure }
        guard !finished else { return }
        do throws(TLS13FlightError) {
            try records.feed(bytes)
        } catch {
            failure = error
            throw error
        }
    }

    /// Decrypt records in order; collect each NewSessionTicket's `ticket` (the identity a client
    /// later offers in pre_shared_key). Stops at the first record whose inner type is not
    /// handshake (application data or alert): that record's plaintext is wiped unread. A later
    /// call with another secret is `.undecryptable`; after an error, every call throws it again.
    public mutating func read(with secret: SecretBytes) throws(TLS13FlightError) -> TLS13TicketReading {
        if let failure { throw failure }
        guard !finished else { return .done(tickets: tickets) }
        do throws(TLS13FlightError) {
            var opener: TLS13RecordOpener
            if let known = self.secret, let existing = self.opener {
                guard known.matches(secret) else { throw .undecryptable }
                opener = existing
            } else {
                opener = try TLS13RecordOpener(suite: suite, trafficSecret: secret)
                self.secret = secret
            }
            defer { self.opener = opener }
            for record in records.take() where !finished {
                let inner = try opener.open(header: record.header, body: record.body)
                guard inner.contentType == tlsContentTypeHandshake else {
                    // RFC 8446 §5.1: handshake messages are not interleaved with other types.
                    guard !handshake.hasPendingBytes else { throw .malformed("record of type \(inner.contentType) inside a handshake message") }
                    finished = true
                    break
                }
                guard !inner.content.isEmpty else { throw .malformed("empty handshake record") }
                handshake.append(inner.content)
                while !finished, let message = try nextMessage() {
                    try read(message)
                }
            }
        } catch {
            failure = error
            self.opener = nil
            self.secret = nil
            throw error
        }
        if finished {
            // Drop what follows unread (and free the secret's derived keys).
            _ = records.take()
            self.opener = nil
            self.secret = nil
            return .done(tickets: tickets)
        }
        return .needMore(tickets: tickets)
    }

    private mutating func nextMessage() throws(TLS13FlightError) -> HandshakeMessage? {
        do throws(TLSReadError) {
            return try handshake.next(budget: limit, limit: limit)
        } catch {
            throw error.flightError
        }
    }

    /// RFC 8446 §4.6: after the handshake a server sends NewSessionTicket, KeyUpdate or (for
    /// post-handshake authentication) CertificateRequest.
    private mutating func read(_ message: HandshakeMessage) throws(TLS13FlightError) {
        switch message.type {
        case tlsHandshakeNewSessionTicket:
            do throws(TLSReadError) {
                tickets.append(try readTLS13NewSessionTicket(message))
            } catch {
                throw error.flightError
            }
        case tlsHandshakeKeyUpdate:
            // The next records are under the next secret, which pinproxy does not have.
            finished = true
        case tlsHandshakeCertificateRequest:
            break
        default:
            throw .malformed("handshake type \(message.type) after the handshake")
        }
    }
}

/// RFC 8446 §4.6.1:
///
///     struct {
///         uint32 ticket_lifetime;
///         uint32 ticket_age_add;
///         opaque ticket_nonce<0..255>;
///         opaque ticket<1..2^16-1>;
///         Extension extensions<0..2^16-2>;
///     } NewSessionTicket;
func readTLS13NewSessionTicket(_ message: HandshakeMessage) throws(TLSReadError) -> [UInt8] {
    var body = ByteCursor(message.body)
    _ = try body.uint(4, "ticket_lifetime")
    _ = try body.uint(4, "ticket_age_add")
    _ = try body.vector("ticket_nonce", lengthBytes: 1, 0...0xFF)
    let ticket = try body.vector("ticket", lengthBytes: 2, 1...0xFFFF)
    _ = try body.vector("NewSessionTicket extensions", lengthBytes: 2, 0...0xFFFE)
    try body.expectEnd("NewSessionTicket")
    return Array(ticket.bytes)
}
