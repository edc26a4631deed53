import PinPolicy

/// One CONNECT through the parent proxy (`proxy.upstream_proxy`): the request pinproxy sends it
/// and how its answer is read. Pure functions over bytes; the `Connector` does the I/O.
struct ParentHop: Hashable {
    let parent: UpstreamProxy
    let target: Authority

    /// The request head, with the parent's credentials when the policy names a file for them.
    var request: [UInt8] {
        var head = "CONNECT \(target) HTTP/1.1\r\nHost: \(target)\r\n"
        if let authorization = parent.authorization { head += "Proxy-Authorization: \(authorization)\r\n" }
        return Array((head + "\r\n").utf8)
    }

    /// The parent's answer head, parsed: a 2xx opens the tunnel (RFC 9110 §9.3.6); anything else is
    /// its refusal, passed on to the client with its status.
    enum Answer: Equatable {
        case established
        case refused(status: Int, phrase: String)
        case malformed(String)
    }

    /// The largest answer head pinproxy reads from the parent.
    static let maxAnswerBytes = 16 * 1024

    static func parse(answer head: [UInt8]) -> Answer {
        let line = ConnectRequest.split(head).first ?? []
        let parts = line.split(separator: 0x20, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0].elementsEqual("HTTP/1.1".utf8) || parts[0].elementsEqual("HTTP/1.0".utf8),
              parts[1].count == 3, parts[1].allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
              let status = Int(String(decoding: parts[1], as: UTF8.self)), status >= 200 else {
            return .malformed("its answer does not start with an HTTP/1.x status line")
        }
        if status < 300 { return .established }
        // Printable ASCII only, and short: the phrase goes into our own status line.
        let phrase = String(decoding: (parts.count > 2 ? Array(parts[2]) : []).filter { $0 >= 0x20 && $0 < 0x7f }.prefix(80), as: UTF8.self)
        return .refused(status: status, phrase: phrase)
    }

    /// What the client is told when the parent refuses. A 407 is the parent asking *pinproxy* for
    /// credentials: passed on as it is, it would make the client believe pinproxy wants them.
    func refusal(status: Int, phrase: String) -> Refusal {
        let detail = "the parent proxy \(parent) refused CONNECT \(target): \(status) \(phrase)"
        let relayed = status == 407 ? Refusal.Relayed(status: 502, phrase: "Parent Proxy Authentication Failed", received: status)
            : Refusal.Relayed(status: (400...599).contains(status) ? status : 502, phrase: phrase.isEmpty ? "Parent Proxy Refused" : phrase,
                              received: status)
        return Refusal(.network(.upstreamProxyRefused), detail: detail, relayed: relayed)
    }

    func failure(_ why: String) -> Refusal {
        Refusal(.network(.upstreamProxyRefused), detail: "the parent proxy \(parent) failed CONNECT \(target): \(why)",
                relayed: Refusal.Relayed(status: 502, phrase: "Parent Proxy Failed", received: nil))
    }
}
