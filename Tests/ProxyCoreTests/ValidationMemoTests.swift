import Foundation
import PinPolicy
import TestSupport
import TLSInspection
import Testing
@testable import ProxyCore

/// A snapshot remembers the validation of a byte-identical chain for `verify_cache_ttl`: only
/// successes, only for the same target, trust and anchors, never past the chain's `notAfter`.
@Suite struct ValidationMemoTests {
    static func snapshot(ttl: String = "60s", trust: String = "ca-file:\(Paths.fixture("both-roots.pem"))") -> PolicySnapshot {
        let yaml = """
            version: 1
            proxy: { allowed_ports: [443], verify_cache_ttl: \(ttl), dns: { nameservers: [], hosts_file: none } }
            defaults: { unpinned: allow, require_backup: off, trust: "\(trust)" }
            """
        return PolicySnapshot.loaded(from: yaml)
    }

    static func chain(_ name: String) -> [Certificate] { try! Certificate.load(file: Paths.fixture("\(name).chain.pem")) }
    static let api = Target.name("api.pinproxy.test")

    @Test func aByteIdenticalChainIsValidatedOnce() {
        let snapshot = Self.snapshot()
        let trust = snapshot.policy.defaults.trust
        let first = snapshot.validate(Self.chain("leaf-ec256"), for: Self.api, trust: trust, pins: [])
        guard case .verified = first else { Issue.record("\(first)"); return }
        let second = snapshot.validate(Self.chain("leaf-ec256"), for: Self.api, trust: trust, pins: [])
        #expect(second == first)
        #expect(snapshot.memo.hits == 1 && snapshot.memo.count == 1)
        // Another chain, or the same chain for another name, is validated on its own.
        _ = snapshot.validate(Self.chain("leaf-ec256-renewed"), for: Self.api, trust: trust, pins: [])
        let otherName = snapshot.validate(Self.chain("leaf-ec256"), for: .name("other.pinproxy.test"), trust: trust, pins: [])
        guard case .failed(let failure, _) = otherName else { Issue.record("\(otherName)"); return }
        #expect(failure.reason == .hostnameMismatch)
        #expect(snapshot.memo.hits == 1)
    }

    @Test func failuresAreNotKept() {
        let snapshot = Self.snapshot()
        let trust = snapshot.policy.defaults.trust
        for _ in 0..<2 {
            guard case .failed = snapshot.validate(Self.chain("leaf-expired"), for: Self.api, trust: trust, pins: []) else {
                Issue.record("an expired leaf validated"); return
            }
        }
        #expect(snapshot.memo.hits == 0 && snapshot.memo.count == 0)
    }

    @Test func aTTLOfZeroKeepsNothing() {
        let snapshot = Self.snapshot(ttl: "0s")
        let trust = snapshot.policy.defaults.trust
        for _ in 0..<2 { _ = snapshot.validate(Self.chain("leaf-ec256"), for: Self.api, trust: trust, pins: []) }
        #expect(snapshot.memo.hits == 0 && snapshot.memo.count == 0)
    }

    /// An entry ends with its TTL and with the earliest `notAfter` of its chain, whichever comes first.
    @Test func anEntryEndsWithItsTTLAndWithTheChainsValidity() {
        let memo = ValidationMemo(capacity: 2)
        let snapshot = Self.snapshot(ttl: "0s")
        let validation = snapshot.validate(Self.chain("leaf-ec256"), for: Self.api, trust: snapshot.policy.defaults.trust, pins: [])
        guard case .verified(let chain) = validation else { Issue.record("\(validation)"); return }
        let notAfter = chain.certificates.map(\.facts.notAfter).min()!
        let key = ValidationMemo.Key(chain: Self.chain("leaf-ec256").map(\.der), target: Self.api, trust: .system, anchors: nil)
        let now = ContinuousClock.now
        memo.store(validation, for: key, ttl: 60, now: now)
        #expect(memo.lookup(key, now: now + .seconds(59), date: Date()) == validation)
        #expect(memo.lookup(key, now: now + .seconds(61), date: Date()) == nil)
        memo.store(validation, for: key, ttl: 60, now: now)
        #expect(memo.lookup(key, now: now, date: notAfter.addingTimeInterval(1)) == nil)
        #expect(memo.count == 0)
        // Bounded: a full memo makes room instead of growing.
        for name in ["a", "b", "c"] {
            memo.store(validation, for: ValidationMemo.Key(chain: [Array(name.utf8)], target: Self.api, trust: .system, anchors: nil), ttl: 60, now: now)
        }
        #expect(memo.count <= 2)
    }
}
