import Foundation

/// How an SCT reached pinproxy (RFC 6962 §3.3).
public enum SCTDelivery: String, Hashable, Sendable {
    /// In the certificate's SCT list extension: signed over the precertificate entry.
    case embedded
    /// In the TLS `signed_certificate_timestamp` extension: signed over the X.509 entry.
    case tlsExtension = "tls_extension"
    /// In a stapled OCSP response: signed over the X.509 entry.
    case ocsp
}

/// One SCT as `TLSInspection` read it, with whether its signature verified under the key the list
/// gives for its log id (an SCT from a log in no list cannot have verified).
public struct SCTFacts: Hashable, Sendable {
    public let logID: CTLogID
    public let timestamp: Date
    public let delivery: SCTDelivery
    public let signatureVerified: Bool

    public init(logID: CTLogID, timestamp: Date, delivery: SCTDelivery, signatureVerified: Bool) {
        self.logID = logID
        self.timestamp = timestamp
        self.delivery = delivery
        self.signatureVerified = signatureVerified
    }
}

/// An SCT that counts toward compliance, with the log that signed it (description: for the log line)
/// and the operator it counts for (the log's operator when it signed).
public struct CountedSCT: Hashable, Sendable {
    public let sct: SCTFacts
    public let log: CTLog
    public let operatorName: String
}

/// An SCT that does not count, and why.
public struct IgnoredSCT: Hashable, Sendable, CustomStringConvertible {
    public enum Reason: Hashable, Sendable {
        case logNotInList
        case signatureNotVerified
        case timestampInFuture
        /// The log is `pending` or `rejected`: its SCTs never count.
        case logNotAccepted(state: String)
        /// The log retired at or before the certificate's earliest SCT (Chrome judges retirement against
        /// the earliest valid SCT presented, so a log retiring mid-issuance does not fail the certificate).
        case logRetiredBeforeSCT(retired: Date)
        /// A retired log's SCT counts only embedded (Chrome: SCTs by TLS or OCSP need a log still in service).
        case retiredLogNotEmbedded
        /// The certificate's notAfter is outside the log's temporal interval: the log does not take it.
        case certificateOutsideLogInterval
    }

    public let sct: SCTFacts
    public let reason: Reason

    public var description: String {
        let what: String
        switch reason {
        case .logNotInList: what = "its log is in no log list"
        case .signatureNotVerified: what = "its signature does not verify for this certificate"
        case .timestampInFuture: what = "its timestamp \(RFC3339.format(sct.timestamp)) is in the future"
        case .logNotAccepted(let state): what = "its log is \(state)"
        case .logRetiredBeforeSCT(let retired): what = "its log retired \(RFC3339.format(retired)), before the certificate's earliest SCT"
        case .retiredLogNotEmbedded: what = "its log is retired and the SCT came by \(sct.delivery.rawValue), not embedded"
        case .certificateOutsideLogInterval: what = "the certificate's expiry is outside its log's temporal interval"
        }
        return "SCT from \(sct.logID): \(what)"
    }
}

/// Why a certificate's SCTs fall short, in numbers and in words an operator can act on.
public struct CTShortfall: Hashable, Sendable, CustomStringConvertible {
    /// Which of the policy's criteria was held against: embedded SCTs, or SCTs by TLS extension / OCSP.
    public let embedded: Bool
    /// Distinct logs counted, and their distinct operators.
    public let sctsCounted: Int
    public let operatorsCounted: Int
    public let sctsNeeded: Int
    public let operatorsNeeded: Int
    /// Embedded criterion only: every counted SCT is from a retired log; one from a log in service is needed.
    public let needsLogInService: Bool
    /// The certificate's validity in whole days (rounded up), which sets `sctsNeeded` for embedded SCTs.
    public let lifetimeDays: Int
    public let ignored: [IgnoredSCT]

    /// `2 valid SCTs from 1 operator; 2 operators needed`.
    public var description: String {
        func n(_ count: Int, _ noun: String) -> String { "\(count) \(noun)\(count == 1 ? "" : "s")" }
        var needs: [String] = []
        if sctsCounted < sctsNeeded {
            needs.append(embedded ? "\(sctsNeeded) SCTs needed for a certificate valid \(n(lifetimeDays, "day"))"
                                  : "\(sctsNeeded) SCTs needed")
        }
        if operatorsCounted < operatorsNeeded { needs.append("\(operatorsNeeded) operators needed") }
        if needsLogInService { needs.append("1 from a log not retired needed") }
        let counted = embedded ? n(sctsCounted, "valid embedded SCT") : n(sctsCounted, "valid SCT") + " by TLS extension or OCSP"
        var text = "\(counted) from \(n(operatorsCounted, "operator")); "
            + needs.joined(separator: " and ")
        if !ignored.isEmpty { text += " (ignored: " + ignored.map(\.description).joined(separator: "; ") + ")" }
        return text
    }
}

public enum CTVerdict: Hashable, Sendable {
    case compliant(counted: [CountedSCT])
    case notCompliant(CTShortfall, counted: [CountedSCT])
}

/// A Certificate Transparency policy: facts about one certificate and its SCTs in, a verdict out.
/// Pure: the list, the time and the signature results are inputs; nothing is logged or fetched.
public enum CTPolicy: Hashable, Sendable {
    /// Chrome's (https://googlechrome.github.io/CertificateTransparency/ct_policy.html):
    /// - an SCT counts when its log is in the list, its signature verified, its timestamp is not after
    ///   `now`, its log is `qualified`, `usable` or `readonly` (or `retired` after the certificate's
    ///   earliest valid SCT, embedded SCTs only; `pending` and `rejected` never), and the certificate's
    ///   notAfter falls in the log's temporal interval (the interval shards logs by certificate expiry,
    ///   not by SCT time; beyond Chrome, which leaves that to the logs);
    /// - an SCT's operator is the log's operator when it signed (`previous_operators`);
    /// - embedded: SCTs from at least 2 distinct logs for a certificate valid ≤ 180 days, 3 beyond, from
    ///   at least 2 distinct operators, at least one from a log not retired;
    /// - or by TLS extension / OCSP: SCTs from at least 2 distinct logs of 2 distinct operators.
    /// Two SCTs from one log count once: they add no independent witness. Embedded and non-embedded
    /// SCTs are not pooled (Chrome's two criteria, each on its own).
    case chrome

    public func evaluate(notBefore: Date, notAfter: Date, scts: [SCTFacts], list: CTLogList, at now: Date) -> CTVerdict {
        switch self {
        case .chrome: chrome(notBefore: notBefore, notAfter: notAfter, scts: scts, list: list, now: now)
        }
    }

    private func chrome(notBefore: Date, notAfter: Date, scts: [SCTFacts], list: CTLogList, now: Date) -> CTVerdict {
        var counted: [CountedSCT] = []
        var ignored: [IgnoredSCT] = []
        // Retirement is judged against the earliest SCT that a known log really signed (not a forged or future one).
        let earliest = scts.filter { list.log($0.logID) != nil && $0.signatureVerified && $0.timestamp <= now }.map(\.timestamp).min()
        for sct in scts {
            switch Self.judge(sct, earliest: earliest, notAfter: notAfter, list: list, now: now) {
            case .counts(let log): counted.append(CountedSCT(sct: sct, log: log, operatorName: log.operatorName(at: sct.timestamp)))
            case .ignored(let reason): ignored.append(IgnoredSCT(sct: sct, reason: reason))
            }
        }
        let lifetime = notAfter.timeIntervalSince(notBefore)
        let lifetimeDays = Int((lifetime / 86400).rounded(.up))
        let embedded = Self.distinctLogs(counted.filter { $0.sct.delivery == .embedded })
        let byConnection = Self.distinctLogs(counted.filter { $0.sct.delivery != .embedded })

        let embeddedNeeded = lifetime <= 180 * 86400 ? 2 : 3
        let embeddedOperators = Set(embedded.map(\.operatorName)).count
        let embeddedInService = embedded.contains { if case .retired = $0.log.state { false } else { true } }
        if embedded.count >= embeddedNeeded && embeddedOperators >= 2 && embeddedInService { return .compliant(counted: embedded) }

        let connectionOperators = Set(byConnection.map(\.operatorName)).count
        if byConnection.count >= 2 && connectionOperators >= 2 { return .compliant(counted: byConnection) }

        // Explain against the criterion the server attempted: TLS/OCSP when it sent SCTs only that way.
        let attemptedByConnection = scts.contains { $0.delivery != .embedded } && !scts.contains { $0.delivery == .embedded }
        if attemptedByConnection {
            return .notCompliant(CTShortfall(embedded: false, sctsCounted: byConnection.count, operatorsCounted: connectionOperators,
                                             sctsNeeded: 2, operatorsNeeded: 2, needsLogInService: false,
                                             lifetimeDays: lifetimeDays, ignored: ignored),
                                 counted: byConnection)
        }
        return .notCompliant(CTShortfall(embedded: true, sctsCounted: embedded.count, operatorsCounted: embeddedOperators,
                                         sctsNeeded: embeddedNeeded, operatorsNeeded: 2,
                                         needsLogInService: !embedded.isEmpty && !embeddedInService,
                                         lifetimeDays: lifetimeDays, ignored: ignored),
                             counted: embedded)
    }

    /// Whether one SCT counts, checked in this order (the first failure is its reason): known log,
    /// signature, time, log state, temporal interval.
    private static func judge(_ sct: SCTFacts, earliest: Date?, notAfter: Date, list: CTLogList, now: Date) -> Judgement {
        guard let log = list.log(sct.logID) else { return .ignored(.logNotInList) }
        guard sct.signatureVerified else { return .ignored(.signatureNotVerified) }
        guard sct.timestamp <= now else { return .ignored(.timestampInFuture) }
        switch log.state {
        case .qualified, .usable, .readonly: break
        case .pending, .rejected: return .ignored(.logNotAccepted(state: log.state.name))
        case .retired(let since):
            guard let earliest, earliest < since else { return .ignored(.logRetiredBeforeSCT(retired: since)) }
            guard sct.delivery == .embedded else { return .ignored(.retiredLogNotEmbedded) }
        }
        if let interval = log.temporalInterval, !interval.contains(notAfter) { return .ignored(.certificateOutsideLogInterval) }
        return .counts(log)
    }

    private enum Judgement {
        case counts(CTLog)
        case ignored(IgnoredSCT.Reason)
    }

    /// The first counted SCT of each log, in the order given.
    private static func distinctLogs(_ scts: [CountedSCT]) -> [CountedSCT] {
        var seen: Set<CTLogID> = []
        return scts.filter { seen.insert($0.log.id).inserted }
    }
}
