import Foundation
import PinPolicy

/// One end of a tunnel.
enum TunnelSide: String, Sendable {
    case client, upstream

    var other: TunnelSide { self == .client ? .upstream : .client }
}
