import CLibevent
import Foundation
import PinPolicy

/// Asynchronous name resolution with evdns: the hosts file and nameservers of `proxy.dns`. (The
/// policy's `resolve:` map is consulted by the session before this.)
final class Resolver {
    let dns: OpaquePointer
    /// Kept so the base outlives the evdns base freed in `deinit`.
    private let loop: EventLoop

    enum Failure: Error {
        case notFound(String)
        case failed(String)
    }

    init(loop: EventLoop, settings: DNSSettings, deadline: Double) {
        self.loop = loop
        dns = evdns_base_new(loop.base, 0)!
        switch settings.nameservers {
        case .system:
            evdns_base_resolv_conf_parse(dns, DNS_OPTION_NAMESERVERS | DNS_OPTION_MISC, "/etc/resolv.conf")
        case .list(let servers):
            for server in servers { _ = server.withSockaddr { evdns_base_nameserver_sockaddr_add(dns, $0, socklen_t($1), 0) } }
        }
        giveUpAfter(deadline)
        // NULL would load only localhost; no hosts file means none at all.
        if let hosts = settings.hostsFile { evdns_base_load_hosts(dns, hosts) }
    }

    deinit { evdns_base_free(dns, 1) }

    /// `proxy.dns_timeout` is the session's to enforce, and only its timer can tell the client it
    /// was a timeout: evdns reports having given up its retries as "non-recoverable failure", the
    /// same as a SERVFAIL. So evdns retries every 2 s (a lost query, the next nameserver) and makes
    /// enough attempts to outlast the deadline, and a nameserver that never answers is a 504
    /// `dns_timeout`, not a 502 `dns_error`.
    func giveUpAfter(_ deadline: Double) {
        let attempts = min(255, Int((deadline / 2).rounded(.up)) + 1)  // evdns takes at most 255
        evdns_base_set_option(dns, "timeout:", "2")
        evdns_base_set_option(dns, "attempts:", String(attempts))
    }

    /// Starts a lookup; the request calls back exactly once (also when cancelled, silently).
    func resolve(_ name: String, _ completion: @escaping (Result<[IPAddress], Failure>) -> Void) -> ResolveRequest {
        let request = ResolveRequest(completion: completion)
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        // The request keeps itself alive until evdns calls back (which may happen before this returns).
        let context = Unmanaged.passRetained(request).toOpaque()
        let handle = evdns_getaddrinfo(dns, name, nil, &hints, { result, list, ctx in
            guard let ctx else { preconditionFailure("evdns callback without its request") }
            let request = Unmanaged<ResolveRequest>.fromOpaque(ctx).takeRetainedValue()
            request.complete(result: result, list: list)
            if let list { evutil_freeaddrinfo(list) }
        }, context)
        if !request.done {
            request.handle = handle
            // Not in the hosts file, and nobody to ask: evdns would queue the query until a
            // nameserver appears. Say so now instead of at dns_timeout.
            if evdns_base_count_nameservers(dns) == 0 {
                request.fail(.notFound("not in the hosts file, and proxy.dns has no nameservers"))
            }
        }
        return request
    }
}

/// One lookup in flight.
final class ResolveRequest {
    fileprivate var handle: OpaquePointer?
    fileprivate(set) var done = false
    private var completion: ((Result<[IPAddress], Resolver.Failure>) -> Void)?

    fileprivate init(completion: @escaping (Result<[IPAddress], Resolver.Failure>) -> Void) {
        self.completion = completion
    }

    /// No callback after this; evdns still calls back internally with EVUTIL_EAI_CANCEL.
    func cancel() {
        completion = nil
        if !done, let handle { evdns_getaddrinfo_cancel(handle) }
    }

    /// Ends the lookup with a failure of our own, before evdns answers.
    fileprivate func fail(_ failure: Resolver.Failure) {
        let callback = completion
        cancel()
        callback?(.failure(failure))
    }

    fileprivate func complete(result: Int32, list: UnsafeMutablePointer<addrinfo>?) {
        done = true
        handle = nil
        let callback = completion
        completion = nil
        guard let callback else { return }
        guard result == 0 else {
            // libevent's own table words EAI_NONAME the BSD way ("nodename nor servname provided");
            // say what the DNS answered instead.
            let notFound = result == EVUTIL_EAI_NONAME || result == EVUTIL_EAI_NODATA
            let text = notFound ? "no such name, or no address for it, in DNS" : String(cString: evutil_gai_strerror(result))
            return callback(.failure(notFound ? .notFound(text) : .failed(text)))
        }
        var addresses: [IPAddress] = []
        var entry = list
        while let e = entry {
            if let sa = e.pointee.ai_addr, let address = SocketAddress(sa)?.ip, !addresses.contains(address) {
                addresses.append(address)
            }
            entry = e.pointee.ai_next
        }
        callback(addresses.isEmpty ? .failure(.notFound("no addresses")) : .success(addresses))
    }
}
