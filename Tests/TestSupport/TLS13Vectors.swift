// Captured by Tests/TLSInspectionTests/Fixtures/capture-tls13.py: real TLS 1.3 clients writing a key
// log against openssl s_server with the fixture certificates, through a recording relay on 127.0.0.1.
// The secrets belong to throwaway loopback test servers. Expectations come from the script's own
// decryption (Python `cryptography`), not from pinproxy's code.

public struct TLS13Capture: Sendable {
    public let name: String
    public let leaf: String                  // fixture whose certificate the server sent (generated-*: none)
    public let suite: UInt16
    public let chain: [String]               // base64 DER, the chain the script decrypted, leaf first
    public let client: String                // base64: client bytes through the (second) ClientHello record, + 21 bytes
    public let server: String                // base64: server bytes through the first application data record
    public let handshakeSecret: String       // hex SERVER_HANDSHAKE_TRAFFIC_SECRET
    public let trafficSecret: String         // hex SERVER_TRAFFIC_SECRET_0
    public let plaintextEnd: Int             // where the server's plaintext (ServerHello, CCS) ends
    public let flightEnd: Int                // just past the Finished record, counted from plaintextEnd
    public let scheme: UInt16
    public let certificateRequested: Bool
    public let helloRetry: Bool
    public let tickets: [String]             // hex
    // The flight re-encrypted by the script under the same keys (base64, from plaintextEnd on):
    public let resealed: String              // unchanged (checks the re-encryption itself)
    public let rogueSigned: String           // CertificateVerify signed by a fresh key of the leaf's type
    public let rogueChain: String            // rogue-leaf.chain.pem in place of the chain, genuine signature
    public let finishedAltered: String       // Finished's last byte flipped
}

public enum TLS13Vectors {
    // The captures, by subject: TLS13Vectors+AESGCM.swift, +ChaCha20, +HelloRetryRequest,
    // +CertificateRequest, +EdDSA and +RSAPSSAndP384.

    public static let all = [opensslAES128RSA, curlAES256ECDSA, pythonChaChaECDSA, pythonHRR, curlHRRChaCha, opensslCertificateRequest, opensslEd25519, opensslRSAPSSKey, opensslP384, opensslEd448]
}
