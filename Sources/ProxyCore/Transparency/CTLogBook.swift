import Foundation
import PinPolicy
import TLSInspection

/// The SCTs a server delivered beside its certificate in one handshake: the TLS extension's list
/// and a stapled OCSP response, unread. Embedded SCTs travel in the leaf itself.
public struct DeliveredSCTs: Hashable, Sendable {
    /// The `signed_certificate_timestamp` extension's SignedCertificateTimestampList.
    var tlsExtension: [UInt8]? = nil
    /// The stapled DER OCSPResponse.
    var ocspResponse: [UInt8]? = nil

    public static let none = DeliveredSCTs()

    init(tlsExtension: [UInt8]? = nil, ocspResponse: [UInt8]? = nil) {
        self.tlsExtension = tlsExtension
        self.ocspResponse = ocspResponse
    }

    /// What a TLS 1.3 server put in its leaf's CertificateEntry (read with the key log or on a mirror).
    init(_ flight: TLS13VerifiedFlight) {
        tlsExtension = flight.leafSCTList
        ocspResponse = flight.leafOCSPStatus.flatMap { try? stapledOCSPResponse(certificateStatus: $0) }
    }
}

/// A CT log list loaded for one policy snapshot, with its logs' keys: what every chain's SCTs are
/// judged by. Loaded with the trust stores, so a list that does not load (or whose signature does
/// not verify) is a load error and a reload keeps the old policy.
final class CTLogBook: @unchecked Sendable {
    // Sendable by hand: nothing changes after init; `CTLogKey` owns an EVP_PKEY that OpenSSL
    // lets any thread verify with.
    let path: String
    let list: CTLogList
    let settings: CTSettings
    private let keys: [CTLogKey]

    /// The most a list file may be: Google's is ~100 KiB.
    static let sizeLimit = 8 << 20

    init(settings: CTSettings, policySource: String) throws(PolicyLoadError) {
        guard let path = settings.logList else { preconditionFailure("a CT log book without proxy.ct_log_list") }
        func failure(_ message: String) -> PolicyLoadError {
            PolicyLoadError([PolicyError(file: policySource, line: settings.logListLine, column: settings.logListColumn, message: message)])
        }
        let bytes: [UInt8]
        do {
            bytes = try PlainFile.contents(of: path, limit: Self.sizeLimit)
        } catch {
            throw failure("cannot read the CT log list \(path): \(error); fetch it with the pinproxy-ct-list timer or pinproxy ct-list --install")
        }
        if let keyPath = settings.logListKey {
            let signaturePath = CTSettings.signaturePath(forList: path)
            let key: [UInt8], signature: [UInt8]
            do {
                key = try PlainFile.contents(of: keyPath, limit: 64 << 10)
                signature = try PlainFile.contents(of: signaturePath, limit: 64 << 10)
            } catch {
                throw failure("cannot check the CT log list \(path): \(error)")
            }
            do {
                try CTListSignature.verify(list: bytes, signature: signature, publicKey: key)
            } catch {
                throw failure("the CT log list \(path) is not signed by proxy.ct_log_list_key \(keyPath) (signature \(signaturePath)): \(error)")
            }
        }
        let list: CTLogList
        do {
            list = try CTLogList.load(bytes, at: Date())
        } catch {
            throw failure("the CT log list \(path) does not load: \(error)")
        }
        self.path = path
        self.list = list
        self.settings = settings
        keys = list.operators.flatMap(\.logs).compactMap { CTLogKey(spki: $0.key) }  // all of them: `load` parsed each
    }

    func freshness(at now: Date) -> CTListFreshness { list.freshness(at: now, maxAge: settings.maxAge) }

    /// Chrome's verdict on the leaf of `presented` under `mode` (report or require), with what is
    /// enforced while the list is stale. `presented[1]` is taken as the leaf's issuer: its key is in
    /// the entry embedded SCTs sign, and its name in a stapled OCSP response's certificate id.
    func judge(_ presented: [Certificate], delivered: DeliveredSCTs, mode: CTMode, at now: Date) -> CTFinding {
        let leaf = presented[0]
        let key = CheckedKey(leaf: leaf.der, issuer: presented.count > 1 ? presented[1].der : nil, delivered: delivered)
        let facts = checked.value(for: key, orMake: { check(presented, delivered: delivered) })
        let verdict = CTPolicy.chrome.evaluate(notBefore: leaf.notBefore, notAfter: leaf.notAfter, scts: facts, list: list, at: now)
        var enforced = mode
        if mode == .require, settings.staleList == .report, case .stale = freshness(at: now) { enforced = .report }
        return CTFinding(mode: mode, enforced: enforced, verdict: verdict)
    }

    /// The SCTs a leaf came with, their signatures checked: the same for every CONNECT that sees the
    /// same bytes under this list (their verdict is not: it depends on the time), so a warm CONNECT
    /// does not verify them again. Bounded; a reload makes a new book and so a new memo.
    private struct CheckedKey: Hashable {
        let leaf: [UInt8]
        let issuer: [UInt8]?
        let delivered: DeliveredSCTs

        /// The bytes hashed in bulk (see `Hasher.combine(bytesOf:)`).
        func hash(into hasher: inout Hasher) {
            hasher.combine(bytesOf: leaf)
            hasher.combine(issuer != nil)
            if let issuer { hasher.combine(bytesOf: issuer) }
            hasher.combine(delivered.tlsExtension != nil)
            if let list = delivered.tlsExtension { hasher.combine(bytesOf: list) }
            hasher.combine(delivered.ocspResponse != nil)
            if let response = delivered.ocspResponse { hasher.combine(bytesOf: response) }
        }
    }
    private let checked = BoundedMemo<CheckedKey, [SCTFacts]>(capacity: 1024)
    static let sctsPerDelivery = 12

    private func check(_ presented: [Certificate], delivered: DeliveredSCTs) -> [SCTFacts] {
        let leaf = presented[0]
        let issuer = presented.count > 1 ? presented[1] : nil
        // At most `sctsPerDelivery` of each kind: a compliant certificate needs 3 at most, and a server
        // that sends hundreds naming a listed log would otherwise buy a signature check with each.
        var scts = ((try? leaf.embeddedSCTs()) ?? []).prefix(Self.sctsPerDelivery)
        if let list = delivered.tlsExtension {
            scts += ((try? SignedCertificateTimestamp.list(list, delivery: .tlsExtension)) ?? []).prefix(Self.sctsPerDelivery)
        }
        if let response = delivered.ocspResponse, let issuer {
            scts += ((try? SignedCertificateTimestamp.stapled(ocspResponse: response, leaf: leaf, issuer: issuer)) ?? []).prefix(Self.sctsPerDelivery)
        }
        return SCTEntries(leaf: leaf, issuer: issuer).check(Array(scts), keys: keys).compactMap { checked -> SCTFacts? in
            guard let id = CTLogID(checked.logID) else { return nil }
            return SCTFacts(logID: id, timestamp: Date(timeIntervalSince1970: Double(checked.timestamp) / 1000),
                            delivery: checked.delivery, signatureVerified: checked.verified)
        }
    }
}
