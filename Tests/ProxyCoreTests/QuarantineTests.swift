import Foundation
import PinPolicy
import Testing
@testable import ProxyCore

/// The quarantine book as a table of steps: entering, extending, an entry's end, lifting, a rule
/// with `quarantine: 0s`. Times are seconds after a fixed start.
@Suite struct QuarantineTests {
    static let start = Date(timeIntervalSince1970: 1_800_000_000)
    static let api = try! Authority.parse("api.example.test:443").get()
    static let other = try! Authority.parse("other.example.test:443").get()

    static func rule(quarantine: TimeInterval) -> Rule {
        let yaml = """
            version: 1
            proxy: { allowed_ports: [443] }
            defaults: { unpinned: allow, require_backup: off }
            rules:
              - host: api.example.test
                quarantine: \(Int(quarantine))s
                pins: ["spki-sha256:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA="]
            """
        return try! PolicyLoader.load(yaml: yaml, source: "test.yaml", pinFiles: nil).rule(for: api)!
    }

    enum Step: Sendable {
        /// Enters `key` at `at` under a rule with `quarantine` seconds; expects what `enter` says.
        case enter(Authority, at: Double, quarantine: Double, expect: Quarantine.Entered)
        /// The entry in force at `at`: its end, or none.
        case entry(Authority, at: Double, until: Double?)
        /// What `lift(at:)` removes.
        case lift(at: Double, lifted: [Authority])
        /// How many are in force at `at`.
        case count(at: Double, Int)
    }

    struct Case: CustomTestStringConvertible, Sendable {
        let name: String
        let steps: [Step]
        var testDescription: String { name }
    }

    static func at(_ seconds: Double) -> Date { start.addingTimeInterval(seconds) }

    static let cases: [Case] = [
        Case(name: "an entry lasts its rule's quarantine", steps: [
            .enter(api, at: 0, quarantine: 600, expect: .started(until: at(600))),
            .entry(api, at: 599, until: 600),
            .entry(api, at: 600, until: nil),
            .entry(other, at: 1, until: nil),
            .count(at: 1, 1),
        ]),
        Case(name: "a second catch extends it, never shortens it", steps: [
            .enter(api, at: 0, quarantine: 600, expect: .started(until: at(600))),
            .enter(api, at: 100, quarantine: 600, expect: .extended(until: at(700))),
            .enter(api, at: 200, quarantine: 60, expect: .extended(until: at(700))),
            .entry(api, at: 650, until: 700),
        ]),
        Case(name: "a catch after the end starts anew", steps: [
            .enter(api, at: 0, quarantine: 60, expect: .started(until: at(60))),
            .enter(api, at: 61, quarantine: 60, expect: .started(until: at(121))),
        ]),
        Case(name: "quarantine: 0s keeps no entry", steps: [
            .enter(api, at: 0, quarantine: 0, expect: .off),
            .entry(api, at: 0, until: nil),
            .count(at: 0, 0),
        ]),
        Case(name: "lifting removes the ended entries only, in order", steps: [
            .enter(other, at: 0, quarantine: 60, expect: .started(until: at(60))),
            .enter(api, at: 0, quarantine: 60, expect: .started(until: at(60))),
            .lift(at: 59, lifted: []),
            .lift(at: 60, lifted: [api, other]),
            .lift(at: 61, lifted: []),
            .count(at: 61, 0),
        ]),
    ]

    @Test(arguments: cases)
    func theBook(_ c: Case) {
        let quarantine = Quarantine()
        for step in c.steps {
            switch step {
            case .enter(let key, let seconds, let length, let expected):
                #expect(quarantine.enter(key, rule: Self.rule(quarantine: length), at: Self.at(seconds)) == expected)
            case .entry(let key, let seconds, let until):
                #expect(quarantine.entry(for: key, at: Self.at(seconds))?.until == until.map(Self.at))
            case .lift(let seconds, let lifted):
                #expect(quarantine.lift(at: Self.at(seconds)).map(\.key) == lifted)
            case .count(let seconds, let count):
                #expect(quarantine.count(at: Self.at(seconds)) == count)
            }
        }
    }
}
