// What a mirror handshake (issue 18) shows: `MirrorHandshake.feed` answers with a `MirrorVerdict`.

/// What the mirror's handshake has shown so far. Every case but `.pending` and `.helloRetry` is
/// final: later calls return it again.
public enum MirrorVerdict: Equatable, Sendable {
    /// More server bytes are needed.
    case pending
    /// The server sent the mirror a HelloRetryRequest: give `secondHello(mirroring:records:)` the
    /// client's second ClientHello. (If the client's own connection got no HelloRetryRequest, there
    /// is no second hello to mirror: the check cannot be made.)
    case helloRetry
    /// The server chose TLS ≤ 1.2: its Certificate, in clear, DER leaf first.
    case tls12(chain: [[UInt8]])
    /// TLS 1.3: the chain, with CertificateVerify and Finished verified under secrets pinproxy derived.
    case verified(TLS13VerifiedFlight)
    /// The server's answer is one pinproxy cannot check on the mirror.
    case unverifiable(MirrorUnverifiable)
    /// The server's answer is wrong: malformed, an alert, a bad key share, signature or Finished.
    case failed(MirrorFailure)
}

/// Why a mirror handshake could not be checked. Not a sign of interception by itself.
public enum MirrorUnverifiable: Equatable, Sendable, CustomStringConvertible {
    case group(UInt16)              // the server chose a group whose share pinproxy could not compute
    case suite(UInt16)              // a TLS 1.3 suite pinproxy does not open
    case pskAccepted                // the server accepted the mirror's random pre_shared_key
    case tls12WithoutCertificate    // TLS ≤ 1.2 with no Certificate (a resumed session, an anonymous or PSK suite)

    public var description: String {
        switch self {
        case .group(let group): return "the server chose group \(hex(group)), whose share pinproxy cannot compute"
        case .suite(let suite): return "the server chose TLS 1.3 suite \(hex(suite)), which pinproxy does not open"
        case .pskAccepted: return "the server accepted the mirror's random pre-shared key"
        case .tls12WithoutCertificate: return "the server chose TLS 1.2 and sent no Certificate"
        }
    }
}

/// Why a mirror handshake failed.
public enum MirrorFailure: Error, Equatable, Sendable, CustomStringConvertible {
    case plaintext(TLSReadError)        // the server's plaintext does not parse, or is an alert
    case keyShare(String)               // the ServerHello's key_share is missing or not a valid key of its group
    case flight(TLS13FlightError)       // the encrypted flight: undecryptable, malformed, bad CertificateVerify or Finished
    case unexpectedRetry                // a HelloRetryRequest the client's second hello cannot answer, or a server message before it

    public var description: String {
        switch self {
        case .plaintext(let error): return "mirror: \(error)"
        case .keyShare(let reason): return "mirror: \(reason)"
        case .flight(let error): return "mirror: \(error)"
        case .unexpectedRetry: return "mirror: unexpected HelloRetryRequest"
        }
    }
}
