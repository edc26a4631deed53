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
    /// The CT log list, when `proxy.ct_log_list` is set.
    let ct: CTLogBook?

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
        self.ct = try policy.proxy.ct.logList.map { _ throws(PolicyLoadError) in try CTLogBook(settings: policy.proxy.ct, policySource: policy.source) }
        self.loadedAt = Date()
    }

    /// The chain validated under `trust` (a CA file of this snapshot, the system store, or the pins
    /// alone), remembered for `verify_cache_ttl`.
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
        let anchors = trust == .pinsOnly ? pins.map(\.pin) : nil
        let ttl = policy.proxy.verifyCacheTTL
        let key = ttl > 0 ? ValidationMemo.Key(chain: presented.map(\.der), target: target, trust: trust, anchors: anchors) : nil
        if let key, let remembered = memo.lookup(key, now: .now, date: Date()) { return remembered }
        let validation = ChainValidator.validate(presented: presented, target: target, store: store, pinsOnlyAnchors: anchors)
        if let key { memo.store(validation, for: key, ttl: ttl, now: .now) }
        return validation
    }

    /// Validations of byte-identical chains, for `verify_cache_ttl` (none when it is 0).
    let memo = ValidationMemo()
}
