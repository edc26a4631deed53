import Foundation
import PinPolicy
import TLSInspection

/// One probe outside the proxy, for `pinproxy pin HOST`: resolve as the proxy would (the policy's
/// `resolve:`, then `proxy.dns`), connect, handshake, and hand back what the server presented.
public enum OneShotProbe {
    public struct Seen {
        public let presented: [Certificate]
        public let address: SocketAddress
        /// As the log names it (`TLSv1.3`).
        public let tlsVersion: String
        /// How the server proved it holds its key (not `.handshakeCompleted` when it then asked for
        /// a client certificate and aborted).
        public let proof: KeyProof
        /// The SCTs the server sent beside its chain (TLS extension, stapled OCSP), for CT.
        public let delivered: DeliveredSCTs

        /// TLS 1.3: what a tunnel gets the mirror check for.
        public var isTLS13: Bool { tlsVersion == TLSVersion.tls13.description }
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        /// Every address refused the connection: nothing listens on that port.
        public var nothingListens = false
    }

    public static func run(_ authority: Authority, policy: Policy, connectTo: [IPAddress]? = nil) throws(Failure) -> Seen {
        let loop = EventLoop()
        let settings = policy.proxy
        var outcome: Result<Seen, Failure> = .failure(Failure(description: "the probe did not finish"))
        var finished = false
        func finish(_ result: Result<Seen, Failure>) {
            outcome = result
            finished = true
            loop.stop()
        }
        var resolver: Resolver?
        var request: ResolveRequest?
        var probes: ProbeHub? = ProbeHub(loop: loop)  // the proxy's own connect-then-handshake path
        var waiter: ProbeHub.Waiter?
        let serverName: String? = if case .name(let n) = authority.target { n } else { nil }

        func probe(_ key: ProbeHub.Key) {
            waiter = probes?.probe(key, settings: settings) { result in
                switch result.outcome {
                case .failed(let refusal): finish(.failure(Failure(description: refusal.detail, nothingListens: refusal.nothingListens)))
                case .chain(let certificates, let proof):
                    finish(.success(Seen(presented: certificates, address: result.address!, tlsVersion: result.tlsVersion?.description ?? "", proof: proof,
                                                   delivered: result.delivered)))
                }
            }
        }
        func probeAddresses(_ addresses: [IPAddress]) {
            probe(ProbeHub.Key(serverName: serverName, port: authority.port, addresses: addresses))
        }

        if let connectTo {
            probeAddresses(connectTo)
        } else if let parent = settings.upstreamProxy {
            // Behind a parent proxy, as the proxy itself probes: the parent resolves the name.
            probe(ProbeHub.Key(serverName: serverName, port: authority.port, addresses: authority.target.ipValue.map { [$0] } ?? [],
                               parent: ParentHop(parent: parent, target: authority)))
        } else {
            switch authority.target {
            case .ip(let ip): probeAddresses([ip])
            case .name(let name):
                if let mapped = policy.resolve[name] {
                    probeAddresses(mapped)
                } else {
                    resolver = Resolver(loop: loop, settings: settings.dns, deadline: settings.dnsTimeout)
                    request = resolver!.resolve(name) { result in
                        switch result {
                        case .success(let addresses): probeAddresses(addresses)
                        case .failure(let failure):
                            finish(.failure(Failure(description: failure.detail(resolving: name))))
                        }
                    }
                }
            }
        }
        // Bounded: DNS, connect and handshake each have their own deadline; this is the backstop.
        let backstop = Timer(loop: loop, after: settings.dnsTimeout + settings.connectTotalTimeout + settings.probeTimeout + 1) {
            finish(.failure(Failure(description: "no answer in time")))
        }
        // A callback may already have finished synchronously; libevent forgets a stop requested
        // before the loop runs, so only run when there is still something to wait for.
        if !finished { loop.run() }
        // A flight still pending (the backstop fired) holds bufferevents on the loop's base: free
        // them, and the resolver, while the base still exists.
        withExtendedLifetime(loop) {
            backstop.cancel()
            request?.cancel()
            waiter?.cancel()
            probes = nil
            resolver = nil
        }
        return try outcome.get()
    }
}
