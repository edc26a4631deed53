/// Server → client direction, plaintext part only. Default limit 128 KiB.
public enum ServerFlightEvent: Equatable, Sendable {
    case serverHello(ServerHello)
    case certificate([[UInt8]])          // TLS ≤ 1.2 Certificate message: DER certificates, leaf first
    case newSessionTicket([UInt8])       // TLS ≤ 1.2 NewSessionTicket: the opaque ticket bytes
    case otherHandshake(type: UInt8, raw: [UInt8])  // e.g. ServerKeyExchange, ServerHelloDone, CertificateRequest (raw message)
    case changeCipherSpec                // the server switched to encryption; nothing after this is read
    case encrypted                       // TLS 1.3 (after ServerHello + optional CCS) or an application_data record: stop
}

/// Reads what a server sends in plaintext, in whatever pieces it arrives: the ServerHello (with a
/// HelloRetryRequest before it), and on TLS ≤ 1.2 the Certificate the stream check judges before
/// the client has it, and the session id and ticket that TLS 1.2 resumption is checked against
/// (ProxyCore's `StreamCheck`).
public struct ServerFlightReader: Sendable {
    private enum Stage: Sendable {
        /// Nothing read yet, or a HelloRetryRequest was (then the real ServerHello follows the
        /// client's second hello).
        case awaitingServerHello(afterRetry: Bool)
        /// TLS ≤ 1.2: plaintext handshake messages until the server's ChangeCipherSpec.
        case tls12(sawCertificate: Bool)
        /// TLS 1.3: only a compatibility ChangeCipherSpec may come before the encrypted records.
        case tls13
        case done
        case failed(TLSReadError)
    }

    private var stage = Stage.awaitingServerHello(afterRetry: false)

    private var isTLS13: Bool {
        if case .tls13 = stage { return true }
        return false
    }
    private var records: TLSRecordLayer
    private var handshake = HandshakeReassembler()

    public init(limit: Int = 128 * 1024) {
        // A server starts with a handshake record, or with an alert refusing the ClientHello: that
        // is TLS, and reads as `.malformed("alert …")`, which names the refusal.
        records = TLSRecordLayer(limit: limit, firstContentTypes: [tlsContentTypeHandshake, tlsContentTypeAlert])
    }

    /// Bytes taken from the input so far. Once done: up to the end of the ChangeCipherSpec record
    /// (TLS ≤ 1.2), or through the header of an application_data record where TLS ≤ 1.2 plaintext
    /// was expected; on TLS 1.3 exactly up to the start of the first encrypted record, its header
    /// not counted, so the caller hands the stream from there on to `TLS13ServerFlight`.
    public var bytesConsumed: Int { records.consumed - (stoppedBeforeEncryptedRecord ? tlsRecordHeaderLength : 0) }

    /// TLS 1.3 ended at an application_data header: that header belongs to the encrypted flight.
    private var stoppedBeforeEncryptedRecord = false

    /// Feed the next bytes; returns the events completed by them, in order. After `.changeCipherSpec`
    /// or `.encrypted` (or for TLS 1.3: after the ServerHello of version 0x0304 and its optional CCS,
    /// emit `.encrypted` as soon as the first application_data record header is seen), the reader is done
    /// and returns [] for further input. A HelloRetryRequest is a ServerHello with isHelloRetryRequest:
    /// the reader must keep reading (a second ServerHello follows after the client's second hello).
    ///
    /// Maintainer note: a call that throws drops the events it completed before the error; the
    /// caller ends the tunnel on any error. After an error, every call throws it again.
    public mutating func feed(_ bytes: some Collection<UInt8>) throws(TLSReadError) -> [ServerFlightEvent] {
        switch stage {
        case .done: return []
        case .failed(let error): throw error
        default: break
        }
        var events: [ServerFlightEvent] = []
        var index = bytes.startIndex
        do throws(TLSReadError) {
            while !isDone, case .parsed(let record) = try records.next(from: bytes, at: &index) {
                try read(record, into: &events)
            }
        } catch {
            stage = .failed(error)
            throw error
        }
        return events
    }

    private var isDone: Bool {
        if case .done = stage { return true }
        return false
    }

    private mutating func read(_ record: TLSRecord, into events: inout [ServerFlightEvent]) throws(TLSReadError) {
        switch record.contentType {
        case tlsContentTypeHandshake:
            if case .tls13 = stage { throw .malformed("plaintext handshake record after a TLS 1.3 ServerHello") }
            handshake.append(record.fragment)
            if case .awaitingServerHello = stage, let type = handshake.pendingType, type != tlsHandshakeServerHello {
                throw .malformed("handshake type \(type) before ServerHello")
            }
            while !isDone, let message = try handshake.next(budget: records.limit - records.consumed, limit: records.limit) {
                try read(message, into: &events)
            }
        case tlsContentTypeChangeCipherSpec:
            try readChangeCipherSpec(record.fragment, into: &events)
        case tlsContentTypeAlert:
            // TLS ≤ 1.2 clients ignore warning alerts other than close_notify (RFC 5246 §7.2; e.g. a
            // server's unrecognized_name), so the reader does too: stopping at one would let a server
            // end the check while the client reads on. In TLS 1.3 no plaintext alert follows the
            // ServerHello; a fatal one ends the handshake for the client as well.
            let fragment = record.fragment
            let isIgnoredWarning = !fragment.isEmpty && fragment.count % 2 == 0
                && stride(from: 0, to: fragment.count, by: 2).allSatisfy { fragment[$0] == 1 && fragment[$0 + 1] != 0 }
            if isIgnoredWarning, !isTLS13 { break }
            throw alertError(fragment)
        default:
            guard !handshake.hasPendingBytes else { throw .malformed("application_data inside a handshake message") }
            switch stage {
            case .tls12, .tls13:
                if case .tls13 = stage { stoppedBeforeEncryptedRecord = true }
                events.append(.encrypted)
                stage = .done
            default:
                throw .malformed("application_data before ServerHello")
            }
        }
    }

    /// RFC 5246 §7.1:
    ///
    ///     struct {
    ///         enum { change_cipher_spec(1), (255) } type;
    ///     } ChangeCipherSpec;
    ///
    /// In TLS 1.3 (RFC 8446 §5, Appendix D.4) the same record is a compatibility no-op, dropped.
    private mutating func readChangeCipherSpec(_ fragment: [UInt8], into events: inout [ServerFlightEvent]) throws(TLSReadError) {
        guard fragment == [1] else { throw .malformed("change_cipher_spec of \(fragment.count) bytes") }
        guard !handshake.hasPendingBytes else { throw .malformed("change_cipher_spec inside a handshake message") }
        switch stage {
        case .awaitingServerHello(afterRetry: false):
            throw .malformed("change_cipher_spec before ServerHello")
        case .tls12:
            events.append(.changeCipherSpec)
            stage = .done
        default:
            break  // after a HelloRetryRequest or a TLS 1.3 ServerHello
        }
    }

    private mutating func read(_ message: HandshakeMessage, into events: inout [ServerFlightEvent]) throws(TLSReadError) {
        switch stage {
        case .awaitingServerHello(let afterRetry):
            let hello = try ServerHello(message)
            if hello.isHelloRetryRequest {
                guard !afterRetry else { throw .malformed("second HelloRetryRequest") }
                guard hello.version == tlsVersion13 else { throw .malformed("HelloRetryRequest for version \(hex(hello.version))") }
                stage = .awaitingServerHello(afterRetry: true)
            } else if hello.version > tlsVersion12 {
                stage = .tls13
            } else {
                guard !afterRetry else { throw .malformed("ServerHello for version \(hex(hello.version)) after HelloRetryRequest") }
                guard hello.version >= 0x0300 else { throw .malformed("ServerHello for version \(hex(hello.version))") }
                stage = .tls12(sawCertificate: false)
            }
            // RFC 8446 §5.1: after a TLS 1.3 hello the keys change, so it must end its record.
            if hello.version > tlsVersion12 && handshake.hasPendingBytes {
                throw .malformed("handshake data after a TLS 1.3 ServerHello")
            }
            events.append(.serverHello(hello))
        case .tls12(let sawCertificate):
            switch message.type {
            case tlsHandshakeCertificate:
                guard !sawCertificate else { throw .malformed("second Certificate") }
                events.append(.certificate(try readCertificateList(message)))
                stage = .tls12(sawCertificate: true)
            case tlsHandshakeNewSessionTicket:
                events.append(.newSessionTicket(try readNewSessionTicket(message)))
            case tlsHandshakeClientHello, tlsHandshakeServerHello, tlsHandshakeFinished:
                throw .malformed("handshake type \(message.type) in the server's plaintext flight")
            default:
                events.append(.otherHandshake(type: message.type, raw: message.raw))
            }
        case .tls13, .done, .failed:
            throw .malformed("handshake message after the plaintext flight")  // not reached: read(_ record:) stops first
        }
    }
}

/// The server's certificate chain as sent, leaf first (TLS ≤ 1.2; TLS 1.3's has per-entry
/// extensions and is encrypted).
///
/// RFC 5246 §7.4.2:
///
///     opaque ASN.1Cert<1..2^24-1>;
///
///     struct {
///         ASN.1Cert certificate_list<0..2^24-1>;
///     } Certificate;
func readCertificateList(_ message: HandshakeMessage) throws(TLSReadError) -> [[UInt8]] {
    var body = ByteCursor(message.body)
    var list = try body.vector("certificate_list", lengthBytes: 3, 0...0xFF_FFFF)
    try body.expectEnd("certificate_list")
    var chain: [[UInt8]] = []
    while !list.isEmpty {
        chain.append(Array(try list.vector("ASN.1Cert", lengthBytes: 3, 1...0xFF_FFFF).bytes))
    }
    return chain
}

/// The ticket a TLS ≤ 1.2 server issues (the client presents it in its session_ticket extension).
///
/// RFC 5077 §3.3:
///
///     struct {
///         uint32 ticket_lifetime_hint;
///         opaque ticket<0..2^16-1>;
///     } NewSessionTicket;
func readNewSessionTicket(_ message: HandshakeMessage) throws(TLSReadError) -> [UInt8] {
    var body = ByteCursor(message.body)
    _ = try body.uint(4, "ticket_lifetime_hint")
    let ticket = try body.vector("ticket", lengthBytes: 2, 0...0xFFFF)
    try body.expectEnd("ticket")
    return Array(ticket.bytes)
}

func hex(_ version: UInt16) -> String {
    let digits = String(version, radix: 16)
    return "0x" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
}
