import PinPolicy
import TLSInspection

/// The first bytes of a redirected connection, read in place of a CONNECT line: a TLS ClientHello
/// (its SNI names the host the rules match) or a plain-HTTP request head (a redirected port 80).
/// Pure: the session peeks at its input buffer and leaves the hello there, so the tunnel's stream
/// check reads it as the client's first flight, as it reads a CONNECT client's.
enum TransparentFirstFlight: Equatable {
    /// Not enough bytes yet.
    case needMore
    /// A complete ClientHello: the CONNECT it stands for (host = SNI, or the original address when
    /// the hello names none; port and address = the original destination's).
    case tls(Authority)
    /// A plain-HTTP request head of this many bytes.
    case http(headLength: Int)
    /// Neither, or a hello that cannot stand for a CONNECT.
    case refused(Refusal)

    /// The largest ClientHello waited for (one with post-quantum key shares is a few KiB).
    static let helloLimit = 64 * 1024

    static func read(_ bytes: UnsafeRawBufferPointer, origin: TransparentOrigin) -> TransparentFirstFlight {
        guard let first = bytes.first else { return .needMore }
        guard startsTLS(first) else {
            guard let length = ConnectRequest.headLength(in: bytes) else { return .needMore }
            return .http(headLength: length)
        }
        var reader = ClientFlightReader(limit: helloLimit)
        do {
            guard let hello = try reader.feed(bytes) else { return .needMore }
            return authority(serverName: hello.serverName, origin: origin)
        } catch {
            return .refused(.badRequest("the redirected connection to \(origin.original) did not start with a ClientHello pinproxy can read: \(error)"))
        }
    }

    /// The CONNECT a hello stands for. RFC 6066 §3: a `HostName` is a DNS name, never an address
    /// literal; one that is not a valid name is refused rather than matched as something else.
    static func authority(serverName: String?, origin: TransparentOrigin) -> TransparentFirstFlight {
        let port = origin.original.port
        guard let serverName, !serverName.isEmpty else { return .tls(Authority(target: .ip(origin.original.ip), port: port)) }
        switch Authority.parseHost(serverName) {
        case .success(.name(let name)): return .tls(Authority(target: .name(name), port: port))
        case .success(.ip): return .refused(.badRequest("the ClientHello to \(origin.original) names an address as its server name (\(serverName)); RFC 6066 allows host names only"))
        case .failure: return .refused(.badRequest("the ClientHello to \(origin.original) names '\(serverName)', which is not a host name pinproxy accepts"))
        }
    }

    /// Whether a first byte starts a TLS record of content type handshake (22), as a ClientHello does.
    static func startsTLS(_ firstByte: UInt8) -> Bool { firstByte == 22 }

    /// The most a first flight may hold before it is refused as too large: a ClientHello's limit,
    /// or `max_request_bytes` for an HTTP head.
    static func limit(firstByte: UInt8, maxRequestBytes: Int) -> Int { startsTLS(firstByte) ? helloLimit : maxRequestBytes }

    /// What a refused transparent client is sent: a fatal `access_denied` alert (RFC 8446 §6.2),
    /// in a TLS 1.0 record as a ClientHello's first record is, so that the client reports a TLS
    /// failure at once (curl: "tlsv1 alert access denied") rather than an unexpected end of file.
    static let refusalAlert: [UInt8] = [0x15, 0x03, 0x01, 0x00, 0x02, 0x02, 0x31]
}
