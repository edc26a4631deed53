extension KeyLogCheck {
    /// Why the key log cannot vouch for the server's flight (`keylog_invalid`), with the evidence the
    /// line's `detail` names.
    enum Invalid: Equatable {
        /// A ServerHello where TLS 1.3 sends none (this one says what came instead).
        case outOfOrder(String)
        /// The server's encrypted flight does not parse (the reader's error).
        case unreadableFlight(String)
        /// No line came for a flight pinproxy cannot open before it passed 128 KiB.
        case flightTooLarge
        /// The client wrote a line, but the ServerHello chose what pinproxy cannot open (why).
        case unopenable(reason: String)
        /// A second, different line for a secret of this handshake (its label).
        case conflictingLine(label: String)
        /// The client's line does not open the server's flight (the error).
        case wrongSecret(String)

        var detail: String {
            switch self {
            case .outOfOrder(let what): return what
            case .unreadableFlight(let error): return "the server's encrypted flight: \(error)"
            case .flightTooLarge: return "the server's flight is over 128 KiB"
            case .unopenable(let reason): return "the client wrote a key-log line, but \(reason)"
            case .conflictingLine(let label): return "a second, different \(label) line for this handshake"
            case .wrongSecret(let error): return "the client's key-log line does not open the server's flight: \(error)"
            }
        }
    }
}
