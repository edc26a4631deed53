import Foundation
import PinPolicy
import TLSInspection

/// A policy with the trust stores its rules name, made once per load and never changed: each
/// CONNECT keeps the snapshot it arrived under, and a reload swaps in a new one.
public final class PolicySnapshot: Sendable {
    public let policy: Policy
    public let loadedAt: Date
    private let system: TrustStore
    private let caFiles: [String: TrustStore]

    /// Loads every `ca-file:` the policy names, in its rules and in `defaults.trust` (a failure is a
    /// load error, so a reload keeps the old policy), and shares the system store between snapshots.
    public init(policy: Policy, systemStore: TrustStore) throws {
        var files: [String: TrustStore] = [:]
        let paths = (policy.rules.map(\.trust) + [policy.defaults.trust]).compactMap { trust -> String? in
            if case .caFile(let path) = trust { return path }
            return nil
        }
        for path in Set(paths) {
            do {
                files[path] = try TrustStore.caFile(path)
            } catch {
                throw PolicyLoadError([PolicyError(file: policy.source, line: 0, column: 0, message: "cannot load the CA file \(path): \(error)")])
            }
        }
        self.policy = policy
        self.system = systemStore
        self.caFiles = files
        self.loadedAt = Date()
    }

    /// Validates what a server presented under a trust setting, as a rule with these pins sees it:
    /// the snapshot's store for `system` and `ca-file:`, the matching presented certificates as
    /// anchors for `pins-only`. The proxy and the CLI's `pin` and `check --probe` all decide this way.
    /// Validates what a server presented under the rule's trust, then evaluates the rule on it: the
    /// one judgement of a chain, whether it came from the proxy's probe or the CLI's.
    public func judge(_ presented: [Certificate], target: Target, rule: Rule, at now: Date,
                      debugBypassEnabled: Bool) -> (ChainValidation, Evaluation) {
        let validation = validate(presented, for: target, trust: rule.trust, pins: rule.pins)
        return (validation, policy.evaluate(validation, rule: rule, target: target, at: now, debugBypassEnabled: debugBypassEnabled))
    }

    public func validate(_ presented: [Certificate], for target: Target, trust: Trust, pins: [PinEntry]) -> ChainValidation {
        if TestFault.validation.isInjected {
            return .failed(ChainFailure(reason: .chainInvalid, detail: TestFault.detail), presented: presented.map(\.facts))
        }
        let store: TrustStore?
        switch trust {
        case .system: store = system
        case .caFile(let path): store = caFiles[path]
        case .pinsOnly: store = nil
        }
        return ChainValidator.validate(presented: presented, target: target, store: store,
                                       pinsOnlyAnchors: trust == .pinsOnly ? pins.map(\.pin) : nil)
    }
}

/// Concurrent CONNECTs to the same target and addresses share one probe in flight. What is shared
/// is only what the server presented; every waiter validates and decides under its own snapshot.
final class ProbeHub {
    struct Key: Hashable {
        let serverName: String?
        let port: UInt16
        let addresses: [IPAddress]
    }

    final class Waiter {
        fileprivate var callback: ((ProbeResult) -> Void)?
        /// The session no longer wants the result (the client hung up).
        func cancel() { callback = nil }
    }

    private final class Flight {
        var waiters: [Waiter] = []
        var connector: Connector?
        var probe: Probe?
    }

    private let loop: EventLoop
    private let context = ProbeTLSContext()
    private var flights: [Key: Flight] = [:]
    private(set) var started = 0

    init(loop: EventLoop) { self.loop = loop }

    func probe(_ key: Key, settings: ProxySettings, _ callback: @escaping (ProbeResult) -> Void) -> Waiter {
        let waiter = Waiter()
        waiter.callback = callback
        if let flight = flights[key] {
            flight.waiters.append(waiter)
            return waiter
        }
        let flight = Flight()
        flight.waiters = [waiter]
        flights[key] = flight
        started += 1
        let addresses = key.addresses.map { SocketAddress(ip: $0, port: key.port) }
        flight.connector = Connector(loop: loop, addresses: addresses, perAddress: settings.connectTimeout,
                                     total: settings.connectTotalTimeout) { [unowned self] outcome in
            switch outcome {
            case .failed(let refusal):
                deliver(key, ProbeResult(outcome: .failed(refusal), address: nil, tlsVersion: ""))
            case .connected(let fd, let address):
                flight.probe = Probe(loop: loop, context: context, fd: fd, address: address, serverName: key.serverName,
                                     timeout: settings.probeTimeout) { [unowned self] result in
                    deliver(key, result)
                }
            }
        }
        return waiter
    }

    private func deliver(_ key: Key, _ result: ProbeResult) {
        guard let flight = flights.removeValue(forKey: key) else { return }
        for waiter in flight.waiters {
            let callback = waiter.callback
            waiter.callback = nil
            callback?(result)
        }
    }
}
