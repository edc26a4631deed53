import Foundation
import PinPolicy

/// Which of a target's addresses may be reached: none in `deny_destinations` (in any spelling: an
/// IPv4 address, its mapped and NAT64 forms), and none that is pinproxy's own listening address (a
/// request there would loop back into the proxy). Pure: the listening addresses come as a predicate.
struct DestinationFilter {
    /// Why no address may be reached, with the evidence the refusal's detail names.
    enum Cause: Equatable {
        /// Every address is denied: each with the `deny_destinations` entry that names it.
        case allDenied(Target, [Denied])
        /// An allowed address is pinproxy's own.
        case loop(Authority, SocketAddress)

        var refusal: Refusal {
            switch self {
            case .allDenied(let target, let denied):
                let names = denied.map { "\($0.address) (\($0.entry))" }.joined(separator: ", ")
                return .policy(.destinationProhibited, detail: "\(target) resolved only to denied destinations: \(names)")
            case .loop(let authority, let own):
                return .loop("\(authority) is pinproxy's own listening address \(own)")
            }
        }
    }

    struct Denied: Equatable {
        let address: IPAddress
        let entry: String
    }

    enum Outcome: Equatable {
        /// These, in the order given, may be tried.
        case reach([IPAddress])
        case refused(Cause)
    }

    let deny: AddressSet
    let isOwnAddress: (SocketAddress) -> Bool

    /// The `deny_destinations` entry that names this address in any spelling, or nil.
    func entry(denying address: IPAddress) -> String? {
        deny.entry(containingAnyFormOf: address)?.name
    }

    /// Drops denied addresses; refuses when none is left, or when one left is pinproxy's own.
    func filter(_ all: [IPAddress], for authority: Authority) -> Outcome {
        let allowed = all.filter { entry(denying: $0) == nil }
        guard !allowed.isEmpty else {
            return .refused(.allDenied(authority.target, all.map { Denied(address: $0, entry: entry(denying: $0) ?? "?") }))
        }
        if let loop = allowed.first(where: { isOwnAddress(SocketAddress(ip: $0, port: authority.port)) }) {
            return .refused(.loop(authority, SocketAddress(ip: loop, port: authority.port)))
        }
        return .reach(allowed)
    }
}

extension Resolver.Failure {
    /// The one text of a failed lookup, for the refusal's detail and the CLI's probe.
    func detail(resolving name: String) -> String {
        switch self {
        case .notFound(let why): return "\(name) did not resolve: \(why)"
        case .failed(let why): return "resolving \(name) failed: \(why)"
        }
    }
}
