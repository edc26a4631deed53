/// A mirror's key share of one group, made and answered exactly as a mirror does it, for
/// `Benchmarks/mlkemcost.sh` (what ML-KEM adds to a tunnel's CPU). Not for the proxy's own use: it
/// only lets a release benchmark reach the internal key types.
@_spi(Benchmarks) public struct MirrorKeyCost {
    private let key: MirrorKey

    /// A fresh key for a share of NamedGroup `group` (no stocked X25519 key: every half is made
    /// here); nil when pinproxy does not compute that group.
    public init?(group: UInt16) {
        guard let group = MirrorGroup(rawValue: group), let key = MirrorKey(group, stock: EphemeralKeyStock(capacity: 0)) else {
            return nil
        }
        self.key = key
    }

    /// The client's key_exchange bytes.
    public var share: [UInt8] { key.publicShare }

    /// The shared secret of the server's key_exchange, as the mirror derives it; its length, or
    /// nil when the share is refused (the bytes themselves stay inside).
    public func secretLength(serverShare: [UInt8]) -> Int? {
        do throws(MirrorFailure) {
            return try key.sharedSecret(with: serverShare).count
        } catch {
            return nil
        }
    }
}
