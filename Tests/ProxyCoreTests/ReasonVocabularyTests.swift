import Foundation
import PinPolicy
import TestSupport
import Testing
@testable import ProxyCore

/// Every reason code pinproxy writes lives in PinPolicy's vocabulary (`RefusalReason`,
/// `NetworkRefusal`, `StreamReason`, `CloseCode`, `TunnelReason`, `QuarantineLift`, the bypass and
/// unpinned bases, the `outcome`s of `http_forwarded` and `confirming_look`), and the log reference (docs/logs.md) names each of them: a reason added to the
/// code and not to the reference fails here.
@Suite struct ReasonVocabularyTests {
    static let reference = (try? String(contentsOfFile: Paths.repository.appendingPathComponent("docs/logs.md").path, encoding: .utf8)) ?? ""

    static let codes: [String] = RefusalReason.allCases.map(\.rawValue) + NetworkRefusal.allCases.map(\.rawValue) + StreamReason.all.map(\.code)
        // `reaped` has no line of its own: the worker's `silent_connections_reaped` speaks for it.
        + CloseCode.allCases.filter { $0 != .reaped }.map(\.rawValue)
        + TunnelReason.allCases.map(\.rawValue) + QuarantineLift.allCases.map(\.rawValue)
        + [BypassBasis.reportMode, .expiredRule, .debugBypass(until: Date()), .ctReport, .ctStaleList].map(\.code)
        + [UnpinnedBasis.noRule, .ruleUnpinned].map(\.rawValue) + ForwardOutcome.allCases.map(\.rawValue)
        + LookOutcome.allCases.map(\.rawValue)

    @Test(arguments: codes)
    func theLogReferenceNamesTheReason(_ code: String) {
        #expect(Self.reference.contains("`\(code)`") || Self.reference.contains("=\(code)`") || Self.reference.contains("=\(code)"),
                "docs/logs.md does not name the reason \(code)")
    }

    /// A close line says its reason through the one vocabulary.
    @Test func everyCloseReasonIsACloseCode() {
        let reasons: [CloseReason] = [.relay(.finished), .relay(.reset(.client)), .relay(.reset(.upstream)), .relay(.failed(.client)),
                                      .relay(.failed(.upstream)), .relay(.idle), .relay(.noClientHello), .relay(.clientLeft(.clientHello)), .clientClosed,
                                      .clientError, .shutdown, .debugBypassExpired, .reaped, .reclaimed]
        for reason in reasons { #expect(CloseCode(rawValue: reason.code) != nil, "\(reason)") }
    }
}
