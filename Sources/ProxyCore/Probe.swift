import CLibevent
import COpenSSL
import CShims
import Foundation
import PinPolicy
import TLSInspection

/// The client side of pinproxy's own TLS handshakes: shaped like a common client's ClientHello
/// (ALPN h2,http/1.1, X25519/P-256/P-384, TLS 1.2–1.3, no session resumption) so the probe is
/// harder to tell apart from the tunnel. It verifies nothing itself (`SSL_VERIFY_NONE`): the chain
/// goes to `ChainValidator` under the rule's trust.
final class ProbeTLSContext: @unchecked Sendable {
    // Sendable by hand: configured once in init, then only used to create SSL objects, which
    // OpenSSL allows from any thread.
    let ref: OpaquePointer

    init() {
        ref = SSL_CTX_new(TLS_client_method())!
        _ = pp_SSL_CTX_set_min_proto_version(ref, TLS1_2_VERSION)
        SSL_CTX_set_verify(ref, SSL_VERIFY_NONE, nil)
        _ = pp_SSL_CTX_set1_groups_list(ref, "X25519:P-256:P-384")
        let alpn: [UInt8] = [2] + Array("h2".utf8) + [8] + Array("http/1.1".utf8)
        _ = SSL_CTX_set_alpn_protos(ref, alpn, UInt32(alpn.count))
        _ = pp_SSL_CTX_disable_session_cache(ref)
        SSL_CTX_set_options(ref, UInt64(pp_SSL_OP_NO_COMPRESSION()))
    }

    deinit { SSL_CTX_free(ref) }
}

/// What a probe saw.
struct ProbeResult {
    enum Outcome {
        /// The server presented these certificates (leaf first). `completed` is false when it
        /// aborted after sending them (it wanted a client certificate): judged on that chain.
        case chain([Certificate], completed: Bool)
        case failed(Refusal)
    }

    let outcome: Outcome
    let address: SocketAddress?
    /// `TLSv1.3`, `TLSv1.2`, or empty when no handshake happened.
    let tlsVersion: String
}

/// One TLS handshake over a connected socket; calls back once.
final class Probe {
    private var bev: OpaquePointer?
    private var timer: Timer?
    private var completion: ((ProbeResult) -> Void)?
    private let address: SocketAddress

    init(loop: EventLoop, context: ProbeTLSContext, fd: Int32, address: SocketAddress, serverName: String?,
         timeout: Double, completion: @escaping (ProbeResult) -> Void) {
        self.address = address
        self.completion = completion
        let ssl = SSL_new(context.ref)!
        if let serverName { _ = pp_SSL_set_tlsext_host_name(ssl, serverName) }
        let options = Int32(BEV_OPT_CLOSE_ON_FREE.rawValue | BEV_OPT_DEFER_CALLBACKS.rawValue)
        guard let bev = bufferevent_openssl_socket_new(loop.base, fd, ssl, BUFFEREVENT_SSL_CONNECTING, options) else {
            SSL_free(ssl)
            close(fd)
            finish(.failed(.internalError("bufferevent_openssl_socket_new failed")), version: "")
            return
        }
        self.bev = bev
        bufferevent_setcb(bev, nil, nil, { bev, what, ctx in
            let savedErrno = errno  // first thing: later calls overwrite it (STACK.md pitfall 11)
            let probe = Unmanaged<Probe>.fromOpaque(ctx!).takeUnretainedValue()
            withExtendedLifetime(probe) { probe.onEvent(what, errno: savedErrno) }
        }, Unmanaged.passUnretained(self).toOpaque())
        bufferevent_enable(bev, Int16(EV_READ | EV_WRITE))
        timer = Timer(loop: loop, after: timeout) { [unowned self] in
            finish(.failed(.probeTimeout), version: "")
        }
    }

    func cancel() {
        completion = nil
        release()
    }

    deinit { release() }

    private func release() {
        timer?.cancel()
        timer = nil
        guard let bev else { return }
        self.bev = nil
        bufferevent_setcb(bev, nil, nil, nil, nil)
        if let ssl = bufferevent_openssl_get_ssl(bev) {
            SSL_set_quiet_shutdown(ssl, 0)
            SSL_shutdown(ssl)  // a close_notify, so servers do not log an unexpected EOF
        }
        bufferevent_free(bev)  // frees the SSL and closes the socket
    }

    private func onEvent(_ what: Int16, errno savedErrno: Int32) {
        guard let bev, let ssl = bufferevent_openssl_get_ssl(bev) else { return }
        let version = String(cString: SSL_get_version(ssl))
        let presented = Self.peerChain(ssl)
        if what & Int16(BEV_EVENT_CONNECTED) != 0 {
            return finish(.chain(presented, completed: true), version: version)
        }
        if !presented.isEmpty {
            return finish(.chain(presented, completed: false), version: version)
        }
        var reasons: [String] = []
        while true {
            let code = bufferevent_get_openssl_error(bev)
            if code == 0 { break }
            if code > 0x100 {  // small numbers are raw SSL_get_error() values, not ERR codes
                var buffer = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(code, &buffer, buffer.count)
                reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
        }
        ERR_clear_error()
        let detail: String
        if !reasons.isEmpty {
            detail = "TLS handshake with \(address) failed: " + reasons.joined(separator: "; ")
        } else if what & Int16(BEV_EVENT_EOF) != 0 || savedErrno == 0 {
            detail = "\(address) closed the connection during the TLS handshake (is it a TLS server?)"
        } else {
            detail = "TLS handshake with \(address) failed: \(errnoText(savedErrno))"
        }
        finish(.failed(.tlsProtocolError(detail)), version: "")
    }

    /// The certificates the server sent, leaf first (`SSL_get_peer_cert_chain` on a client includes it).
    static func peerChain(_ ssl: OpaquePointer) -> [Certificate] {
        guard let chain = SSL_get_peer_cert_chain(ssl) else { return [] }
        return (0..<OPENSSL_sk_num(chain)).compactMap { i in
            OPENSSL_sk_value(chain, i).map { Certificate(borrowing: OpaquePointer($0)) }
        }
    }

    private func finish(_ outcome: ProbeResult.Outcome, version: String) {
        let done = completion
        completion = nil
        release()
        done?(ProbeResult(outcome: outcome, address: address, tlsVersion: version))
    }
}
