import COpenSSL
import Foundation

// The server's encrypted handshake flight of a TLS 1.3 tunnel, opened with the client's own
// SERVER_HANDSHAKE_TRAFFIC_SECRET: the chain the client is about to accept, proven by the leaf's
// signature over the very handshake pinproxy relayed (CertificateVerify) and by Finished.

// RFC 8446 §4: HandshakeType values of the encrypted flight.
let tlsHandshakeEncryptedExtensions: UInt8 = 8
let tlsHandshakeCertificateRequest: UInt8 = 13
let tlsHandshakeCertificateVerify: UInt8 = 15
let tlsHandshakeKeyUpdate: UInt8 = 24
let tlsHandshakeCompressedCertificate: UInt8 = 25   // RFC 8879
let tlsHandshakeMessageHash: UInt8 = 254

public enum TLS13Opening: Equatable, Sendable {
    case needMore                       // Finished not read yet: feed more records, call open again
    case verified(TLS13VerifiedFlight)
}

public struct TLS13VerifiedFlight: Equatable, Sendable {
    public let chain: [[UInt8]]         // DER certificates from the Certificate message, leaf first
    public let certificateRequested: Bool
    public let signatureScheme: UInt16
    public let flightEnd: Int           // offset in the fed stream just past the record carrying Finished
    /// The leaf's CertificateEntry signed_certificate_timestamp extension (RFC 6962 §3.3.1, RFC 8446
    /// §4.4.2): a SignedCertificateTimestampList, unread (`SignedCertificateTimestamp.list`).
    public let leafSCTList: [UInt8]?
    /// The leaf's CertificateEntry status_request extension (RFC 8446 §4.4.2.1): a CertificateStatus
    /// holding a stapled OCSP response, unread (`stapledOCSPResponse(certificateStatus:)`).
    public let leafOCSPStatus: [UInt8]?

    init(chain: [[UInt8]], certificateRequested: Bool, signatureScheme: UInt16, flightEnd: Int, leafSCTList: [UInt8]? = nil,
         leafOCSPStatus: [UInt8]? = nil) {
        self.chain = chain
        self.certificateRequested = certificateRequested
        self.signatureScheme = signatureScheme
        self.flightEnd = flightEnd
        self.leafSCTList = leafSCTList
        self.leafOCSPStatus = leafOCSPStatus
    }
}

/// The server's encrypted handshake flight of one TLS 1.3 tunnel.
///
/// Fed the server's bytes after the ServerHello record (`ServerFlightReader.bytesConsumed` on) as
/// they are relayed; opened once the client's key line arrives. Records are opened in order and
/// each only once, so `open` may be called after every `feed` at no extra cost.
public struct TLS13ServerFlight: Sendable {
    private enum Expecting: Sendable {
        case encryptedExtensions
        case certificateRequestOrCertificate
        case certificate
        case certificateVerify(chain: [[UInt8]])
        case finished(chain: [[UInt8]], scheme: UInt16)
    }

    private enum State: Sendable {
        case reading(Expecting)
        case verified(TLS13VerifiedFlight)
        case failed(TLS13FlightError)
    }

    private let suite: TLS13Suite
    private let limit: Int
    private var records: TLS13RecordSplitter
    private var state = State.reading(.encryptedExtensions)
    /// The handshake messages the signature and Finished cover, ClientHello on (with the HRR's
    /// `message_hash` form in place of the first ClientHello).
    private var transcript: [[UInt8]]
    private var handshake = HandshakeReassembler()
    private var certificateRequested = false
    private var leafSCTList: [UInt8]?
    private var leafOCSPStatus: [UInt8]?
    /// The type of the flight's Certificate or CompressedCertificate, once read: one per flight.
    private var certificateMessageType: UInt8?
    /// The ClientHello the server answered (the second after a HelloRetryRequest): its
    /// compress_certificate offer is read only if a CompressedCertificate comes.
    private let answeredClientHello: [UInt8]
    private let resumed: Bool
    /// The secret the records were opened with, and the opener it gave.
    private var secret: SecretBytes?
    private var opener: TLS13RecordOpener?

    /// transcript: the raw handshake messages in relay order: ClientHello, [HelloRetryRequest,
    /// ClientHello2,] ServerHello. The last ServerHello must have selected `suite`. `resumed`: that
    /// ServerHello accepted a pre-shared key, so the flight has no Certificate (RFC 8446 §2.2): it
    /// opens as a verified flight with an empty chain once its Finished is verified, and whether
    /// the ticket deserves trust is the caller's to decide.
    public init(suite: UInt16, transcript: [[UInt8]], resumed: Bool = false, limit: Int = 128 * 1024) throws(TLS13FlightError) {
        self.suite = try TLS13Suite(suite)
        self.resumed = resumed
        self.limit = max(0, limit)
        records = TLS13RecordSplitter(limit: limit, allowsChangeCipherSpec: true)
        self.transcript = try Self.signedTranscript(transcript, suite: self.suite)
        answeredClientHello = transcript[transcript.count - 2]
    }

    /// Checks the message types and the selected suite, and applies RFC 8446 §4.4.1: after a
    /// HelloRetryRequest the first ClientHello is replaced by
    ///
    ///     Transcript-Hash(ClientHello1, HelloRetryRequest, … Mn) =
    ///         Hash(message_hash ||        /* Handshake type */
    ///              00 00 Hash.length  ||  /* Handshake message length (bytes) */
    ///              Hash(ClientHello1) ||  /* Hash of ClientHello1 */
    ///              HelloRetryRequest  || … || Mn)
    static func signedTranscript(_ messages: [[UInt8]], suite: TLS13Suite) throws(TLS13FlightError) -> [[UInt8]] {
        let expectedTypes: [UInt8] = messages.count == 4
            ? [tlsHandshakeClientHello, tlsHandshakeServerHello, tlsHandshakeClientHello, tlsHandshakeServerHello]
            : [tlsHandshakeClientHello, tlsHandshakeServerHello]
        guard messages.map({ $0.first ?? 0 }) == expectedTypes, messages.allSatisfy({ $0.count >= tlsHandshakeHeaderLength }) else {
            throw .malformed("transcript is not ClientHello, [HelloRetryRequest, ClientHello,] ServerHello")
        }
        let serverHello: ServerHello
        do throws(TLSReadError) {
            serverHello = try ServerHello(HandshakeMessage(type: tlsHandshakeServerHello, raw: messages[messages.count - 1]))
            if messages.count == 4 {
                let retry = try ServerHello(HandshakeMessage(type: tlsHandshakeServerHello, raw: messages[1]))
                guard retry.isHelloRetryRequest else { throw .malformed("second message of four is not a HelloRetryRequest") }
            }
        } catch {
            throw error.flightError
        }
        guard !serverHello.isHelloRetryRequest, serverHello.version == tlsVersion13 else {
            throw .malformed("the last message is not a TLS 1.3 ServerHello")
        }
        guard serverHello.cipherSuite == suite.id else {
            throw .malformed("ServerHello selected \(hex(serverHello.cipherSuite)), not \(hex(suite.id))")
        }
        guard messages.count == 4 else { return messages }
        let firstHash = suite.hash([messages[0]])
        let messageHash = [tlsHandshakeMessageHash, 0, 0, UInt8(firstHash.count)] + firstHash
        return [messageHash] + messages[1...]
    }

    /// Server bytes following the ServerHello record, exactly as relayed, in any pieces (a
    /// compatibility ChangeCipherSpec record is skipped). Keeps whole records, bounded by limit.
    /// Once the flight is verified, further bytes are not kept: they belong to `TLS13TicketReader`
    /// (from `flightEnd` on).
    public mutating func feed(_ bytes: UnsafeRawBufferPointer) throws(TLS13FlightError) {
        switch state {
        case .verified: return
        case .failed(let error): throw error
        case .reading: break
        }
        do throws(TLS13FlightError) {
            try records.feed(bytes)
        } catch {
            state = .failed(error)
            throw error
        }
    }

    /// Derive key and IV from the client's SERVER_HANDSHAKE_TRAFFIC_SECRET (RFC 8446 §7.1, §7.3),
    /// decrypt the records fed so far, reassemble EncryptedExtensions, [CertificateRequest],
    /// Certificate (or a CompressedCertificate of an algorithm the ClientHello offered, RFC 8879),
    /// CertificateVerify, Finished; verify CertificateVerify with the leaf's public key
    /// over the transcript and Finished (§4.4.4). May be called again after more feed(); a
    /// different secret on a later call is `.undecryptable` (the earlier records opened under the
    /// first). After an error, every call throws it again; after `.verified`, returns it again.
    public mutating func open(with secret: SecretBytes) throws(TLS13FlightError) -> TLS13Opening {
        switch state {
        case .verified(let flight): return .verified(flight)
        case .failed(let error): throw error
        case .reading: break
        }
        do throws(TLS13FlightError) {
            var opener = try openerFor(secret)
            let opening = try openRecords(with: &opener, secret: secret)
            if case .verified = opening {
                forgetKeys()
            } else {
                self.opener = opener
            }
            return opening
        } catch {
            forgetKeys()
            state = .failed(error)
            throw error
        }
    }

    /// Opens the records fed since the last call, in order, until Finished.
    private mutating func openRecords(with opener: inout TLS13RecordOpener, secret: SecretBytes) throws(TLS13FlightError) -> TLS13Opening {
        for record in records.take() {
            let inner = try opener.open(header: record.header, body: record.body)
            switch inner.contentType {
            case tlsContentTypeHandshake:
                guard !inner.content.isEmpty else { throw .malformed("empty handshake record") }
                handshake.append(inner.content)
                while case .reading = state, let message = try nextMessage() {
                    try read(message, secret: secret, recordEnd: record.end)
                }
            case tlsContentTypeAlert:
                throw alertError(inner.content).flightError
            case tlsContentTypeApplicationData:
                throw .malformed("application_data before the server's Finished")
            default:
                throw .malformed("inner content type \(inner.contentType)")
            }
            // Records after Finished are under other keys: left to TLS13TicketReader.
            if case .verified(let flight) = state { return .verified(flight) }
        }
        return .needMore
    }

    /// Once the flight is judged, the derived keys and the reference to the client's secret go
    /// (SecretBytes wipes them when the last reference does).
    private mutating func forgetKeys() {
        opener = nil
        secret = nil
    }

    private mutating func openerFor(_ secret: SecretBytes) throws(TLS13FlightError) -> TLS13RecordOpener {
        if let opener, let known = self.secret {
            guard known.matches(secret) else { throw .undecryptable }
            return opener
        }
        let opener = try TLS13RecordOpener(suite: suite, trafficSecret: secret)
        self.secret = secret
        return opener
    }

    private mutating func nextMessage() throws(TLS13FlightError) -> HandshakeMessage? {
        do throws(TLSReadError) {
            return try handshake.next(budget: limit, limit: limit)
        } catch {
            throw error.flightError
        }
    }

    private mutating func read(_ message: HandshakeMessage, secret: SecretBytes, recordEnd: Int) throws(TLS13FlightError) {
        guard case .reading(let expecting) = state else { return }
        switch (expecting, message.type) {
        case (.encryptedExtensions, tlsHandshakeEncryptedExtensions):
            try parse { () throws(TLSReadError) in try readEncryptedExtensions(message) }
            state = .reading(.certificateRequestOrCertificate)
        case (.certificateRequestOrCertificate, tlsHandshakeCertificateRequest):
            try parse { () throws(TLSReadError) in try readCertificateRequest(message) }
            certificateRequested = true
            state = .reading(.certificate)
        case (.certificateRequestOrCertificate, tlsHandshakeCertificate), (.certificate, tlsHandshakeCertificate):
            let (chain, leafSCTList, leafOCSPStatus) = try parse { () throws(TLSReadError) in try readTLS13Certificate(message) }
            (self.leafSCTList, self.leafOCSPStatus) = (leafSCTList, leafOCSPStatus)
            certificateMessageType = message.type
            state = .reading(.certificateVerify(chain: chain))
        case (.certificateRequestOrCertificate, tlsHandshakeCompressedCertificate), (.certificate, tlsHandshakeCompressedCertificate):
            // RFC 8879 §4: read as the Certificate it decompresses to; the transcript keeps the
            // CompressedCertificate as sent (appended below).
            let (chain, leafSCTList, leafOCSPStatus) = try parse { () throws(TLSReadError) in
                let offered = try offeredCertificateCompression(clientHello: answeredClientHello)
                let certificate = try CompressedCertificate(message).certificateMessage(offered: offered, bound: limit)
                return try readTLS13Certificate(certificate)
            }
            (self.leafSCTList, self.leafOCSPStatus) = (leafSCTList, leafOCSPStatus)
            certificateMessageType = message.type
            state = .reading(.certificateVerify(chain: chain))
        case (.certificateVerify, tlsHandshakeCertificate), (.certificateVerify, tlsHandshakeCompressedCertificate):
            throw .malformed("\(certificateMessageName(message.type)) after a \(certificateMessageName(certificateMessageType)) in one flight")
        case (.certificateVerify(let chain), tlsHandshakeCertificateVerify):
            let (scheme, signature) = try parse { () throws(TLSReadError) in try readCertificateVerify(message) }
            // The signature covers ClientHello … Certificate (RFC 8446 §4.4.3).
            try verifyServerSignature(scheme: scheme, signature: signature, leaf: chain[0], transcriptHash: suite.hash(transcript))
            state = .reading(.finished(chain: chain, scheme: scheme))
        case (.finished(let chain, let scheme), tlsHandshakeFinished):
            // Finished covers ClientHello … CertificateVerify (RFC 8446 §4.4.4).
            try verifyFinished(message, secret: secret)
            // RFC 8446 §5.1: the keys change after Finished, so it ends its record.
            guard !handshake.hasPendingBytes else { throw .malformed("handshake data after Finished in its record") }
            state = .verified(TLS13VerifiedFlight(
                chain: chain, certificateRequested: certificateRequested, signatureScheme: scheme, flightEnd: recordEnd,
                leafSCTList: leafSCTList, leafOCSPStatus: leafOCSPStatus))
            return
        case (.certificateRequestOrCertificate, tlsHandshakeFinished) where resumed:
            // A resumption: EncryptedExtensions, then Finished, keyed by the resumed secret.
            try verifyFinished(message, secret: secret)
            guard !handshake.hasPendingBytes else { throw .malformed("handshake data after Finished in its record") }
            state = .verified(TLS13VerifiedFlight(chain: [], certificateRequested: false, signatureScheme: 0, flightEnd: recordEnd))
            return
        case (.certificateRequestOrCertificate, tlsHandshakeFinished):
            throw .malformed("no Certificate, and the ServerHello resumed no session")
        default:
            throw .malformed("handshake type \(message.type) out of order")
        }
        transcript.append(message.raw)
    }

    /// RFC 8446 §4.4.4: verify_data = HMAC(finished_key, Transcript-Hash(Handshake Context,
    /// Certificate*, CertificateVerify*)), finished_key = HKDF-Expand-Label(BaseKey, "finished", "", Hash.length).
    private func verifyFinished(_ message: HandshakeMessage, secret: SecretBytes) throws(TLS13FlightError) {
        let received = message.body
        guard received.count == suite.hashLength else { throw .malformed("Finished of \(received.count) bytes") }
        let finishedKey = hkdfExpandLabel(secret, "finished", length: suite.hashLength, suite: suite)
        let transcriptHash = suite.hash(transcript)
        var expected = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        defer { explicit_bzero(&expected, expected.count) }
        hmac(key: finishedKey, data: transcriptHash, suite: suite, into: &expected)
        let matches = received.withUnsafeBytes { CRYPTO_memcmp($0.baseAddress, expected, suite.hashLength) } == 0
        guard matches else { throw .finishedMismatch }
    }

    private func certificateMessageName(_ type: UInt8?) -> String {
        type == tlsHandshakeCompressedCertificate ? "CompressedCertificate" : "Certificate"
    }

    private func parse<T>(_ body: () throws(TLSReadError) -> T) throws(TLS13FlightError) -> T {
        do throws(TLSReadError) {
            return try body()
        } catch {
            throw error.flightError
        }
    }
}

/// RFC 8446 §4.3.1:
///
///     struct {
///         Extension extensions<0..2^16-1>;
///     } EncryptedExtensions;
func readEncryptedExtensions(_ message: HandshakeMessage) throws(TLSReadError) {
    var body = ByteCursor(message.body)
    var list = try body.vector("EncryptedExtensions extensions", lengthBytes: 2, 0...0xFFFF)
    try body.expectEnd("EncryptedExtensions")
    while !list.isEmpty {
        _ = try list.uint16("extension type")
        _ = try list.vector("extension data", lengthBytes: 2, 0...0xFFFF)
    }
}

/// RFC 8446 §4.3.2:
///
///     struct {
///         opaque certificate_request_context<0..2^8-1>;
///         Extension extensions<2..2^16-1>;
///     } CertificateRequest;
func readCertificateRequest(_ message: HandshakeMessage) throws(TLSReadError) {
    var body = ByteCursor(message.body)
    _ = try body.vector("certificate_request_context", lengthBytes: 1, 0...0xFF)
    _ = try body.vector("CertificateRequest extensions", lengthBytes: 2, 2...0xFFFF)
    try body.expectEnd("CertificateRequest")
}

/// The server's chain, leaf first. RFC 8446 §4.4.2:
///
///     struct {
///         select (certificate_type) {
///             case RawPublicKey: opaque ASN1_subjectPublicKeyInfo<1..2^24-1>;
///             case X509: opaque cert_data<1..2^24-1>;
///         };
///         Extension extensions<0..2^16-1>;
///     } CertificateEntry;
///
///     struct {
///         opaque certificate_request_context<0..2^8-1>;
///         CertificateEntry certificate_list<0..2^24-1>;
///     } Certificate;
///
/// A server's context is empty ("in the case of server authentication, this field SHALL be zero
/// length"), and its list is not (a server always authenticates outside PSK). Also returns the
/// leaf entry's signed_certificate_timestamp and status_request extension data, if it has them.
func readTLS13Certificate(_ message: HandshakeMessage) throws(TLSReadError)
    -> (chain: [[UInt8]], leafSCTList: [UInt8]?, leafOCSPStatus: [UInt8]?) {
    var body = ByteCursor(message.body)
    let context = try body.vector("certificate_request_context", lengthBytes: 1, 0...0xFF)
    guard context.isEmpty else { throw .malformed("server Certificate with a certificate_request_context") }
    var list = try body.vector("certificate_list", lengthBytes: 3, 0...0xFF_FFFF)
    try body.expectEnd("certificate_list")
    var chain: [[UInt8]] = []
    var leafSCTList: [UInt8]?
    var leafOCSPStatus: [UInt8]?
    while !list.isEmpty {
        chain.append(Array(try list.vector("cert_data", lengthBytes: 3, 1...0xFF_FFFF).bytes))
        var extensions = try list.vector("CertificateEntry extensions", lengthBytes: 2, 0...0xFFFF)
        // Only the leaf's are read (RFC 6962 §3.3.1 puts the SCTs there, RFC 8446 §4.4.2.1 its
        // OCSP response); the others stay unread.
        var seen = Set<UInt16>()
        while chain.count == 1, !extensions.isEmpty {
            let type = try extensions.uint16("extension type")
            let data = try extensions.vector("extension \(type)", lengthBytes: 2, 0...0xFFFF)
            guard seen.insert(type).inserted else { throw .malformed("CertificateEntry repeats extension \(type)") }
            if type == tlsExtensionSignedCertificateTimestamp { leafSCTList = Array(data.bytes) }
            if type == tlsExtensionStatusRequest { leafOCSPStatus = Array(data.bytes) }
        }
    }
    guard !chain.isEmpty else { throw .malformed("empty server Certificate") }
    return (chain, leafSCTList, leafOCSPStatus)
}

/// RFC 8446 §4.4.3:
///
///     struct {
///         SignatureScheme algorithm;
///         opaque signature<0..2^16-1>;
///     } CertificateVerify;
func readCertificateVerify(_ message: HandshakeMessage) throws(TLSReadError) -> (UInt16, [UInt8]) {
    var body = ByteCursor(message.body)
    let scheme = try body.uint16("CertificateVerify algorithm")
    let signature = try body.vector("CertificateVerify signature", lengthBytes: 2, 0...0xFFFF)
    try body.expectEnd("CertificateVerify")
    return (scheme, Array(signature.bytes))
}
