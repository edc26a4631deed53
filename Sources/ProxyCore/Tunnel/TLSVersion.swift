import Foundation

/// A TLS protocol version as the wire carries it (RFC 8446 §4.2.1: 0x0304 is TLS 1.3), with the name
/// the log's `tls` key writes (`TLSv1.3`, as OpenSSL's `SSL_get_version` spells it).
struct TLSVersion: Hashable, Sendable, CustomStringConvertible {
    let wire: UInt16

    static let tls13 = TLSVersion(wire: 0x0304)
    static let tls12 = TLSVersion(wire: 0x0303)

    /// The versions the log names; any other is written as its wire value in hex.
    private static let names: [UInt16: String] = [0x0304: "TLSv1.3", 0x0303: "TLSv1.2", 0x0302: "TLSv1.1", 0x0301: "TLSv1"]

    init(wire: UInt16) { self.wire = wire }

    /// The version OpenSSL names (`SSL_get_version`, read in `TLSInspection`); nil for a name that is
    /// no TLS version of the table (`unknown` before a handshake).
    init?(openSSLName name: String) {
        guard let wire = Self.names.first(where: { $0.value == name })?.key else { return nil }
        self.wire = wire
    }

    var description: String { Self.names[wire] ?? String(format: "0x%04x", wire) }
}
