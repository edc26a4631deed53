import Foundation

/// An on-path interceptor in front of a genuine server (scripts/interceptor.py): it reads each
/// connection's ClientHello, picks the rogue or the genuine upstream by `strategy`, and logs one
/// JSON line per connection, which `entries` reads back.
public final class Interceptor: @unchecked Sendable {
    /// How the interceptor tells the connection it attacks from the others (interceptor.py's `--strategy`).
    public enum Strategy: Sendable {
        /// Of the connections accepted within `windowMilliseconds` of each other, the first, the last or the N-th.
        case order(OrderPick)
        /// Hellos whose shape is one of `shapes` or of those in the interceptor log at `learnedFrom`.
        case fingerprint(shapes: [String] = [], learnedFrom: String? = nil)
        /// Hellos that carry ALPN.
        case alpn
        /// Hellos that arrive more than this many milliseconds after the TCP accept.
        case delay(milliseconds: Double)
        /// Each connection with this probability.
        case random(probability: Double, seed: Int)
        /// Every N-th connection accepted, whatever its hello (`every:2`: the 2nd, 4th, …).
        case every(Int)
        case all, none

        public enum OrderPick: Sendable { case first, last, nth(Int) }

        var arguments: [String] {
            switch self {
            case .order(.first): return ["--strategy", "order:first"]
            case .order(.last): return ["--strategy", "order:last"]
            case .order(.nth(let n)): return ["--strategy", "order:\(n)"]
            case .fingerprint(let shapes, let learnedFrom):
                return ["--strategy", "fingerprint"] + shapes.flatMap { ["--shape", $0] } + (learnedFrom.map { ["--learn", $0] } ?? [])
            case .alpn: return ["--strategy", "alpn"]
            case .delay(let milliseconds): return ["--strategy", "delay:\(milliseconds)"]
            case .random(let probability, let seed): return ["--strategy", "random:\(probability)", "--seed", String(seed)]
            case .every(let n): return ["--strategy", "every:\(n)"]
            case .all: return ["--strategy", "all"]
            case .none: return ["--strategy", "none"]
            }
        }
    }

    /// What the interceptor logged about one connection.
    public struct Entry: Sendable {
        public enum Decision: String, Sendable { case genuine, rogue, dropped }
        public let index: Int
        public let decision: Decision
        /// Why a connection was dropped (`empty`, `timeout`, `closed`, `reset`, `garbage`), or `upstream`.
        public let reason: String?
        public let group: Int
        public let position: Int
        public let shape: String?
        public let alpn: [String]
        public let serverName: String?
        public let offersPSK: Bool
        public let helloDelayMilliseconds: Double?
    }

    public let helper: Helper
    public let logPath: String
    public var port: UInt16 { helper.port }

    /// - Parameter invert: intercept what the strategy would let through, and the reverse.
    /// `limit`: intercept at most that many connections the strategy picks (the rest go through).
    public init(genuine: UInt16, rogue: UInt16, strategy: Strategy, invert: Bool = false, windowMilliseconds: Double = 100,
                helloTimeout: Double = 5, limit: Int? = nil) throws {
        logPath = try temporaryDirectory() + "/interceptor.jsonl"
        FileManager.default.createFile(atPath: logPath, contents: nil)
        var arguments = ["python3", "\(Paths.scripts)/interceptor.py", "--genuine", String(genuine), "--rogue", String(rogue),
                         "--log", logPath, "--window-ms", String(windowMilliseconds), "--hello-timeout", String(helloTimeout),
                         "--until-stdin-closes"] + strategy.arguments
        if invert { arguments.append("--invert") }
        if let limit { arguments += ["--limit", String(limit)] }
        helper = try Helper("/usr/bin/env", arguments)
    }

    /// Every line logged so far, in the order written.
    public var entries: [Entry] {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let index = object["index"] as? Int, let decision = (object["decision"] as? String).flatMap(Entry.Decision.init)
            else { return nil }
            return Entry(index: index, decision: decision, reason: object["reason"] as? String, group: object["group"] as? Int ?? 0,
                         position: object["position"] as? Int ?? 0, shape: object["shape"] as? String,
                         alpn: object["alpn"] as? [String] ?? [], serverName: object["sni"] as? String,
                         offersPSK: object["psk"] as? Bool ?? false, helloDelayMilliseconds: object["hello_delay_ms"] as? Double)
        }
    }

    /// Waits (bounded) until `count` connections are logged, and returns the entries, by index.
    public func waitForEntries(_ count: Int, timeout: Double = 20) -> [Entry] {
        let deadline = Date().addingTimeInterval(timeout)
        var seen = entries
        while seen.count < count && Date() < deadline {
            usleep(20_000)
            seen = entries
        }
        return seen.sorted { $0.index < $1.index }
    }

    public func stop() { helper.stop() }

    /// The log goes with the object (not with `stop`: a stopped interceptor's log may still teach another one).
    deinit {
        helper.stop()
        try? FileManager.default.removeItem(atPath: (logPath as NSString).deletingLastPathComponent)
    }
}

/// A TLS server (scripts/lb_server.py) that answers each handshake with one of several chains at
/// random, as a load-balanced pool of backends with different keys would; its 200's body is
/// `key=<name>`.
public final class LoadBalancedUpstream: @unchecked Sendable {
    public let helper: Helper
    public var port: UInt16 { helper.port }

    /// - Parameter backends: name and fixture leaf (`<leaf>.chain.pem`, `<leaf>.key.pem`) of each backend.
    public init(backends: [(name: String, leaf: String)] = [("a", "leaf-ec256"), ("b", "leaf-rotated")], tls: String = "any",
                seed: Int? = nil) throws {
        var arguments = ["python3", "\(Paths.scripts)/lb_server.py", "--tls", tls]
        for backend in backends {
            arguments += ["--backend", "\(backend.name):\(Paths.fixture("\(backend.leaf).chain.pem")):\(Paths.fixture("\(backend.leaf).key.pem"))"]
        }
        if let seed { arguments += ["--seed", String(seed)] }
        helper = try Helper("/usr/bin/env", arguments)
    }

    public func stop() { helper.stop() }
}

/// A relay that cuts every TLS 1.3 connection whose ServerHello accepts a PSK (scripts/resumption_cut.py).
public final class ResumptionCutter: @unchecked Sendable {
    public enum Cut: String, Sendable { case reset = "rst", close, none }

    public struct Entry: Sendable {
        public let offeredPSK: Bool
        public let acceptedPSK: Bool
        /// `relayed`, `cut` or `dropped`.
        public let action: String
    }

    public let helper: Helper
    public let logPath: String
    public var port: UInt16 { helper.port }

    public init(server: UInt16, cut: Cut) throws {
        logPath = try temporaryDirectory() + "/resumption.jsonl"
        FileManager.default.createFile(atPath: logPath, contents: nil)
        helper = try Helper("/usr/bin/env", ["python3", "\(Paths.scripts)/resumption_cut.py", "--server", String(server), "--log", logPath,
                                             "--cut", cut.rawValue, "--until-stdin-closes"])
    }

    /// Every connection logged so far (a relayed one is logged when its relay starts).
    public var entries: [Entry] {
        let text = (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? ""
        return text.split(separator: "\n").compactMap { line in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { return nil }
            return Entry(offeredPSK: object["psk_offered"] as? Bool ?? false, acceptedPSK: object["psk_accepted"] as? Bool ?? false,
                         action: object["action"] as? String ?? "")
        }
    }

    public func stop() { helper.stop() }

    deinit {
        helper.stop()
        try? FileManager.default.removeItem(atPath: (logPath as NSString).deletingLastPathComponent)
    }
}
