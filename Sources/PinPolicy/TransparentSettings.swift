/// Transparent mode (`proxy.transparent_listen`, `proxy.transparent_mark`): where connections the
/// kernel redirected (nftables `redirect`/`dnat`) arrive, and the socket mark pinproxy puts on its own
/// upstream connections so that the redirect rules can exempt them. Fixed at start: a change needs a
/// restart, like `listen`.
public struct TransparentSettings: Hashable, Sendable {
    /// `transparent_listen`: empty when transparent mode is off.
    public var listen: [SocketAddress] = []
    /// `transparent_mark`: `SO_MARK` on every upstream socket (probe, mirror, tunnel, plain
    /// forwarding); nil: none (the rules exempt pinproxy by its uid, `meta skuid`).
    public var mark: UInt32?
    /// The line of `transparent_listen`, for `check`'s warnings.
    public var line = 0

    public init() {}

    public var isOn: Bool { !listen.isEmpty }
}
