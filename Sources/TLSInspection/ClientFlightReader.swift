/// Client → server direction. Default limit 64 KiB (the ClientHello may span records).
///
/// Reads the first bytes a client sends through a tunnel, in whatever pieces they arrive, up to
/// its first ClientHello. The stream check (DESIGN pipeline step 7) compares that hello's SNI with
/// the CONNECT host and refuses a tunnel that does not start with TLS at all.
public struct ClientFlightReader: Sendable {
    private enum State: Sendable {
        case reading
        case done
        case failed(TLSReadError)
    }

    private var state = State.reading
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
                    state = .done
                    return hello
                }
            }
            return nil
        } catch {
            state = .failed(error)
            throw error
        }
    }

    private mutating func read(_ record: TLSRecord) throws(TLSReadError) -> ClientHello? {
        switch record.contentType {
        case tlsContentTypeHandshake:
            handshake.append(record.fragment)
            // Refuse another first message as soon as its type byte is here, not after its length.
            if let type = handshake.pendingType, type != tlsHandshakeClientHello {
                throw .malformed("handshake type \(type) before ClientHello")
            }
            guard let message = try handshake.next(budget: records.limit - records.consumed, limit: records.limit) else {
                return nil
            }
            return try ClientHello(message)
        case tlsContentTypeAlert:
            throw alertError(record.fragment)
        case tlsContentTypeChangeCipherSpec:
            throw .malformed("change_cipher_spec before ClientHello")
        default:
            throw .malformed("application_data before ClientHello")
        }
    }
}
