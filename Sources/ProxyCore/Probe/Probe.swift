import CLibevent
import Foundation
import PinPolicy
import TLSInspection

/// What a probe saw.
struct ProbeResult {
    enum Outcome {
        /// The server presented these certificates (leaf first) and proved it holds the leaf's key.
        /// A server that asks for a client certificate after that proof, and then aborts, is judged
        /// on this chain (`proof` is not `.handshakeCompleted` then).
        case chain([Certificate], proof: KeyProof)
        case failed(Refusal)
    }

    let outcome: Outcome
    let address: SocketAddress?
    /// The version the handshake negotiated; nil when none was.
    let tlsVersion: TLSVersion?
    /// Taken from the verification cache rather than a handshake made for this CONNECT.
    var cached = false
    /// The SCTs the server sent beside its chain (TLS extension, stapled OCSP).
    var delivered = DeliveredSCTs.none
}

/// One TLS handshake over a connected socket; calls back once.
final class Probe {
    private var bev: OpaquePointer?
    private var ssl: ProbeSSL?
    private var timer: Timer?
    private var completion: ((ProbeResult) -> Void)?
    private let address: SocketAddress
    /// Keep the connection open after a chain, until `cancel()` (or `deinit`): what
    /// `ConcurrencyProbe` holds to see whether the server answers a second connection meanwhile.
    private let holdsConnection: Bool

    init(loop: EventLoop, context: ProbeTLSContext, fd: Int32, address: SocketAddress, serverName: String?,
         timeout: Double, holdsConnection: Bool = false, completion: @escaping (ProbeResult) -> Void) {
        self.address = address
        self.holdsConnection = holdsConnection
        self.completion = completion
        let ssl = ProbeSSL(context: context, serverName: serverName)
        self.ssl = ssl
        let options = Int32(BEV_OPT_CLOSE_ON_FREE.rawValue | BEV_OPT_DEFER_CALLBACKS.rawValue)
        let reference = ssl.referenceForBufferevent()
        guard let bev = bufferevent_openssl_socket_new(loop.base, fd, reference, BUFFEREVENT_SSL_CONNECTING, options) else {
            ssl.dropBuffereventReference(reference)
            close(fd)
            finish(.failed(.internalError("bufferevent_openssl_socket_new failed")), version: nil)
            return
        }
        self.bev = bev
        // Unretained: `release()` (in `deinit` at the latest) clears the callbacks and frees the
        // bufferevent, so none runs once the probe is gone.
        bufferevent_setcb(bev, nil, nil, { _, what, ctx in
            let savedErrno = errno  // first thing: any later call may overwrite it
            guard let ctx else { preconditionFailure("probe callback without its Probe") }
            let probe = Unmanaged<Probe>.fromOpaque(ctx).takeUnretainedValue()
            withExtendedLifetime(probe) { probe.onEvent(what, errno: savedErrno) }
        }, Unmanaged.passUnretained(self).toOpaque())
        bufferevent_enable(bev, Int16(EV_READ | EV_WRITE))
        timer = Timer(loop: loop, after: timeout) { [weak self] in
            guard let self else { return }
            finish(.failed(.probeTimeout), version: nil)
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
        ssl?.sendCloseNotify()
        bufferevent_free(bev)  // drops its reference to the SSL and closes the socket
        ssl = nil
    }

    private func onEvent(_ what: Int16, errno savedErrno: Int32) {
        guard let bev, let ssl else { return }
        if TestFault.handshake.isInjected {
            return finish(.failed(.tlsProtocolError("TLS handshake with \(address) failed: \(TestFault.detail)")), version: nil)
        }
        let version = TLSVersion(openSSLName: ssl.version)
        let presented = ssl.presentedChain
        let completed = what & Int16(BEV_EVENT_CONNECTED) != 0
        if !presented.isEmpty {
            // A chain counts only when the server proved, in this handshake, that it holds its key:
            // anyone can replay a site's public chain and hang up.
            guard let proof = ssl.keyProof(handshakeCompleted: completed) else {
                OpenSSLError.clear()
                return finish(.failed(.tlsProtocolError(
                    "\(address) sent a certificate chain but did not prove it holds its key (\(Self.missingProof(version))) before "
                        + "\(abortText(what, errno: savedErrno)); a server that only replays a public chain is not trusted")), version: version)
            }
            let (tlsExtension, ocspResponse) = ssl.deliveredSCTs
            return finish(.chain(presented, proof: proof), version: version,
                          delivered: DeliveredSCTs(tlsExtension: tlsExtension, ocspResponse: ocspResponse))
        }
        var reasons: [String] = []
        while true {
            let code = bufferevent_get_openssl_error(bev)
            if code == 0 { break }
            if code > 0x100 { reasons.append(OpenSSLError.text(of: code)) }  // small numbers are raw SSL_get_error() values
        }
        OpenSSLError.clear()
        let detail: String
        if !reasons.isEmpty {
            detail = "TLS handshake with \(address) failed: " + reasons.joined(separator: "; ")
        } else if what & Int16(BEV_EVENT_EOF) != 0 || savedErrno == 0 {
            detail = "\(address) closed the connection during the TLS handshake (is it a TLS server?)"
        } else {
            detail = "TLS handshake with \(address) failed: \(errnoText(savedErrno))"
        }
        finish(.failed(.tlsProtocolError(detail)), version: nil)
    }

    private static func missingProof(_ version: TLSVersion?) -> String {
        version == .tls13 ? "no verified CertificateVerify and Finished" : "no verified ServerKeyExchange and no completed handshake"
    }

    /// How the handshake ended, in words for the log's detail.
    private func abortText(_ what: Int16, errno savedErrno: Int32) -> String {
        if what & Int16(BEV_EVENT_EOF) != 0 { return "it closed the connection" }
        if savedErrno == ECONNRESET { return "it reset the connection" }
        if savedErrno != 0 { return "the connection failed (\(errnoText(savedErrno)))" }
        return "the handshake failed (an alert or a bad message)"
    }

    private func finish(_ outcome: ProbeResult.Outcome, version: TLSVersion?, delivered: DeliveredSCTs = .none) {
        let done = completion
        completion = nil
        if holdsConnection, case .chain = outcome, let bev {
            // Held open, read no more: the server stays busy with this connection until `cancel()`.
            timer?.cancel()
            timer = nil
            bufferevent_setcb(bev, nil, nil, nil, nil)
            bufferevent_disable(bev, Int16(EV_READ | EV_WRITE))
        } else {
            release()
        }
        done?(ProbeResult(outcome: outcome, address: address, tlsVersion: version, delivered: delivered))
    }
}
