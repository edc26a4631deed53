/// Client → server direction. Default limit 64 KiB (the ClientHello may span records).
///
/// Reads the first bytes a client sends through a tunnel, in whatever pieces they arrive, up to
/// its first ClientHello. The stream check (ProxyCore's `StreamCheck`) compares that hello's SNI with
/// the CONNECT host and refuses a tunnel that does not start with TLS at all.
public struct ClientFlightReader: Sendable {
    private enum State: Sendable {
        case reading
        /// The first ClientHello was returned (its random identifies the second one).
        case done(firstRandom: [UInt8])
        case failed(TLSReadError)
    }

    /// After a HelloRetryRequest: reading the client's second ClientHello.
    private enum RetryState: Sendable {
        case notStarted
        case readingSecondHello(sawChangeCipherSpec: Bool)
        case done
        case failed(TLSReadError)
    }

    private var state = State.reading
    private var retry = RetryState.notStarted
    private var records: TLSRecordLayer
    private var handshake = HandshakeReassembler()

    public init(limit: Int = 64 * 1024) {
        // A client starts with a handshake record; anything else (an HTTP request, an SSLv2 hello,
        // even a TLS alert) is not a client starting TLS.
        records = TLSRecordLayer(limit: limit, firstContentTypes: [tlsContentTypeHandshake])
    }

    /// Bytes taken from the input so far: when the ClientHello is returned, the end of the record
    /// that completed it. Bytes after that (a second flight, early data) were not looked at.
    public var bytesConsumed: Int { records.consumed }

    /// Feed the next bytes; returns the ClientHello once complete, nil while more is needed; throws TLSReadError.
    /// After it returned a ClientHello, further calls are not made (the caller stops feeding).
    ///
    /// Maintainer note: should a caller feed after the hello anyway, it gets nil; after an error,
    /// the same error again.
    public mutating func feed(_ bytes: some Collection<UInt8>) throws(TLSReadError) -> ClientHello? {
        switch state {
        case .reading: break
        case .done: return nil
        case .failed(let error): throw error
        }
        var index = bytes.startIndex
        do throws(TLSReadError) {
            while case .parsed(let record) = try records.next(from: bytes, at: &index) {
                if let hello = try read(record) {
                    state = .done(firstRandom: hello.random)
                    return hello
                }
            }
            return nil
        } catch {
            state = .failed(error)
            throw error
        }
    }

    /// After the server answered with a HelloRetryRequest: feed the client bytes that follow the
    /// first ClientHello (from `bytesConsumed` on); returns the second ClientHello once complete,
    /// nil while more is needed. It belongs to the transcript TLS 1.3 signs (RFC 8446 §4.4.1).
    ///
    /// What it consumes: at most one compatibility ChangeCipherSpec record (RFC 8446 Appendix D.4,
    /// the single byte 1, before the hello), then the handshake records up to the end of the record
    /// that completes the second ClientHello; `bytesConsumed` is then that end, counted from the
    /// tunnel's first byte like the first hello's. Nothing after it is looked at (the client's
    /// Finished is encrypted). The limit is the reader's one limit, shared with the first hello.
    ///
    /// Refused as `.malformed`: early data (application_data) or a handshake message other than a
    /// ClientHello before it, a second ChangeCipherSpec, and a hello whose random differs from the
    /// first one's (RFC 8446 §4.1.2: the client resends the same random; the key log names the
    /// connection by it). Called before the first hello was returned: `.malformed` too.
    /// After it returned the hello, it returns nil; after an error, it throws the error again.
    public mutating func readSecondHello(_ bytes: some Collection<UInt8>) throws(TLSReadError) -> ClientHello? {
        guard case .done(let firstRandom) = state else {
            throw .malformed("second ClientHello read before the first")
        }
        switch retry {
        case .notStarted: retry = .readingSecondHello(sawChangeCipherSpec: false)
        case .readingSecondHello: break
        case .done: return nil
        case .failed(let error): throw error
        }
        var index = bytes.startIndex
        do throws(TLSReadError) {
            while case .parsed(let record) = try records.next(from: bytes, at: &index) {
                if let hello = try readRetry(record) {
                    guard hello.random == firstRandom else { throw .malformed("second ClientHello with another random") }
                    retry = .done
                    return hello
                }
            }
            return nil
        } catch {
            retry = .failed(error)
            throw error
        }
    }

    private mutating func readRetry(_ record: TLSRecord) throws(TLSReadError) -> ClientHello? {
        switch record.contentType {
        case tlsContentTypeHandshake:
            return try readHello(record.fragment, before: "the second ClientHello")
        case tlsContentTypeChangeCipherSpec:
            guard record.fragment == [1] else { throw .malformed("change_cipher_spec of \(record.fragment.count) bytes") }
            guard !handshake.hasPendingBytes else { throw .malformed("change_cipher_spec inside a handshake message") }
            guard case .readingSecondHello(sawChangeCipherSpec: false) = retry else {
                throw .malformed("second change_cipher_spec before the second ClientHello")
            }
            retry = .readingSecondHello(sawChangeCipherSpec: true)
            return nil
        case tlsContentTypeAlert:
            throw alertError(record.fragment)
        default:
            throw .malformed("application_data before the second ClientHello")
        }
    }

    /// A handshake record's bytes towards a ClientHello; another message is refused as soon as its
    /// type byte is here, not after its length.
    private mutating func readHello(_ fragment: [UInt8], before what: String) throws(TLSReadError) -> ClientHello? {
        handshake.append(fragment)
        if let type = handshake.pendingType, type != tlsHandshakeClientHello {
            throw .malformed("handshake type \(type) before \(what)")
        }
        guard let message = try handshake.next(budget: records.limit - records.consumed, limit: records.limit) else {
            return nil
        }
        return try ClientHello(message)
    }

    private mutating func read(_ record: TLSRecord) throws(TLSReadError) -> ClientHello? {
        switch record.contentType {
        case tlsContentTypeHandshake:
            return try readHello(record.fragment, before: "ClientHello")
        case tlsContentTypeAlert:
            throw alertError(record.fragment)
        case tlsContentTypeChangeCipherSpec:
            throw .malformed("change_cipher_spec before ClientHello")
        default:
            throw .malformed("application_data before ClientHello")
        }
    }
}
