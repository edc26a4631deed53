import Foundation

/// What pinproxy knows about one certificate, as plain values: `TLSInspection` fills it from OpenSSL,
/// so `PinPolicy` and the logs never touch an OpenSSL pointer.
public struct CertificateFacts: Hashable, Sendable {
    public let spki: Pin
    public let certificate: Pin
    /// RFC 4514-style one-line names (`CN=api.example.com,O=Example`).
    public let subject: String
    public let issuer: String
    public let notBefore: Date
    public let notAfter: Date
    /// DNS and IP subject alternative names, as text.
    public let subjectAltNames: [String]
    /// `RSA 2048`, `EC P-256`, `Ed25519`.
    public let key: String
    public let isCA: Bool

    public init(spki: Pin, certificate: Pin, subject: String, issuer: String, notBefore: Date, notAfter: Date,
                subjectAltNames: [String], key: String, isCA: Bool) {
        precondition(spki.kind == .spki && certificate.kind == .cert)
        self.spki = spki
        self.certificate = certificate
        self.subject = subject
        self.issuer = issuer
        self.notBefore = notBefore
        self.notAfter = notAfter
        self.subjectAltNames = subjectAltNames
        self.key = key
        self.isCA = isCA
    }

    /// Whether a pin names this certificate (by key or by whole certificate).
    public func matches(_ pin: Pin) -> Bool { pin == spki || pin == certificate }
}

/// One certificate of a verified chain, where it stands in it.
public struct ChainCertificate: Hashable, Sendable {
    public let facts: CertificateFacts
    /// 0 is the leaf.
    public let position: Int
    /// The trust anchor the chain ends in (for `pins-only`, the pinned certificate).
    public let isAnchor: Bool
}

/// A chain produced by validating presented certificates under a rule's trust: leaf first, anchor
/// last. Pins are compared only against this, never against what the server sent (CVE-2016-2402:
/// an attacker can append the genuine intermediate to a forged chain).
///
/// Only a chain validator makes these; its initialiser is behind `@_spi(ChainValidation)` so that a
/// caller has to say, at its import, that it is one.
public struct VerifiedChain: Hashable, Sendable {
    public let certificates: [ChainCertificate]

    @_spi(ChainValidation)
    public init(leafFirst facts: [CertificateFacts]) {
        precondition(!facts.isEmpty, "a verified chain has at least the leaf")
        certificates = facts.enumerated().map {
            ChainCertificate(facts: $0.element, position: $0.offset, isAnchor: $0.offset == facts.count - 1)
        }
    }

    public var leaf: CertificateFacts { certificates[0].facts }
}

/// Why presented certificates did not validate.
public struct ChainFailure: Hashable, Sendable {
    /// `chain_invalid` or `hostname_mismatch`.
    public let reason: RefusalReason
    /// What the validator said (`certificate has expired`, `unable to get local issuer certificate`).
    public let detail: String

    public init(reason: RefusalReason, detail: String) {
        self.reason = reason
        self.detail = detail
    }
}

/// The result of validating a presented chain: the verified chain, or why not, with what was presented.
public enum ChainValidation: Hashable, Sendable {
    case verified(VerifiedChain)
    case failed(ChainFailure, presented: [CertificateFacts])
}
