import Foundation
import PinPolicy

/// The server connection a plain-HTTP client's requests go over, described without its socket:
/// what the policy needs to say whether the next request may use it.
struct KeptServer: Equatable {
    let authority: Authority
    let address: SocketAddress
    /// The parent proxy it goes through (nil: the server itself).
    let parent: UpstreamProxy?

    /// Whether this policy still allows the connection: a reload may have denied its address or
    /// changed the parent since it was opened.
    func isAllowed(under policy: Policy) -> Bool {
        guard parent == policy.proxy.upstreamProxy else { return false }
        return parent != nil || !policy.proxy.denyDestinations.containsAnyForm(of: address.ip)
    }

    /// Whether the next request to `authority` may use it: allowed, and `idle` — bytes the server
    /// sent after its last response would be read as the next answer.
    func fits(_ authority: Authority, idle: Bool, under policy: Policy) -> Bool {
        authority == self.authority && idle && isAllowed(under: policy)
    }
}
