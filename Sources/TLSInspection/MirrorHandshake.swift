// The mirror's side of the handshake (issue 18): reads what the server answers a `MirrorHello` on
// pinproxy's own connection, and judges it with secrets pinproxy derived itself. The plaintext is
// read by ServerFlightReader, the TLS 1.3 flight by TLS13ServerFlight (CertificateVerify over the
// mirror's transcript, Finished): the same readers as the key-log check, with the server handshake
// traffic secret computed from the mirror's own key share instead of taken from a key log.
//
// Use (the caller owns the socket; pinproxy never sends its own Finished, it closes the mirror once
// the verdict is in):
//
//     var mirror = MirrorHandshake(hello: try MirrorHello(of: clientHello, records: firstBytes))
//     write(mirror.hello.bytes)
//     for each read: switch mirror.feed(serverBytes) {
//     case .pending: read on
//     case .helloRetry: write(try mirror.secondHello(mirroring: clientSecondHello, records: itsBytes)), read on
//     case .tls12(let chain), .verified(let flight): judge the chain, close
//     case .unverifiable(let why), .failed(let why): say so, close
//     }

/// Reads the server's bytes on the mirror connection and answers with a `MirrorVerdict`. Holds at
/// most `limit` bytes of the plaintext and `limit` of the encrypted flight (the limits of
/// ServerFlightReader and TLS13ServerFlight). The private keys live in its `hello` (and in the
/// caller's copies of the MirrorHello): drop both once the verdict is in, and they are freed.
///
/// Maintainer note: when the mirror gets a HelloRetryRequest and the client's own connection did
/// not (or the reverse), there is no second hello to mirror: the caller ends the check as one that
/// could not be made, not as a failure.
public struct MirrorHandshake: Sendable {
    private enum Phase: Sendable {
        /// Waiting for the ServerHello (or a HelloRetryRequest) in clear.
        case plaintext
        /// A HelloRetryRequest came; the caller has not given the second hello yet.
        case awaitingSecondHello(retry: [UInt8])
        /// TLS 1.3 ServerHello read and the secret derived; waiting for the first encrypted record.
        case awaitingFlight(TLS13ServerFlight, SecretBytes)
        /// TLS ≤ 1.2: waiting for the Certificate.
        case tls12
        /// Opening the encrypted flight.
        case flight(TLS13ServerFlight, SecretBytes)
        case done(MirrorVerdict)
    }

    /// The hello the mirror sent last: the first, or after a HelloRetryRequest the second.
    public private(set) var hello: MirrorHello
    private let limit: Int
    private var phase = Phase.plaintext
    private var reader: ServerFlightReader
    /// The server's bytes until the first encrypted record (bounded by the reader's limit), so the
    /// flight starts exactly where the reader stopped however the bytes were split.
    private var plaintext: [UInt8] = []
    /// ClientHello, [HelloRetryRequest, ClientHello2]: the mirror's transcript so far.
    private var transcript: [[UInt8]]

    public init(hello: MirrorHello, limit: Int = 128 * 1024) {
        self.hello = hello
        self.limit = limit
        reader = ServerFlightReader(limit: limit)
        transcript = [hello.raw]
    }

    /// The server's next bytes on the mirror connection, in any pieces.
    public mutating func feed(_ bytes: some Collection<UInt8>) -> MirrorVerdict {
        let verdict = read(bytes)
        switch verdict {
        case .pending, .helloRetry: break
        default: phase = .done(verdict)  // drops the flight, the secret and the buffered bytes
        }
        return verdict
    }

    /// After `.helloRetry`: the mirror of the client's second ClientHello, to write on the mirror
    /// connection. `records` are the client's bytes that carried it (from the first hello's
    /// `bytesConsumed` to `ClientFlightReader.readSecondHello`'s, a ChangeCipherSpec included).
    public mutating func secondHello(mirroring client: ClientHello, records: some Collection<UInt8>) throws(MirrorError) -> [UInt8] {
        guard case .awaitingSecondHello(let retry) = phase else { throw .notAfterHelloRetry }
        let second = try MirrorHello(secondOf: client, records: records, first: hello, retry: retry)
        transcript += [retry, second.raw]
        hello = second
        phase = .plaintext
        return second.bytes
    }

    /// After `.helloRetry`, when there is no client's second hello to mirror (its own connection
    /// got no retry, or this is a confirming look): the second hello a client would send
    /// (`MirrorHello(answering:after:)`), to write on the mirror connection.
    public mutating func secondHelloAnsweringRetry() throws(MirrorError) -> [UInt8] {
        guard case .awaitingSecondHello(let retry) = phase else { throw .notAfterHelloRetry }
        let second = try MirrorHello(answering: retry, after: hello)
        transcript += [retry, second.raw]
        hello = second
        phase = .plaintext
        return second.bytes
    }

    private mutating func read(_ bytes: some Collection<UInt8>) -> MirrorVerdict {
        switch phase {
        case .done(let verdict):
            return verdict
        case .flight(var flight, let secret):
            phase = .done(.pending)  // the flight is moved out while it is fed
            return open(&flight, secret: secret, feeding: bytes)
        case .plaintext, .awaitingSecondHello, .awaitingFlight, .tls12:
            return readPlaintext(bytes)
        }
    }

    private mutating func readPlaintext(_ bytes: some Collection<UInt8>) -> MirrorVerdict {
        let events: [ServerFlightEvent]
        do throws(TLSReadError) {
            events = try reader.feed(bytes)
        } catch {
            return .failed(.plaintext(error))
        }
        plaintext += bytes
        for event in events {
            let verdict = read(event)
            if verdict != .pending { return verdict }
        }
        if case .awaitingSecondHello = phase { return .helloRetry }
        return .pending
    }

    private mutating func read(_ event: ServerFlightEvent) -> MirrorVerdict {
        switch (phase, event) {
        case (.plaintext, .serverHello(let serverHello)) where serverHello.isHelloRetryRequest:
            phase = .awaitingSecondHello(retry: serverHello.raw)
            return .helloRetry
        case (.plaintext, .serverHello(let serverHello)) where serverHello.version == tlsVersion13:
            return readServerHello13(serverHello)
        case (.plaintext, .serverHello):
            phase = .tls12
            return .pending
        case (.tls12, .certificate(let chain)):
            return .tls12(chain: chain)
        case (.tls12, .changeCipherSpec), (.tls12, .encrypted), (.tls12, .otherHandshake(type: tlsHandshakeServerHelloDone, _)):
            return .unverifiable(.tls12WithoutCertificate)
        case (.tls12, _):
            return .pending
        case (.awaitingFlight(var flight, let secret), .encrypted):
            let encrypted = plaintext[reader.bytesConsumed...]
            plaintext = []
            phase = .done(.pending)
            return open(&flight, secret: secret, feeding: encrypted)
        case (.awaitingSecondHello, _):
            return .failed(.unexpectedRetry)
        default:
            return .failed(.plaintext(.malformed("unexpected server message on the mirror")))
        }
    }

    /// RFC 8446 §7.1 from the mirror's own key share: the ServerHello names the group and the
    /// server's share; pinproxy's private key for that group gives the shared secret ((EC)DHE,
    /// ML-KEM, or both concatenated for a hybrid).
    private mutating func readServerHello13(_ serverHello: ServerHello) -> MirrorVerdict {
        if serverHello.selectedIdentity != nil { return .unverifiable(.pskAccepted) }
        let suite: TLS13Suite
        do throws(TLS13FlightError) {
            suite = try TLS13Suite(serverHello.cipherSuite)
        } catch {
            return .unverifiable(.suite(serverHello.cipherSuite))
        }
        let share: (group: UInt16, key: [UInt8])
        do throws(TLSReadError) {
            guard let found = try serverKeyShare(serverHello.raw) else { return .failed(.keyShare("the ServerHello has no key_share")) }
            share = found
        } catch {
            return .failed(.plaintext(error))
        }
        guard let key = hello.key(for: share.group) else { return .unverifiable(.group(share.group)) }
        let shared: SecretBytes
        do throws(MirrorFailure) {
            shared = try key.sharedSecret(with: share.key)
        } catch {
            return .failed(error)
        }
        let messages = transcript + [serverHello.raw]
        do throws(TLS13FlightError) {
            let secret = serverHandshakeTrafficSecret(
                shared: shared, suite: suite, signedTranscript: try TLS13ServerFlight.signedTranscript(messages, suite: suite))
            let flight = try TLS13ServerFlight(suite: suite.id, transcript: messages, limit: limit)
            phase = .awaitingFlight(flight, secret)
            return .pending
        } catch {
            return .failed(.flight(error))
        }
    }

    private mutating func open(_ flight: inout TLS13ServerFlight, secret: SecretBytes, feeding bytes: some Collection<UInt8>) -> MirrorVerdict {
        do throws(TLS13FlightError) {
            var fed: TLS13FlightError?
            Array(bytes).withUnsafeBytes { raw in
                do throws(TLS13FlightError) { try flight.feed(raw) } catch { fed = error }
            }
            if let fed { throw fed }
            switch try flight.open(with: secret) {
            case .needMore:
                phase = .flight(flight, secret)
                return .pending
            case .verified(let verified):
                return .verified(verified)
            }
        } catch {
            return .failed(.flight(error))
        }
    }
}

let tlsHandshakeServerHelloDone: UInt8 = 14

/// The server's share from a ServerHello's key_share extension, nil without one. RFC 8446 §4.2.8:
///
///     struct {
///         KeyShareEntry server_share;
///     } KeyShareServerHello;
func serverKeyShare(_ raw: [UInt8]) throws(TLSReadError) -> (group: UInt16, key: [UInt8])? {
    var hello = ByteCursor(raw[tlsHandshakeHeaderLength...])
    _ = try hello.take(2 + 32, "ServerHello version and random")
    _ = try hello.vector("ServerHello session_id", lengthBytes: 1, 0...32)
    _ = try hello.take(3, "ServerHello suite and compression")
    for (type, data) in try readExtensions(&hello, in: "ServerHello") where type == tlsExtensionKeyShare {
        var entry = data
        let group = try entry.uint16("server_share group")
        let key = try entry.vector("server_share key_exchange", lengthBytes: 2, 1...0xFFFF)
        try entry.expectEnd("key_share")
        return (group, Array(key.bytes))
    }
    return nil
}
