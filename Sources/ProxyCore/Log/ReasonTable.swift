import Logging
import PinPolicy

// What each reason means to the client and to the operator, in one place per case. The codes are
// PinPolicy's (`RefusalReason`, `NetworkRefusal`, `StreamReason`, `CloseCode`, `TunnelReason`,
// `RuntimeWarning`, `ForwardOutcome`); here each case gets what it decides of its HTTP answer, hint,
// detail, log level and counters. Every switch is exhaustive, so a new code does not compile until it
// has its entry; `ReasonTableTests` checks the table against a committed fixture and docs/logs.md.

/// A refusal made before a tunnel opened: what the client is answered and what the operator is told.
/// Its line is a warning (`tunnel_refused`, or `request_rejected` for a request pinproxy does not
/// take), counted in `refused` and `pinproxy_refusals_total{reason}`, or in `rejected`.
struct RefusalEntry {
    /// The status and reason phrase: curl shows only the status, Python and Go show the phrase, so
    /// each carries meaning on its own.
    let status: Int
    let phrase: String
    /// The RFC 9209 §2.3 error type of `Proxy-Status` (its `details` is the reason code).
    let proxyStatus: String
    /// What the operator can do about it, safely, from what the line knows (the target, the rule).
    let hint: (DecisionRecord) -> String
    /// What a plain-HTTP request's line says instead, where that differs.
    let plainHint: String?

    init(_ status: Int, _ phrase: String, _ proxyStatus: String, plain plainHint: String? = nil, hint: @escaping (DecisionRecord) -> String) {
        self.status = status
        self.phrase = phrase
        self.proxyStatus = proxyStatus
        self.plainHint = plainHint
        self.hint = hint
    }
}

extension Refusal.Code {
    var entry: RefusalEntry {
        switch self {
        case .policy(.pinMismatch):
            return RefusalEntry(502, "Certificate Pin Mismatch", "tls_certificate_error") { s in
                "if this change is legitimate, confirm the new chain from a trusted network with 'pinproxy pin \(s.pinTarget)' before adding its pin\(s.atRuleLine); the observed pins may be an attacker's"
            }
        case .policy(.chainInvalid):
            return RefusalEntry(502, "Certificate Invalid", "tls_certificate_error") { s in
                "the chain does not validate under trust \(s.rule?.trust.description ?? "?"); inspect it with 'pinproxy pin \(s.pinTarget)' from a trusted network and check the rule's trust"
            }
        case .policy(.hostnameMismatch):
            return RefusalEntry(502, "Certificate Invalid", "tls_certificate_error") { s in
                "the certificate does not name \(s.authority?.target.description ?? "the host"): a misconfigured server or interception"
            }
        case .policy(.denylistedKey):
            return RefusalEntry(502, "Certificate Key Denylisted", "tls_certificate_error") { _ in
                "a key on the deny list is in the chain; this is refused in every mode and never bypassed"
            }
        case .policy(.ctNotCompliant):
            return RefusalEntry(502, "Certificate Transparency Not Compliant", "tls_certificate_error") { s in
                // The exemption is a rule's `ct: off`: the host's own rule when it has one (a second
                // rule with the same pattern would be a load error), else a new rule for its name.
                let exemption = s.rule.flatMap { $0.isStandIn ? nil : $0 }.map { "set ct: off in its rule at line \($0.line) ('\($0.name)')" }
                    ?? "add a rule '\(s.authority.map { $0.target.ruleKey } ?? "host: NAME")' with ct: off"
                return "a publicly trusted certificate is logged in Certificate Transparency; one that is not was likely minted by an interception root (check which root issued it: ct_scts and the chain). An internal host with a private CA that logs nothing is exempted by name: \(exemption)"
            }
        case .policy(.unpinnedDenied):
            return RefusalEntry(403, "Forbidden by Pin Policy", "http_request_denied") { s in
                "add a rule for this host (get pins with 'pinproxy pin \(s.pinTarget)' from a trusted network) or set defaults.unpinned: allow"
            }
        case .policy(.portNotAllowed):
            return RefusalEntry(403, "Forbidden by Pin Policy", "http_request_denied") { _ in
                "add the port to proxy.allowed_ports if tunnels to it are intended"
            }
        case .policy(.destinationProhibited):
            return RefusalEntry(403, "Destination Forbidden", "destination_ip_prohibited") { _ in
                "the destination is in proxy.deny_destinations; change that list only if this destination is intended"
            }
        case .policy(.clientNotAllowed):
            return RefusalEntry(403, "Client Not Allowed", "http_request_denied") { _ in
                "add the client's network to proxy.allow_clients if it should use the proxy"
            }
        case .network(.badRequest):
            return RefusalEntry(400, "Bad Request", "http_request_error",
                                plain: "point http_proxy at pinproxy (http://HOST:PORT) and request http:// URLs through it; HTTPS goes through CONNECT") { _ in
                Self.noValidConnect
            }
        // What an HTTP client would have been told; the client itself gets its protocol's reply.
        case .network(.tlsToProxy), .network(.socksToProxy):
            return RefusalEntry(400, "Bad Request", "http_request_error") { _ in WrongProtocol.hint }
        case .network(.methodNotAllowed):
            return RefusalEntry(405, "Method Not Allowed", "http_request_denied",
                                plain: "pinproxy forwards \(Self.forwardedMethods) over plain HTTP") { _ in
                Self.noValidConnect
            }
        case .network(.requestTooLarge):
            return RefusalEntry(431, "Request Header Fields Too Large", "http_request_error") { _ in Self.noValidConnect }
        case .network(.headerTimeout):
            return RefusalEntry(408, "Request Timeout", "http_request_error") { _ in Self.noValidConnect }
        case .network(.upstreamProxyRefused):
            return RefusalEntry(502, "Parent Proxy Failed", "destination_unavailable") { _ in
                "the parent proxy (proxy.upstream_proxy) refused or failed this CONNECT; its status is passed on. Check proxy.upstream_proxy_credentials_file, or ask the parent's operator"
            }
        case .network(.plainHTTPToPinnedHost):
            return RefusalEntry(403, "Pinned Host Requires HTTPS", "http_request_denied") { _ in
                "use https:// for this host: pinproxy never reaches a pinned host over plain HTTP"
            }
        case .network(.plainHTTPRefused):
            return RefusalEntry(403, "Plain HTTP Refused", "http_request_denied") { _ in
                "proxy.plain_http is refuse: use https:// URLs, or set plain_http: forward"
            }
        case .network(.plainPortNotAllowed):
            return RefusalEntry(403, "Forbidden by Pin Policy", "http_request_denied") { _ in
                "add the port to proxy.allowed_plain_ports if plain HTTP to it is intended"
            }
        case .network(.badUpstreamResponse):
            return RefusalEntry(502, "Bad Upstream Response", "http_response_incomplete") { _ in
                "the server's answer could not be forwarded; the detail says why"
            }
        case .network(.connectionLimitReached):
            return RefusalEntry(503, "Too Many Tunnels", "connection_limit_reached") { _ in "raise proxy.max_tunnels if this load is expected" }
        case .network(.mirrorLimitReached):
            return RefusalEntry(503, "Too Many Mirror Checks", "connection_limit_reached") { _ in
                "this client's pinned tunnels hold their share of pinproxy's mirror connections (a quarter of LimitNOFILE over the workers, half of it per client) while their servers answer: a client making CONNECTs faster than its servers answer them. Raise LimitNOFILE, or lower the rule's mirror_checks"
            }
        // EMFILE/ENFILE: a 503 with Retry-After like the tunnel cap, because it passes when tunnels
        // close and the upstream is not at fault. RFC 9209 `connection_limit_reached` (a configured
        // limit was exceeded): RLIMIT_NOFILE is such a limit, and the fix is configuration;
        // `proxy_internal_error` would tell the client it met a bug.
        case .network(.outOfFileDescriptors):
            return RefusalEntry(503, "Out of File Descriptors", "connection_limit_reached") { _ in
                "a tunnel holds two or three file descriptors: raise LimitNOFILE (ulimit -n) to at least three times proxy.max_tunnels, or lower max_tunnels"
            }
        case .network(.shuttingDown):
            return RefusalEntry(503, "Shutting Down", "proxy_internal_error") { _ in "pinproxy is stopping; retry once it is back" }
        case .network(.proxyLoopDetected):
            return RefusalEntry(403, "Proxy Loop Detected", "proxy_loop_detected") { _ in "the target is pinproxy itself" }
        case .network(.dnsError):
            return RefusalEntry(502, "DNS Error", "dns_error") { _ in Self.resolveHint }
        case .network(.dnsTimeout):
            return RefusalEntry(504, "DNS Timeout", "dns_timeout") { _ in Self.resolveHint }
        case .network(.connectionRefused):
            return RefusalEntry(502, "Connection Failed", "connection_refused") { _ in Self.noTCP }
        case .network(.connectionTimeout):
            return RefusalEntry(504, "Connection Timeout", "connection_timeout") { _ in Self.noTCP }
        case .network(.tlsProtocolError):
            return RefusalEntry(502, "TLS Handshake Failed", "tls_protocol_error") { _ in Self.noTLS }
        case .network(.probeTimeout):
            return RefusalEntry(504, "TLS Handshake Timeout", "connection_read_timeout") { _ in Self.noTLS }
        case .network(.internalError):
            return RefusalEntry(500, "Proxy Internal Error", "proxy_internal_error") { _ in
                "an internal failure in pinproxy; the detail says which step; please report it"
            }
        }
    }

    /// The status and phrase (`403 Forbidden by Pin Policy`), where words name the answer.
    var answerLine: String { "\(entry.status) \(entry.phrase)" }

    private static let forwardedMethods = PlainRequest.methods.sorted().joined(separator: ", ")

    // Hints that several codes share.
    private static let noValidConnect = "the client sent no valid CONNECT request; see the log reference, docs/logs.md"
    private static let resolveHint = "check proxy.dns (nameservers, hosts_file) or map the name in the policy's resolve: (pinproxy resolves every CONNECT name itself; a client's own mapping, such as curl --resolve, does not reach through a proxy)"
    private static let noTCP = "the upstream did not accept a TCP connection; check the address and port"
    private static let noTLS = "the upstream did not complete a TLS handshake; is it a TLS server on this port?"
}

extension RefusalReason {
    /// The client body's and the line's `detail` of a refusal the probe's chain earned.
    func detail(_ target: Target, _ evaluation: Evaluation) -> String {
        let host = target.description
        switch self {
        case .pinMismatch: return "no certificate in the verified chain of \(host) matches a pin of its rule"
        case .chainInvalid, .hostnameMismatch: return "the certificate chain of \(host) is not valid: \(evaluation.chainFailure?.detail ?? rawValue)"
        case .denylistedKey: return "the chain of \(host) carries a deny-listed key"
        case .ctNotCompliant: return "the certificate of \(host) does not meet Chrome's Certificate Transparency policy: \(evaluation.ctShortfall ?? "not compliant")"
        // Admission's reasons, decided before any chain (their details are `AdmissionCause`'s).
        case .portNotAllowed, .destinationProhibited, .clientNotAllowed, .unpinnedDenied: return rawValue
        }
    }
}

extension StreamReason {
    /// Whether report mode or a debug bypass may let the tunnel through. Only what leaves it where
    /// it would be without the check (probe-only): a TLS 1.3 key-log line missing or wrong, a mirror
    /// that fails, a quarantine. What leaves nothing to judge — bytes that are not TLS, a flight
    /// that does not parse, a resumption of an unknown session, a replayed hello, a server that
    /// never answers — is refused in every mode: letting it through would let a deny-listed key
    /// through unseen. An SNI mismatch is decided by `SNIScope` (never a name another enforced rule
    /// holds); a chain's own reasons by the rule's mode, as the probe's are.
    var mayBeLetThrough: Bool {
        switch self {
        case .keylogMissing, .keylogInvalid, .mirrorInvalid, .mirrorFailed, .mirrorLost, .quarantined: return true
        case .notTLS, .sniMismatch, .unverifiedResumption, .malformedTLS, .policy, .firstFlightTimeout, .helloReplayed: return false
        }
    }

    /// What the operator can do about a stream check's refusal. The tunnel was open (its `200`
    /// sent), so the client gets no HTTP answer: its TLS fails (with a `bad_certificate` alert for
    /// a judged chain). The line is `tunnel_refused` with a `stage`, a warning, counted in `refused`
    /// and `pinproxy_refusals_total{reason}` with the probe's refusals of the same code.
    func hint(_ s: DecisionRecord) -> String {
        switch self {
        case .policy(let policy): return Refusal.Code.policy(policy).entry.hint(s) + "; the probe's chain passed, this look's did not: the server may answer this client's ClientHello with another certificate (dual certificates, another virtual host, an ALPN), or someone may be intercepting this client's connections. pinproxy looks again with the same hello and says which: confirming_look (the server's own answer) or interception_suspected"
        case .notTLS: return "a pinned tunnel carries only TLS; the client (or the server) sent something else"
        case .sniMismatch: return "the client asked the server for another name than it asked pinproxy for; tunnel to that name instead"
        case .unverifiedResumption: return "the client resumed a TLS session made without pinproxy; it will make a full handshake through pinproxy once it forgets that session"
        case .malformedTLS: return "the TLS handshake in the tunnel does not parse; a broken peer or an attack"
        case .keylogInvalid: return "the client's key-log line does not open the flight its server sent, or a second line contradicts it: another writer of the key log, or an attack; a wrong line never lets a tunnel through unverified"
        case .keylogMissing: return "the rule requires the client's key log for TLS 1.3: run the client with SSLKEYLOGFILE set to proxy.keylog's path (Node: NODE_OPTIONS=--tls-keylog=PATH), or drop require_keylog"
        case .mirrorInvalid: return "the server's answer to pinproxy's copy of the client's ClientHello was not signed by its certificate's key (or did not open under the mirror's own secret): a replayed chain, an interceptor, or a broken server. Unproved, it is no incident by itself"
        case .mirrorFailed: return "the server answered pinproxy's copy of the client's ClientHello with an alert or a flight pinproxy cannot read (see detail); the client's own hello most likely gets the same answer (a cipher suite, ALPN or extension the server refuses), so the client's handshake fails too. Not an interception: no quarantine"
        case .mirrorLost: return "of the look-alike connections pinproxy made at the same moment (the client's and its mirror check's), one got the server's answer and another none. A server that serves one connection at a time (openssl s_server, a single-threaded Python server, some embedded servers) does that to every tunnel ('pinproxy pin HOST:PORT' says so): give its rule mirror_checks: 0. Otherwise an interceptor may be choosing connections (see interception_suspected)"
        case .firstFlightTimeout: return "the server accepted the connections but did not answer the client's ClientHello (nor pinproxy's copy of it) in time: an overloaded or hung server, or something on the path that holds handshakes; raise proxy.probe_timeout if the server is merely slow"
        case .helloReplayed: return "a ClientHello is made afresh for each connection (its random is new each time); this one repeats an earlier tunnel's, so a program is replaying captured hellos through pinproxy. pinproxy sent no mirror for it"
        case .quarantined: return "a check caught an interception for this host:port (see interception_suspected); until the quarantine ends only tunnels pinproxy verifies by themselves pass: use TLS 1.2 or write a key log (SSLKEYLOGFILE), and investigate the network path"
        }
    }
}

/// How a reason that is no refusal is logged and counted.
struct OutcomeEntry {
    /// The line's level; nil: no line of its own (a summary line or a counter speaks for it;
    /// `Session.finish` closes such a session without one).
    let level: Logger.Level?
    /// The counters it adds to, besides `closed`, which counts every `tunnel_closed` line: each is
    /// a `stats` key and a `/metrics` series (`StatsSample.keys`, `MetricsText`), but
    /// `closedByReload`, which the `policy_reloaded` line's count comes from. A new counter is
    /// also a field of `Counters` (and its `summed`), a `StatsSample` key and a `MetricsText`
    /// series; `ReasonTableTests` and `CountersTests` say which is missing.
    let counters: [WritableKeyPath<Counters, Int>]
}

extension CloseCode {
    /// A `tunnel_closed` line's `close_reason`.
    var entry: OutcomeEntry {
        switch self {
        case .eof, .clientReset, .upstreamReset, .clientError, .upstreamError, .idleTimeout, .clientClosed, .shutdown, .debugBypassExpired:
            return OutcomeEntry(level: .info, counters: [])
        // The client's doing, never an alarm; `no_client_hello` says how often it happens.
        case .clientHelloTimeout, .reclaimed:
            return OutcomeEntry(level: .info, counters: [\.withoutClientHello])
        // An open tunnel the operator's new policy refuses: the line carries the refusal's reason.
        case .policyReload:
            return OutcomeEntry(level: .warning, counters: [\.closedByReload])
        // One of thousands in a flood: the worker's `silent_connections_reaped` speaks for them, and
        // the worker counts them as it reaps (no close line does: a level here would count twice).
        case .reaped:
            return OutcomeEntry(level: nil, counters: [\.silentReaped])
        // A connection that never sent a byte (it left, or stayed silent for `header_timeout`):
        // no line, as HAProxy's `dontlognull`.
        case .silent:
            return OutcomeEntry(level: nil, counters: [\.silentClosed])
        }
    }
}

extension TunnelReason {
    /// The `reason` of a line about an open tunnel that is no refusal.
    var entry: OutcomeEntry {
        switch self {
        // A pinned TLS 1.3 tunnel rests on the probe alone: allowed, never quietly.
        case .mirrorUnavailable: return OutcomeEntry(level: .warning, counters: [\.mirrorsUnavailable])
        // Allowed (clients do not recover from a refused resumption), but nothing verified it.
        case .resumptionUnverified: return OutcomeEntry(level: .warning, counters: [\.unverifiedResumptions])
        // Said on a `close_reason=policy_reload` line, whose level and counter are that code's.
        case .unverifiedChain: return OutcomeEntry(level: .warning, counters: [])
        // What the client asked for, unless it is a downgrade (`SessionLog.versionChanged` raises
        // that to a warning).
        case .tlsVersionChanged: return OutcomeEntry(level: .info, counters: [])
        }
    }
}

extension RuntimeWarning {
    /// A `tunnel_warning` the probe's chain or the rule's dates raised: an error once the rule has
    /// expired (it is refused or reported from then on), else a warning; counted nowhere.
    var level: Logger.Level {
        switch self {
        case .ruleExpired: return .error
        case .noRealBackup, .leafExpiresSoon, .ruleExpiresSoon: return .warning
        }
    }

    /// What to do about it, where the detail does not say it already.
    func hint(_ s: DecisionRecord) -> String? {
        switch self {
        case .noRealBackup: return "add a backup to the rule at line \(s.rule?.line ?? 0): \(BackupRule.advice)"
        case .leafExpiresSoon, .ruleExpired, .ruleExpiresSoon: return nil
        }
    }
}

extension ForwardOutcome {
    /// An `http_forwarded` line: relayd's rule, a clean end is news and anything else a warning.
    /// Counted nowhere of its own.
    var level: Logger.Level {
        switch self {
        case .complete: return .info
        case .shutdown, .policyReload, .badRequestBody, .badResponse, .upstreamTimeout, .upstreamClosed, .upstreamReset, .upstreamError,
             .idleTimeout, .clientClosed, .clientError:
            return .warning
        }
    }
}

private extension DecisionRecord {
    /// `HOST:PORT --config FILE` for `pinproxy pin`: with the file in force, its resolve:, DNS and
    /// trust are what the proxy used, and a name only in resolve: cannot be probed without them.
    var pinTarget: String { (authority?.description ?? "HOST:PORT") + (policySource.map { " --config \(shellWord($0))" } ?? "") }

    /// ` (rule at line N)`, when a rule decided.
    var atRuleLine: String { rule.map { " (rule at line \($0.line))" } ?? "" }
}
