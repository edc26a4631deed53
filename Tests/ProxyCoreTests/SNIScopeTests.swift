import Foundation
import PinPolicy
import TestSupport
import TLSInspection
import Testing
@testable import ProxyCore

/// The SNI rule as a table: for a CONNECT (pinned, in report mode, or unpinned) and the server name
/// its ClientHello carries, whether the stream check sees a problem, and whether report mode may let
/// it through. Report mode is scoped to its own host: it never lends its scope to a name another
/// enforced rule holds.
@Suite struct SNIScopeTests {
    static let snapshot: PolicySnapshot = {
        let yaml = """
            version: 1
            proxy: { allowed_ports: [443], dns: { nameservers: [], hosts_file: none } }
            defaults: { unpinned: allow, require_backup: off }
            rules:
              - host: a.test
                pins: ["\(Pins.intermediate)"]
              - host: p.test
                pins: ["\(Pins.intermediate)"]
              - host: r.test
                mode: report
                pins: ["\(Pins.intermediate)"]
              - host: "*.w.test"
                pins: ["\(Pins.intermediate)"]
            """
        let policy = try! PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil)
        return try! PolicySnapshot(policy: policy, systemStore: .anchors([], name: "none"))
    }()

    enum Expected: Equatable, Sendable {
        case fine
        /// Refused in every mode; the detail contains this.
        case refused(String)
        /// A problem report mode lets through.
        case overlooked(String)
    }

    struct Case: CustomTestStringConvertible, Sendable {
        let connect: String
        let sni: String?
        let expected: Expected
        var testDescription: String { "CONNECT \(connect), SNI \(sni ?? "none")" }
    }

    static let cases: [Case] = [
        // Pinned: exactly the CONNECT's name.
        Case(connect: "a.test", sni: "a.test", expected: .fine),
        Case(connect: "a.test", sni: "A.TEST", expected: .fine),
        Case(connect: "a.test", sni: nil, expected: .refused("the ClientHello names no server, the CONNECT was for a.test")),
        Case(connect: "a.test", sni: "x.test", expected: .refused("the ClientHello names x.test, the CONNECT was for a.test")),
        Case(connect: "a.test", sni: "p.test", expected: .refused("which the rule at line")),
        Case(connect: "a.test", sni: "bad_name!", expected: .refused("is not a valid host name")),
        // One wildcard rule holds both names: enforced, so the mismatch is refused.
        Case(connect: "one.w.test", sni: "two.w.test", expected: .refused("the ClientHello names two.w.test, the CONNECT was for one.w.test")),
        // Report mode lets its own host's problems through, never a name an enforced rule holds.
        Case(connect: "r.test", sni: nil, expected: .overlooked("names no server")),
        Case(connect: "r.test", sni: "x.test", expected: .overlooked("the CONNECT was for r.test")),
        Case(connect: "r.test", sni: "p.test", expected: .refused("which the rule at line")),
        Case(connect: "r.test", sni: "bad_name!", expected: .refused("is not a valid host name")),
        // Unpinned: any name but a pinned one.
        Case(connect: "u.test", sni: nil, expected: .fine),
        Case(connect: "u.test", sni: "other.test", expected: .fine),
        Case(connect: "u.test", sni: "p.test", expected: .refused("which the rule at line")),
        Case(connect: "u.test", sni: "one.w.test", expected: .refused("which the rule at line")),
    ]

    @Test(arguments: cases)
    func theServerNameATunnelMayCarry(_ c: Case) throws {
        let authority = try Authority.parse("\(c.connect):443").get()
        let pinning: StreamCheck.Context.Pinning = Self.snapshot.policy.rule(for: authority).map { .pinned(rule: $0, probe: nil) } ?? .unpinned
        let context = StreamCheck.Context(authority: authority, snapshot: Self.snapshot, pinning: pinning, debugBypassEnabled: false, keyLog: nil)
        let problem = SNIScope(context: context).problem(serverName: c.sni, at: Date())
        switch c.expected {
        case .fine:
            #expect(problem == nil, "\(problem?.detail ?? "")")
        case .refused(let words):
            #expect(problem?.detail.contains(words) == true, "\(problem?.detail ?? "no problem")")
            #expect(problem?.overlookableBy == nil)
        case .overlooked(let words):
            #expect(problem?.detail.contains(words) == true, "\(problem?.detail ?? "no problem")")
            #expect(problem?.overlookableBy == .reportMode)
        }
    }
}
