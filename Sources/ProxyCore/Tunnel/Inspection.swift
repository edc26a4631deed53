/// What the relay's hook does with the bytes one side sent.
enum Inspection: Equatable {
    /// Keep them, and what follows, until there is a decision.
    case hold
    /// Pass on the first `count` bytes of what is held (a TLS 1.3 ServerHello), keep holding the rest.
    case pass(count: Int)
    /// Pass on everything held, and keep showing new bytes.
    case release
    /// Pass on everything held; this side needs no more looking at.
    case done
    /// Close both sides.
    case refuse(StreamRefusal)
}
