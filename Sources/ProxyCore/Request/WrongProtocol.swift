/// A client that speaks another protocol to the proxy itself: `HTTPS_PROXY=https://…` makes it open
/// with a TLS ClientHello, `socks5h://…` with a SOCKS greeting. No HTTP request starts with these
/// bytes (a method is a token, RFC 9110 §9.1), so the first byte tells, and the client is answered
/// at once in its own protocol instead of waiting for `header_timeout`.
enum WrongProtocol: Equatable {
    /// A TLS handshake record (content type 22).
    case tls
    /// A SOCKS 4 request (version 4).
    case socks4
    /// A SOCKS 5 method-selection greeting (version 5).
    case socks5

    /// What the connection's first byte says, or nil when it may be HTTP.
    static func detect(firstByte: UInt8) -> WrongProtocol? {
        switch firstByte {
        case 0x16: return .tls
        case 0x04: return .socks4
        case 0x05: return .socks5
        default: return nil
        }
    }

    static let hint = "HTTPS_PROXY must be http://HOST:PORT; pinproxy speaks HTTP CONNECT"

    /// The refusal, with the protocol's own failure reply in place of an HTTP response.
    var refusal: Refusal {
        switch self {
        case .tls:
            // A fatal handshake_failure alert: the client reports a TLS failure at once rather than
            // an unexpected end of file.
            return Refusal(.network(.tlsToProxy), detail: "the client sent a TLS ClientHello to the proxy: \(Self.hint)",
                           reply: [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x28])
        case .socks4:
            // VN 0, CD 91: request rejected or failed (SOCKS 4 §1).
            return Refusal(.network(.socksToProxy), detail: "the client sent a SOCKS 4 request to the proxy: \(Self.hint)",
                           reply: [0x00, 0x5b, 0, 0, 0, 0, 0, 0])
        case .socks5:
            // VER 5, METHOD 0xFF: no acceptable methods (RFC 1928 §3), the one answer to a greeting
            // that ends the exchange.
            return Refusal(.network(.socksToProxy), detail: "the client sent a SOCKS 5 greeting to the proxy: \(Self.hint)",
                           reply: [0x05, 0xff])
        }
    }
}
