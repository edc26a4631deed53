import COpenSSL
import CShims
import Foundation
import PinPolicy

/// An X.509 certificate: owns one `X509*` and frees it once. Everything above this file sees
/// `CertificateFacts`, never the pointer.
public final class Certificate {
    let ref: OpaquePointer
    /// The certificate's DER (`i2d_X509`), encoded once: a warm CONNECT asks for its cached
    /// chain's bytes several times (the validation memo's key, the stream check's comparison, CT).
    public let der: [UInt8]

    /// Takes over a reference the caller owns (from `d2i_X509`, `PEM_read_bio_X509`, `X509_up_ref`);
    /// `der`: the bytes it was parsed from, kept instead of a second encoding (a stream chain's
    /// certificates share the relayed bytes).
    init(takingOwnership ref: OpaquePointer, der: [UInt8]? = nil) {
        self.ref = ref
        self.der = der ?? derBytes { i2d_X509(ref, $0) }!
    }

    /// Adds a reference to an X509 that someone else owns (a peer chain, a store context).
    public convenience init(borrowing ref: OpaquePointer) {
        X509_up_ref(ref)
        self.init(takingOwnership: ref)
    }

    deinit { X509_free(ref) }

    public enum LoadError: Error, CustomStringConvertible {
        case noCertificate, malformed(OpenSSLError)
        public var description: String {
            switch self {
            case .noCertificate: return "no certificate found (expected PEM 'BEGIN CERTIFICATE' blocks or one DER certificate)"
            case .malformed(let e): return "not a readable certificate: \(e)"
            }
        }
    }

    /// Exactly one DER certificate, as it crosses the wire (a TLS Certificate message's entry):
    /// `d2i_X509` must take every byte. Never PEM: a certificate whose extension carries another
    /// certificate's PEM text would otherwise be read as that other certificate, and a chain judged
    /// as the genuine one would reach the client as a rogue one.
    public static func fromDER(_ bytes: [UInt8]) -> Certificate? {
        ERR_clear_error()
        defer { ERR_clear_error() }
        guard let parsed = decodeDER(bytes, { d2i_X509(nil, $0, $1) }, free: X509_free) else { return nil }
        return Certificate(takingOwnership: parsed, der: bytes)
    }

    /// A chain as it crosses the wire, each entry by `fromDER`; nil if any entry does not parse.
    public static func chain(fromDER ders: [[UInt8]]) -> [Certificate]? {
        var chain: [Certificate] = []
        for der in ders {
            guard let certificate = fromDER(der) else { return nil }
            chain.append(certificate)
        }
        return chain
    }

    /// Every certificate in PEM text (in order), or the one DER certificate: for files an operator
    /// names (pin files, `pin --cert`), never for bytes off the wire (`fromDER`).
    public static func load(_ bytes: [UInt8]) throws(LoadError) -> [Certificate] {
        ERR_clear_error()
        defer { ERR_clear_error() }
        if bytes.starts(with: Array("-----BEGIN".utf8)) || String(decoding: bytes.prefix(4096), as: UTF8.self).contains("-----BEGIN CERTIFICATE") {
            let certificates: [Certificate] = withMemoryBIO(bytes) { bio in
                var out: [Certificate] = []
                while let x509 = PEM_read_bio_X509(bio, nil, nil, nil) { out.append(Certificate(takingOwnership: x509)) }
                return out
            }
            guard !certificates.isEmpty else { throw .noCertificate }
            return certificates
        }
        let parsed: OpaquePointer? = bytes.withUnsafeBufferPointer { buffer in
            var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
        guard let parsed else { throw .malformed(OpenSSLError.drain("d2i_X509")) }
        return [Certificate(takingOwnership: parsed)]
    }

    public static func load(file path: String) throws -> [Certificate] {
        try load(FileError.contents(of: path))
    }

    /// DER SubjectPublicKeyInfo (`i2d_X509_PUBKEY`): what HPKP, OkHttp and curl hash.
    public var spkiDER: [UInt8] { derBytes { i2d_X509_PUBKEY(X509_get_X509_PUBKEY(ref), $0) }! }

    /// The validity dates alone, without the rest of `facts` (its digests and names).
    public var notBefore: Date { Self.date(X509_get0_notBefore(ref)) }
    public var notAfter: Date { Self.date(X509_get0_notAfter(ref)) }

    public var facts: CertificateFacts {
        let key = X509_get0_pubkey(ref)
        return CertificateFacts(
            spki: Pin(kind: .spki, digest: sha256(spkiDER))!,
            certificate: Pin(kind: .cert, digest: sha256(der))!,
            subject: Self.name(X509_get_subject_name(ref)),
            issuer: Self.name(X509_get_issuer_name(ref)),
            notBefore: notBefore,
            notAfter: notAfter,
            subjectAltNames: subjectAltNames,
            key: key.map(Self.describeKey) ?? "unknown",
            isCA: X509_check_ca(ref) != 0)
    }

    static func name(_ name: OpaquePointer?) -> String {
        guard let name else { return "" }
        return printedText { _ = X509_NAME_print_ex($0, name, 0, pp_XN_FLAG_RFC2253()) }
    }

    static func date(_ time: UnsafePointer<ASN1_TIME>?) -> Date {
        var tm = tm()
        guard let time, ASN1_TIME_to_tm(time, &tm) == 1 else { return Date(timeIntervalSince1970: 0) }
        return Date(timeIntervalSince1970: TimeInterval(timegm(&tm)))
    }

    /// `RSA 2048`, `EC P-256`, `Ed25519`.
    static func describeKey(_ key: OpaquePointer) -> String {
        let bits = EVP_PKEY_get_bits(key)
        switch EVP_PKEY_get_base_id(key) {
        case EVP_PKEY_RSA: return "RSA \(bits)"
        case EVP_PKEY_EC:
            var buffer = [CChar](repeating: 0, count: 64)
            var length = 0
            guard EVP_PKEY_get_group_name(key, &buffer, buffer.count, &length) == 1 else { return "EC \(bits)" }
            let group = String(decoding: buffer.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            let friendly = ["prime256v1": "P-256", "secp384r1": "P-384", "secp521r1": "P-521"][group] ?? group
            return "EC \(friendly)"
        case EVP_PKEY_ED25519: return "Ed25519"
        case EVP_PKEY_ED448: return "Ed448"
        default: return "key \(bits) bits"
        }
    }

    var subjectAltNames: [String] {
        guard let raw = X509_get_ext_d2i(ref, NID_subject_alt_name, nil, nil) else { return [] }
        let names = OpaquePointer(raw)
        defer { GENERAL_NAMES_free(names) }
        var out: [String] = []
        for i in 0..<OPENSSL_sk_num(names) {
            guard let entry = OPENSSL_sk_value(names, i)?.assumingMemoryBound(to: GENERAL_NAME.self) else { continue }
            switch entry.pointee.type {
            case GEN_DNS:
                if let s = entry.pointee.d.dNSName { out.append("DNS:" + Self.string(s)) }
            case GEN_IPADD:
                if let s = entry.pointee.d.iPAddress, let data = ASN1_STRING_get0_data(s),
                   let address = IPAddress(bytes: Array(UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(s))))) {
                    out.append("IP:\(address)")
                }
            default:
                continue
            }
        }
        return out
    }

    static func string(_ s: UnsafeMutablePointer<ASN1_STRING>) -> String {
        guard let data = ASN1_STRING_get0_data(s) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(ASN1_STRING_length(s))), as: UTF8.self)
    }
}

public struct FileError: Error, CustomStringConvertible {
    public let path: String
    public let message: String
    /// The message alone: callers already name the path.
    public var description: String { message }

    /// A certificate or key file's bytes (1 MiB at most); why not, with strerror and the errno.
    static func contents(of path: String) throws(FileError) -> [UInt8] {
        do {
            return try PlainFile.contents(of: path, limit: 1 << 20)
        } catch {
            throw FileError(path: path, message: "cannot read the file: \(error.reason)")
        }
    }
}

/// Reads `file:` pins for the policy loader: a PEM/DER certificate (its SPKI or, with `kind: cert`,
/// its certificate hash) or a PEM/DER public key (SPKI only).
public enum PinFiles {
    public static let loader: PinFileLoader = { path, kind in try read(path: path, kind: kind) }

    public static func read(path: String, kind: Pin.Kind) throws -> PinFileContents {
        let bytes = try FileError.contents(of: path)
        if let certificate = try? Certificate.load(bytes).first {
            let facts = certificate.facts
            if (try? Certificate.load(bytes).count) ?? 1 > 1 {
                throw FileError(path: path, message: "holds more than one certificate; a pin file names one key")
            }
            return PinFileContents(pin: kind == .spki ? facts.spki : facts.certificate, notAfter: facts.notAfter)
        }
        guard kind == .spki else {
            throw FileError(path: path, message: "kind: cert needs a certificate, and this file holds none")
        }
        guard let spki = publicKeyDER(bytes) else {
            throw FileError(path: path, message: "holds neither a certificate nor a public key (PEM or DER)")
        }
        return PinFileContents(pin: Pin(kind: .spki, digest: sha256(spki))!, notAfter: nil)
    }

    /// DER SubjectPublicKeyInfo of a PEM `PUBLIC KEY` or a DER SPKI.
    static func publicKeyDER(_ bytes: [UInt8]) -> [UInt8]? {
        ERR_clear_error()
        defer { ERR_clear_error() }
        let key: OpaquePointer? = withMemoryBIO(bytes) { bio in
            if let k = PEM_read_bio_PUBKEY(bio, nil, nil, nil) { return k }
            return bytes.withUnsafeBufferPointer { buffer in
                var cursor: UnsafePointer<UInt8>? = buffer.baseAddress
                return d2i_PUBKEY(nil, &cursor, buffer.count)
            }
        }
        guard let key else { return nil }
        defer { EVP_PKEY_free(key) }
        return derBytes { i2d_PUBKEY(key, $0) }
    }
}
