/// The detached signature of a CT log list (`log_list.sig` beside `log_list.json`, as Google
/// publishes them): the publisher's SHA-256 signature (RSA PKCS #1 v1.5, or ECDSA) over the list
/// file's exact bytes.
public enum CTListSignature {
    public enum Failure: Error, Equatable, CustomStringConvertible {
        /// The key file holds no RSA or EC public key (PEM `PUBLIC KEY` or DER).
        case unreadableKey
        case doesNotVerify

        public var description: String {
            switch self {
            case .unreadableKey: return "the key file holds no RSA or EC public key (PEM 'PUBLIC KEY' or DER SubjectPublicKeyInfo)"
            case .doesNotVerify: return "the signature does not verify with the key: the list was changed, or signed by someone else"
            }
        }
    }

    public static func verify(list: [UInt8], signature: [UInt8], publicKey: [UInt8]) throws(Failure) {
        guard let spki = PinFiles.publicKeyDER(publicKey), let key = CTLogKey(spki: spki) else { throw .unreadableKey }
        guard !signature.isEmpty, key.verifies(signature, over: list) else { throw .doesNotVerify }
    }
}
