import COpenSSL
import Foundation
@_spi(ChainValidation) import PinPolicy

/// An `X509_STORE`: the anchors a chain may end in. Made once per trust setting and shared
/// read-only by validations.
///
/// Sendable by hand: nothing is added after `init`, and OpenSSL guards an `X509_STORE`'s own lazy
/// lookups with its internal lock, so concurrent `X509_verify_cert` calls on one store are safe.
public final class TrustStore: @unchecked Sendable {
    let ref: OpaquePointer
    public let name: String

    private init(ref: OpaquePointer, name: String) {
        self.ref = ref
        self.name = name
    }

    deinit { X509_STORE_free(ref) }

    /// The system store (OpenSSL's default paths: /usr/lib/ssl → /etc/ssl/certs on Debian).
    public static func system() throws -> TrustStore {
        let store = X509_STORE_new()!
        guard X509_STORE_set_default_paths(store) == 1 else {
            X509_STORE_free(store)
            throw OpenSSLError.drain("X509_STORE_set_default_paths")
        }
        return TrustStore(ref: store, name: "system")
    }

    /// Only the certificates of one PEM bundle, instead of the system store.
    public static func caFile(_ path: String) throws -> TrustStore {
        let certificates = try Certificate.load(file: path)
        return anchors(certificates, name: "ca-file:\(path)")
    }

    /// Exactly these certificates.
    public static func anchors(_ certificates: [Certificate], name: String) -> TrustStore {
        let store = X509_STORE_new()!
        for certificate in certificates { X509_STORE_add_cert(store, certificate.ref) }
        ERR_clear_error()  // a duplicate certificate is harmless
        return TrustStore(ref: store, name: name)
    }
}

/// Validates presented certificates under a rule's trust and returns the verified chain.
public enum ChainValidator {
    /// - Parameters:
    ///   - presented: what the server sent, leaf first.
    ///   - target: the CONNECT target: a name is checked against the SANs (no partial wildcards), an
    ///     IP literal against the IP SANs.
    ///   - store: the anchors (`system`, a CA file); ignored for `pins-only`.
    ///   - pinsOnlyAnchors: for `trust: pins-only`, the rule's pins: presented certificates matching
    ///     one become the anchors (`X509_V_FLAG_PARTIAL_CHAIN`).
    ///   - time: validation time; nil is now.
    public static func validate(presented: [Certificate], target: Target, store: TrustStore?,
                                pinsOnlyAnchors: [Pin]? = nil, at time: Date? = nil) -> ChainValidation {
        let presentedFacts = presented.map(\.facts)
        func failed(_ reason: RefusalReason, _ detail: String) -> ChainValidation {
            .failed(ChainFailure(reason: reason, detail: detail), presented: presentedFacts)
        }
        guard let leaf = presented.first else { return failed(.chainInvalid, "the server presented no certificate") }

        var anchorStore = store
        if let pins = pinsOnlyAnchors {
            let anchors = zip(presented, presentedFacts).filter { _, facts in pins.contains(where: facts.matches) }.map(\.0)
            guard !anchors.isEmpty else {
                return failed(.chainInvalid, "no presented certificate matches one of the rule's pins (trust: pins-only)")
            }
            anchorStore = TrustStore.anchors(anchors, name: "pins-only")
        }
        guard let anchorStore else { return failed(.chainInvalid, "no trust store") }

        ERR_clear_error()
        defer { ERR_clear_error() }
        let context = X509_STORE_CTX_new()!
        defer { X509_STORE_CTX_free(context) }
        let untrusted = OPENSSL_sk_new_null()!
        defer { OPENSSL_sk_free(untrusted) }
        for certificate in presented.dropFirst() { OPENSSL_sk_push(untrusted, UnsafeRawPointer(certificate.ref)) }

        guard X509_STORE_CTX_init(context, anchorStore.ref, leaf.ref, untrusted) == 1 else {
            return failed(.chainInvalid, OpenSSLError.drain("X509_STORE_CTX_init").description)
        }
        X509_STORE_CTX_set_purpose(context, X509_PURPOSE_SSL_SERVER)
        let param = X509_STORE_CTX_get0_param(context)!
        if pinsOnlyAnchors != nil { X509_VERIFY_PARAM_set_flags(param, UInt(X509_V_FLAG_PARTIAL_CHAIN)) }
        if let time { X509_VERIFY_PARAM_set_time(param, time_t(time.timeIntervalSince1970)) }
        switch target {
        case .name(let name):
            X509_VERIFY_PARAM_set_hostflags(param, UInt32(X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS))
            X509_VERIFY_PARAM_set1_host(param, name, name.utf8.count)
        case .ip(let address):
            X509_VERIFY_PARAM_set1_ip(param, address.bytes, address.bytes.count)
        }

        guard X509_verify_cert(context) == 1 else {
            let code = X509_STORE_CTX_get_error(context)
            let detail = String(cString: X509_verify_cert_error_string(Int(code)))
            let reason: RefusalReason = code == X509_V_ERR_HOSTNAME_MISMATCH || code == X509_V_ERR_IP_ADDRESS_MISMATCH
                ? .hostnameMismatch : .chainInvalid
            return failed(reason, detail)
        }
        guard let chain = X509_STORE_CTX_get1_chain(context) else {
            return failed(.chainInvalid, "X509_STORE_CTX_get1_chain returned nothing")
        }
        defer { OPENSSL_sk_pop_free(chain) { X509_free(OpaquePointer($0)) } }
        var facts: [CertificateFacts] = []
        for i in 0..<OPENSSL_sk_num(chain) {
            guard let raw = OPENSSL_sk_value(chain, i) else { continue }
            facts.append(Certificate(borrowing: OpaquePointer(raw)).facts)
        }
        return .verified(VerifiedChain(leafFirst: facts))
    }
}
