import Foundation
import Logging
import PinPolicy
import Testing
@testable import ProxyCore

/// The control socket's protocol without a socket: what each request line is, and what it answers
/// against a `Quarantine` (`entries`, `lift`, `liftAll`).
@Suite struct QuarantineControlTests {
    static let rule = try! PolicyLoader.load(yaml: """
        version: 1
        defaults: { unpinned: allow, require_backup: off }
        rules:
          - host: api.example.test
            pins: ["spki-sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]
            quarantine: 10m
        """, source: "test.yaml", pinFiles: nil).rules[0]
    static let start = Date(timeIntervalSince1970: 1_800_000_000)  // 2027-01-15T08:00:00Z
    static let api = try! Authority.parse("api.example.test:443").get()
    static let v6 = try! Authority.parse("[2001:db8::1]:8443").get()

    func control(_ keys: [Authority]) -> (QuarantineControl, Quarantine) {
        let quarantine = Quarantine()
        for key in keys { _ = quarantine.enter(key, rule: Self.rule, at: Self.start) }
        return (QuarantineControl(quarantine: quarantine, logger: Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }), quarantine)
    }

    @Test func requestLinesParse() {
        #expect(ControlRequest.parse("quarantine list") == .success(.list))
        #expect(ControlRequest.parse("quarantine list\r") == .success(.list))
        #expect(ControlRequest.parse("quarantine lift --all") == .success(.liftAll))
        #expect(ControlRequest.parse("quarantine lift API.example.test:443") == .success(.lift(Self.api)))
        #expect(ControlRequest.parse("quarantine lift [2001:db8::1]:8443") == .success(.lift(Self.v6)))
    }

    @Test func anythingElseIsAnError() {
        #expect(ControlRequest.parse("") == .failure(ControlRequest.Problem("unknown request; \(ControlRequest.usage)")))
        #expect(ControlRequest.parse("quarantine") == .failure(ControlRequest.Problem("unknown request; \(ControlRequest.usage)")))
        #expect(ControlRequest.parse("quarantine list now") == .failure(ControlRequest.Problem("unknown request; \(ControlRequest.usage)")))
        #expect(ControlRequest.parse("quarantine lift") == .failure(ControlRequest.Problem("unknown request; \(ControlRequest.usage)")))
        #expect(ControlRequest.parse("quarantine lift api.example.test") == .failure(ControlRequest.Problem("'api.example.test' is not HOST:PORT: the CONNECT target needs a port (host:port)")))
        #expect(ControlRequest.parse("quarantine\tlist") == .failure(ControlRequest.Problem("the request is not printable ASCII; \(ControlRequest.usage)")))
        #expect(ControlRequest.parse("quarantine list é") == .failure(ControlRequest.Problem("the request is not printable ASCII; \(ControlRequest.usage)")))
    }

    @Test func listIsOneLinePerQuarantineInForceInHostOrder() {
        let (control, _) = control([Self.v6, Self.api])
        #expect(control.answer("quarantine list", at: Self.start.addingTimeInterval(1)) == """
            host=2001:db8::1 port=8443 since=2027-01-15T08:00:00Z until=2027-01-15T08:10:00Z rule=api.example.test
            host=api.example.test port=443 since=2027-01-15T08:00:00Z until=2027-01-15T08:10:00Z rule=api.example.test

            """)
        #expect(control.answer("quarantine list", at: Self.start.addingTimeInterval(600)) == "")
    }

    @Test func liftEndsOneQuarantineAndSaysSo() {
        let (control, quarantine) = control([Self.api, Self.v6])
        let now = Self.start.addingTimeInterval(60)
        #expect(control.answer("quarantine lift api.example.test:443", at: now) == "lifted host=api.example.test port=443\n")
        #expect(quarantine.entry(for: Self.api, at: now) == nil)
        #expect(quarantine.entry(for: Self.v6, at: now) != nil)
        #expect(control.answer("quarantine lift api.example.test:443", at: now) == "not_quarantined host=api.example.test port=443\n")
        #expect(control.answer("quarantine lift api.example.test:8443", at: now) == "not_quarantined host=api.example.test port=8443\n")
    }

    /// One that ran out is the expiry timer's to lift (its line says `expired`), not the operator's.
    @Test func aQuarantineThatRanOutIsNotLiftedByAnOperator() {
        let (control, quarantine) = control([Self.api])
        let later = Self.start.addingTimeInterval(600)
        #expect(control.answer("quarantine lift api.example.test:443", at: later) == "not_quarantined host=api.example.test port=443\n")
        #expect(quarantine.lift(at: later).map(\.key) == [Self.api])
    }

    @Test func liftAllEndsEveryQuarantine() {
        let (control, quarantine) = control([Self.api, Self.v6])
        let now = Self.start.addingTimeInterval(60)
        #expect(control.answer("quarantine lift --all", at: now) == "lifted host=2001:db8::1 port=8443\nlifted host=api.example.test port=443\n")
        #expect(quarantine.count(at: now) == 0 && quarantine.entries(at: now).isEmpty)
        #expect(control.answer("quarantine lift --all", at: now) == "")
    }

    @Test func aBadLineIsAnsweredError() {
        let (control, quarantine) = control([Self.api])
        #expect(control.answer("lift everything", at: Self.start) == "error unknown request; \(ControlRequest.usage)\n")
        #expect(quarantine.count(at: Self.start) == 1)
    }
}
