import COpenSSL
import CShims

/// The client side of pinproxy's own TLS handshakes: shaped like a common client's ClientHello
/// (ALPN h2,http/1.1, X25519/P-256/P-384, TLS 1.2–1.3, no session resumption) so the probe is
/// harder to tell apart from the tunnel. It verifies no chain itself (`SSL_VERIFY_NONE`): the chain
/// goes to `ChainValidator` under the rule's trust. OpenSSL still verifies the server's signatures
/// (CertificateVerify, ServerKeyExchange) whatever the verify mode; `ProbeSSL` records how far that got.
public final class ProbeTLSContext: @unchecked Sendable {
    // Sendable by hand: configured once in init, then only used to create SSL objects, which
    // OpenSSL allows from any thread.
    let ref: OpaquePointer

    public init() {
        ref = SSL_CTX_new(TLS_client_method())!
        _ = pp_SSL_CTX_set_min_proto_version(ref, TLS1_2_VERSION)
        SSL_CTX_set_verify(ref, SSL_VERIFY_NONE, nil)
        _ = pp_SSL_CTX_set1_groups_list(ref, "X25519:P-256:P-384")
        let alpn: [UInt8] = [2] + Array("h2".utf8) + [8] + Array("http/1.1".utf8)
        _ = SSL_CTX_set_alpn_protos(ref, alpn, UInt32(alpn.count))
        _ = pp_SSL_CTX_disable_session_cache(ref)
        SSL_CTX_set_options(ref, UInt64(pp_SSL_OP_NO_COMPRESSION()))
        // Ask for SCTs (the signed_certificate_timestamp extension) and a stapled OCSP response
        // (status_request, which this also turns on), as browsers do. Permissive: OpenSSL judges
        // nothing; `DeliveredSCTs` hands what came to pinproxy's own CT check.
        _ = SSL_CTX_enable_ct(ref, Int32(SSL_CT_VALIDATION_PERMISSIVE))
    }

    deinit { SSL_CTX_free(ref) }
}

/// How a server proved, in the probe's own handshake, that it holds the key of the leaf it sent.
/// Anyone can replay a site's public chain; only the key holder can sign the handshake.
public enum KeyProof: String, Sendable {
    /// The handshake completed: the server's Finished verified. What every ordinary probe logs,
    /// TLS 1.3 included (a TLS 1.3 client completes only after the server's CertificateVerify and
    /// Finished verified), and how TLS 1.2 RSA key exchange proves the key (only the key holder
    /// could decrypt the premaster secret).
    case handshakeCompleted = "handshake"
    /// TLS 1.3, the handshake not completed: CertificateVerify (RFC 8446 §4.4.3) verified, and the
    /// server's Finished followed (a server that hung up before the probe's own Finished went out).
    case certificateVerify = "certificate_verify"
    /// TLS 1.2 (EC)DHE, the handshake not completed: the signed ServerKeyExchange (RFC 5246 §7.4.3)
    /// verified (a server that then asked for a client certificate and aborted).
    case serverKeyExchange = "server_key_exchange"
}

/// One probe handshake's `SSL`, owned here: the bufferevent that drives it holds a second reference
/// (its `BEV_OPT_CLOSE_ON_FREE` drops that one), and `deinit` drops ours, so neither side can free it
/// under the other.
public final class ProbeSSL {
    /// Hand to `bufferevent_openssl_socket_new` only through `referenceForBufferevent()`.
    private let ref: OpaquePointer
    private let received = ReceivedHandshakeMessages()

    public init(context: ProbeTLSContext, serverName: String?) {
        ref = SSL_new(context.ref)!
        if let serverName { _ = pp_SSL_set_tlsext_host_name(ref, serverName) }
        SSL_set_msg_callback(ref, probeMessageCallback)
        _ = pp_SSL_set_msg_callback_arg(ref, Unmanaged.passUnretained(received).toOpaque())
    }

    deinit {
        SSL_set_msg_callback(ref, nil)  // the bufferevent's reference may outlive `received`
        SSL_free(ref)
    }

    /// A second reference for a bufferevent that frees it (`BEV_OPT_CLOSE_ON_FREE`).
    public func referenceForBufferevent() -> OpaquePointer {
        SSL_up_ref(ref)
        return ref
    }

    /// Takes back the reference when the bufferevent could not be made (libevent's error path
    /// clears its SSL pointer before freeing itself, so it never frees ours).
    public func dropBuffereventReference(_ reference: OpaquePointer) {
        precondition(reference == ref, "a reference to another SSL")
        SSL_free(reference)
    }

    /// `TLSv1.3`, `TLSv1.2`, … as negotiated so far.
    public var version: String { String(cString: SSL_get_version(ref)) }

    /// The certificates the server sent, leaf first (`SSL_get_peer_cert_chain` on a client includes it),
    /// each with its DER kept: the tunnels the verification cache serves share it.
    public var presentedChain: [Certificate] {
        guard let chain = SSL_get_peer_cert_chain(ref) else { return [] }
        return (0..<OPENSSL_sk_num(chain)).compactMap { i in
            OPENSSL_sk_value(chain, i).map { Certificate(borrowing: OpaquePointer($0)) }
        }
    }

    /// Whether the server proved it holds its key, or nil when it did not. OpenSSL hands a received
    /// handshake message to the message callback before processing it, and processes the messages
    /// of a flight in order, so a message seen after CertificateVerify (TLS 1.3) or after
    /// ServerKeyExchange (TLS 1.2) means that signature verified.
    public func keyProof(handshakeCompleted: Bool) -> KeyProof? {
        if handshakeCompleted { return .handshakeCompleted }
        let types = received.types
        if SSL_version(ref) == TLS1_3_VERSION {
            guard let verify = types.firstIndex(of: tlsHandshakeCertificateVerify),
                  types[(verify + 1)...].contains(tlsHandshakeFinished) else { return nil }
            return .certificateVerify
        }
        guard let exchange = types.firstIndex(of: tlsHandshakeServerKeyExchange), exchange + 1 < types.count else { return nil }
        return .serverKeyExchange
    }

    /// The SCTs the server delivered beside its certificate: the TLS extension's list (TLS 1.2
    /// ServerHello, TLS 1.3 leaf CertificateEntry) and the stapled OCSP response, unread.
    public var deliveredSCTs: (tlsExtension: [UInt8]?, ocspResponse: [UInt8]?) {
        var list: [UInt8]?
        if SSL_version(ref) == TLS1_3_VERSION {
            if let raw = received.certificate {
                list = (try? readTLS13Certificate(HandshakeMessage(type: raw[0], raw: raw)))?.leafSCTList
            }
        } else if let raw = received.serverHello {
            list = (try? ServerHello(HandshakeMessage(type: raw[0], raw: raw)))?.sctList
        }
        var response: UnsafePointer<UInt8>?
        let length = pp_SSL_get_tlsext_status_ocsp_resp(ref, &response)
        let ocsp = length > 0 ? response.map { Array(UnsafeBufferPointer(start: $0, count: length)) } : nil
        return (list, ocsp)
    }

    /// Sends a close_notify, so servers do not log an unexpected EOF.
    public func sendCloseNotify() {
        SSL_set_quiet_shutdown(ref, 0)
        SSL_shutdown(ref)
    }
}

/// The types of the handshake messages the server sent, in the order OpenSSL read them.
private final class ReceivedHandshakeMessages {
    var types: [UInt8] = []
    /// The last ServerHello (after a HelloRetryRequest, the real one) and the first Certificate,
    /// whole: where SCTs come by TLS extension.
    var serverHello: [UInt8]?
    var certificate: [UInt8]?
}

private let probeMessageCallback: @convention(c) (Int32, Int32, Int32, UnsafeRawPointer?, Int, OpaquePointer?, UnsafeMutableRawPointer?) -> Void = {
    written, _, contentType, buffer, length, _, arg in
    guard written == 0, contentType == Int32(tlsContentTypeHandshake), length >= 1, let buffer, let arg else { return }
    let received = Unmanaged<ReceivedHandshakeMessages>.fromOpaque(arg).takeUnretainedValue()
    // A server sends at most a dozen handshake messages; the bound keeps a hostile one from growing this.
    let type = buffer.load(as: UInt8.self)
    if received.types.count < 64 { received.types.append(type) }
    // Bounded by what a handshake message can be (2^24) and, in practice, by the probe's read limit.
    if length >= 4, type == tlsHandshakeServerHello || (type == tlsHandshakeCertificate && received.certificate == nil) {
        let whole = Array(UnsafeRawBufferPointer(start: buffer, count: length))
        if type == tlsHandshakeServerHello { received.serverHello = whole } else { received.certificate = whole }
    }
}
