import Testing
@testable import ProxyCore

@Suite struct ResumptionLedgerTests {
    let t0 = ContinuousClock.now

    @Test func aRecordedSessionIsFoundOnlyForItsHostAndPort() {
        let ledger = ResumptionLedger()
        ledger.record(.sessionID([1, 2, 3]), host: "api.test", port: 443, at: t0)
        #expect(ledger.contains(any: [.sessionID([1, 2, 3])], host: "api.test", port: 443, at: t0))
        #expect(!ledger.contains(any: [.sessionID([1, 2, 3])], host: "api.test", port: 8443, at: t0))
        #expect(!ledger.contains(any: [.sessionID([1, 2, 3])], host: "other.test", port: 443, at: t0))
        #expect(!ledger.contains(any: [.ticket([1, 2, 3])], host: "api.test", port: 443, at: t0))
    }

    @Test func emptyCredentialsAreNeverRecordedNorFound() {
        let ledger = ResumptionLedger()
        ledger.record(.sessionID([]), host: "api.test", port: 443, at: t0)
        ledger.record(.ticket([]), host: "api.test", port: 443, at: t0)
        #expect(ledger.count == 0)
        #expect(!ledger.contains(any: [.sessionID([]), .ticket([])], host: "api.test", port: 443, at: t0))
    }

    @Test func entriesExpire() {
        let ledger = ResumptionLedger(lifetime: .seconds(60))
        ledger.record(.ticket([9]), host: "api.test", port: 443, at: t0)
        #expect(ledger.contains(any: [.ticket([9])], host: "api.test", port: 443, at: t0 + .seconds(59)))
        #expect(!ledger.contains(any: [.ticket([9])], host: "api.test", port: 443, at: t0 + .seconds(60)))
    }

    @Test func theOldestGoesFirstWhenFull() {
        let ledger = ResumptionLedger(capacity: 3)
        for i in 0..<5 { ledger.record(.sessionID([UInt8(i)]), host: "api.test", port: 443, at: t0) }
        #expect(ledger.count == 3)
        #expect(!ledger.contains(any: [.sessionID([0])], host: "api.test", port: 443, at: t0))
        #expect(!ledger.contains(any: [.sessionID([1])], host: "api.test", port: 443, at: t0))
        #expect(ledger.contains(any: [.sessionID([4])], host: "api.test", port: 443, at: t0))
    }
}
