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
    /// A pinned tunnel's client sent no complete ClientHello within `client_hello_timeout` of
    /// its `200`.
    case noClientHello
    /// The client left while the stream check held the tunnel (`stage`): its hello incomplete, or
    /// the server's flight still held back. Not the server's doing, and no attack.
    case clientLeft(StreamCheck.HeldStage)
}
