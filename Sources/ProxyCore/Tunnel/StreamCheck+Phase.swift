import TLSInspection

extension StreamCheck {
    /// The two hellos of a handshake the check follows.
    struct Hellos {
        let client: ClientHello
        let server: ServerHello
    }

    /// Where the stream check stands in the tunnel's handshake, with what it needs there. Each
    /// case says what happens to the server's bytes; the client's are walked on after its
    /// ClientHello whatever the phase, for its first application data record.
    enum Phase {
        /// The client's first flight is read until its ClientHello is complete; `fed` bytes so far.
        case awaitingClientHello(fed: Int)
        /// Pinned: the server's bytes are held until its ServerHello. With the client's key log
        /// (TLS 1.3 offered) its check follows the handshake from here, through a HelloRetryRequest.
        case awaitingServerHello(ClientHello, keyLog: KeyLogCheck?)
        /// TLS ≤ 1.2: the server's bytes are held until its Certificate is judged, or until it goes
        /// on without one (a resumption, verified against the ledger).
        case tls12Certificate(Hellos)
        /// TLS ≤ 1.2: the chain passed; the server's tickets are read up to its ChangeCipherSpec.
        /// `credentials` are this handshake's session id and tickets, recorded only once the client
        /// shows that the server proved its key (see `watchingApplicationData`).
        case tls12Judged(Hellos, credentials: [ResumptionLedger.Credential])
        /// TLS ≤ 1.2: a resumption of a session seen verified; tickets are read as in `tls12Judged`.
        case resumption(Hellos, credentials: [ResumptionLedger.Credential])
        /// TLS 1.3 with the client's key log: the ServerHello passed, the encrypted flight is held
        /// until the key-log check opens it (or its wait ends), then its tickets are read.
        case tls13Held(Hellos, KeyLogCheck)
        /// TLS ≤ 1.2: the server changed cipher. The client's first application data record shows
        /// that it verified the server's Finished: only then are `credentials` recorded, so a
        /// replayed chain plants no session.
        case watchingApplicationData(credentials: [ResumptionLedger.Credential])
        /// Nothing more to read of the server (or of an unpinned tunnel).
        case done

        /// The key-log check, while it follows the handshake.
        var keyLogCheck: KeyLogCheck? {
            switch self {
            case .awaitingServerHello(_, let keyLog): return keyLog
            case .tls13Held(_, let keyLog): return keyLog
            case .awaitingClientHello, .tls12Certificate, .tls12Judged, .resumption, .watchingApplicationData, .done: return nil
            }
        }
    }
}
