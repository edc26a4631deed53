import Foundation
import PinPolicy

/// How a relay ended.
enum RelayEnd: Equatable, Sendable {
    /// Both sides sent EOF and everything was passed on.
    case finished
    /// A side reset the connection (ECONNRESET, EPIPE).
    case reset(TunnelSide)
    /// Another error on a side.
    case failed(TunnelSide)
    /// Nothing moved either way for `idle_timeout`.
    case idle
    /// The stream check closed it.
    case refused(StreamRefusal)
}
