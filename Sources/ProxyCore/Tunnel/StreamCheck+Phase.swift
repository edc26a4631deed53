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
        /// Pinned: the server's bytes are held until its ServerHello. When the client offered TLS 1.3,
        /// its checks (the key log, the mirror) follow the handshake from here, through a
        /// HelloRetryRequest.
        case awaitingServerHello(ClientHello, TLS13Checks)
        /// TLS ≤ 1.2: the server's bytes are held until its Certificate is judged, or until it goes
        /// on without one (a resumption, verified against the ledger).
        case tls12Certificate(Hellos)
        /// TLS ≤ 1.2: the Certificate is read (after `issued`, when resuming), and judged at the next
        /// message, which may be the CertificateStatus whose stapled OCSP response carries SCTs.
        case tls12Chain(Hellos, chain: [[UInt8]], issued: [ResumptionLedger.Credential])
        /// TLS ≤ 1.2: the chain passed; the server's tickets are read up to its ChangeCipherSpec.
        /// `credentials` are this handshake's session id and tickets, recorded only once the client
        /// shows that the server proved its key (see `watchingApplicationData`).
        case tls12Judged(Hellos, credentials: [ResumptionLedger.Credential])
        /// TLS ≤ 1.2: a resumption of a session seen verified; tickets are read as in `tls12Judged`.
        case resumption(Hellos, credentials: [ResumptionLedger.Credential])
        /// TLS 1.3: the ServerHello passed, the encrypted flight is held until the checks decide
        /// (the key-log line opens it, or the mirror shows its chain), then with a key log its
        /// tickets are read.
        case tls13Held(Hellos, TLS13Checks)
        /// TLS ≤ 1.2: the server changed cipher. The client's first application data record shows
        /// that it verified the server's Finished: only then are `credentials` recorded, so a
        /// replayed chain plants no session.
        case watchingApplicationData(credentials: [ResumptionLedger.Credential])
        /// Nothing more to read of the server (or of an unpinned tunnel).
        case done

        /// The TLS 1.3 checks, while they follow the handshake.
        var tls13Checks: TLS13Checks? {
            switch self {
            case .awaitingServerHello(_, let checks): return checks
            case .tls13Held(_, let checks): return checks
            case .awaitingClientHello, .tls12Certificate, .tls12Chain, .tls12Judged, .resumption, .watchingApplicationData, .done: return nil
            }
        }

        /// The key-log check, while it follows the handshake.
        var keyLogCheck: KeyLogCheck? { tls13Checks?.keyLog }
    }

    /// What follows a handshake whose client offered TLS 1.3: the client's key log (when
    /// `proxy.keylog` is set) and the mirror checks (when the tunnel has mirror connections).
    struct TLS13Checks {
        let keyLog: KeyLogCheck?
        let mirrors: [MirrorCheck]

        var isEmpty: Bool { keyLog == nil && mirrors.isEmpty }

        func stop() {
            keyLog?.stop()
            for mirror in mirrors { mirror.stop() }
        }
    }
}
