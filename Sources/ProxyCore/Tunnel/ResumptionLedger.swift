import Foundation

/// The TLS 1.2 sessions pinproxy saw verified: a session id or ticket from a full handshake whose
/// Certificate the stream check judged, for one host and port. A resumed handshake carries no
/// Certificate, so it is allowed only when what it resumes is here (RFC 5246 §7.3, RFC 5077 §3.4);
/// a session made directly with a rogue server is not. Bounded in entries (the oldest goes first)
/// and in time. One per proxy, shared by every worker's tunnels behind a lock: a session verified on
/// one worker may be resumed by a connection another worker accepted.
final class ResumptionLedger: @unchecked Sendable {
    /// What a client offers to resume.
    enum Credential: Hashable {
        case sessionID([UInt8])
        case ticket([UInt8])
    }

    private struct Key: Hashable {
        let host: String
        let port: UInt16
        let credential: Credential
    }

    let capacity: Int
    let lifetime: Duration
    private struct Book {
        var entries: [Key: ContinuousClock.Instant] = [:]
        /// Insertion order, for evicting the oldest; may hold keys already removed.
        var order: [Key] = []
    }
    private let book = Locked(Book())

    init(capacity: Int = 10_000, lifetime: Duration = .seconds(24 * 3600)) {
        self.capacity = capacity
        self.lifetime = lifetime
    }

    var count: Int { book.withLock { $0.entries.count } }

    /// Forgets every session (a reload changed what verified them).
    func forgetAll() {
        book.withLock { $0 = Book() }
    }

    /// Records a credential a verified full handshake issued.
    func record(_ credential: Credential, host: String, port: UInt16, at now: ContinuousClock.Instant) {
        guard !isEmpty(credential) else { return }
        let key = Key(host: host, port: port, credential: credential)
        book.withLock { book in
            if book.entries.updateValue(now + lifetime, forKey: key) == nil { book.order.append(key) }
            while book.entries.count > capacity, !book.order.isEmpty {
                book.entries.removeValue(forKey: book.order.removeFirst())
            }
            if book.order.count > 2 * capacity { book.order = book.order.filter { book.entries[$0] != nil } }  // keep the order list bounded too
        }
    }

    /// Whether one of these credentials was recorded for this host and port and has not expired.
    func contains(any credentials: [Credential], host: String, port: UInt16, at now: ContinuousClock.Instant) -> Bool {
        book.withLock { book in
            credentials.contains { credential in
                guard !isEmpty(credential), let expiry = book.entries[Key(host: host, port: port, credential: credential)] else { return false }
                return now < expiry
            }
        }
    }

    private func isEmpty(_ credential: Credential) -> Bool {
        switch credential {
        case .sessionID(let bytes), .ticket(let bytes): return bytes.isEmpty
        }
    }
}
