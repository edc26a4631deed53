import Foundation
import PinPolicy
import TestSupport

extension CTFixtures {
    func serve(_ leaf: String, tls: String = "any") throws -> Upstream {
        try Upstream(chainPath: chain(leaf), keyPath: key(leaf), name: leaf, tls: tls)
    }

    func get(_ proxy: ProxyProcess, _ leaf: String, port: UInt16, environment: [String: String] = [:]) throws -> CurlResult {
        try curl(proxy: proxy.port, host: host(leaf), port: port, cacert: roots, environment: environment)
    }

    /// `ct_scts` for these logs' SCTs (made a day before the fixtures), delivered so.
    func scts(_ logs: [String], _ delivery: String) throws -> String {
        let time = try CTExpectations(self).sctTime
        return logs.map { "\(CTExpectations.description($0)) (\(CTExpectations.operatorName($0))) \(time) \(delivery)" }.joined(separator: "; ")
    }
}

/// What the test PKI's logs, SCTs and shortfalls look like in pinproxy's log lines, from the
/// generator's own outputs (log_list.json, expected.txt) and Chrome's rules.
struct CTExpectations {
    let ct: CTFixtures
    let list: [String: Any]
    /// expected.txt: `leaf delivery logIDhex timestampMs good|bad`.
    let facts: [[String]]

    init(_ ct: CTFixtures) throws {
        self.ct = ct
        list = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: ct.logList))) as? [String: Any] ?? [:]
        facts = try String(contentsOfFile: ct.path("expected.txt"), encoding: .utf8).split(separator: "\n").map { $0.split(separator: " ").map(String.init) }
    }

    static func description(_ log: String) -> String { "Test Operator \(log.prefix(1).uppercased()) '\(log)' log" }
    static func operatorName(_ log: String) -> String { "Test Operator \(log.prefix(1).uppercased())" }

    /// When the logs saw the precertificates, as pinproxy writes a time.
    var sctTime: String {
        let ms = Double(facts.first { $0[1] == "embedded" && $0.count == 5 }?[3] ?? "0") ?? 0
        return RFC3339.format(Date(timeIntervalSince1970: ms / 1000))
    }

    /// The logs whose SCTs count toward the shortfall, in the certificate's order.
    func counted(_ leaf: String) -> [String] {
        switch leaf {
        case "one-operator": ["a1", "a2"]
        case "two-long": ["a1", "b1"]
        case "wrong-cert", "unlisted-log", "retired-log", "future": ["a1"]
        default: []
        }
    }

    /// A refusal's `detail`: the host and the policy, then the shortfall.
    func refusalDetail(_ leaf: String) throws -> String {
        "the certificate of \(ct.host(leaf)) does not meet Chrome's Certificate Transparency policy: " + (try detail(leaf))
    }

    /// `ct_detail`: the shortfall in words for this leaf.
    func detail(_ leaf: String) throws -> String {
        let none = "0 valid embedded SCTs from 0 operators; 2 SCTs needed for a certificate valid 90 days and 2 operators needed"
        let one = "1 valid embedded SCT from 1 operator; 2 SCTs needed for a certificate valid 90 days and 2 operators needed"
        switch leaf {
        case "intercepted", "no-sct", "two-operators-unlogged": return none
        case "one-operator": return "2 valid embedded SCTs from 1 operator; 2 operators needed"
        case "two-long": return "2 valid embedded SCTs from 2 operators; 3 SCTs needed for a certificate valid 398 days"
        case "wrong-cert": return one + " (ignored: SCT from \(try ct.logID("b1")): its signature does not verify for this certificate)"
        case "unlisted-log": return one + " (ignored: SCT from \(try ct.logID("unlisted")): its log is in no log list)"
        case "retired-log": return one + " (ignored: SCT from \(try ct.logID("b2")): its log retired \(retiredAt), before the certificate's earliest SCT)"
        case "future":
            // expected.txt lists future's SCTs in the certificate's order: a1's, then b1's ten years ahead.
            let ms = Double(facts.filter { $0[0] == "future" }.last?[3] ?? "0") ?? 0
            let when = RFC3339.format(Date(timeIntervalSince1970: ms / 1000))
            return one + " (ignored: SCT from \(try ct.logID("b1")): its timestamp \(when) is in the future)"
        default: throw HelperError(message: "no expected detail for \(leaf)")
        }
    }

    /// b2's retirement, as the list gives it.
    var retiredAt: String {
        let operators = list["operators"] as? [[String: Any]] ?? []
        let logs = operators.flatMap { $0["logs"] as? [[String: Any]] ?? [] }
        let b2 = logs.first { ($0["description"] as? String) == Self.description("b2") }
        return ((b2?["state"] as? [String: Any])?["retired"] as? [String: Any])?["timestamp"] as? String ?? "?"
    }
}
