import Foundation
import TLSInspection

/// A secret the stream check asked for, from the client's own key log.
enum KeyLogSecret {
    /// `SERVER_HANDSHAKE_TRAFFIC_SECRET`: opens the server's encrypted handshake (its Certificate).
    case serverHandshake(SecretBytes)
    /// `SERVER_TRAFFIC_SECRET_0`: opens the NewSessionTickets after the handshake.
    case serverTraffic0(SecretBytes)
}

/// What a watch receives for its client random.
enum KeyLogDelivery {
    case secret(KeyLogSecret)
    /// A second line for the same random and label with a different secret: someone else wrote a
    /// line for this handshake, so none of them can be believed.
    case conflict(label: String)
}

/// The key log as pinproxy reads it, without any file: lines cut from the bytes read, parsed with a
/// length limit, and handed to the tunnel that watches their client random. Everything else is
/// dropped as it is read. Socket- and file-free, so tests drive it with plain bytes.
///
/// The NSS key log format: `LABEL <client_random hex> <secret hex>` per line, `#` comments.
/// Only the two server-side labels the stream check needs are ever kept, and only for a random a
/// tunnel watches; `CLIENT_*` secrets (which would open what the client sends) are never kept.
final class KeyLogBook {
    struct Counters: Equatable {
        /// Every line read (complete, or cut off at the length limit).
        var lines = 0
        /// Lines handed to a watch.
        var kept = 0
        /// Well-formed lines not kept: other labels, randoms nobody watches, repeats, comments.
        var dropped = 0
        /// Lines that are not `LABEL RANDOM SECRET`.
        var unparsable = 0
        /// Lines longer than `maxLineBytes`, dropped unread.
        var tooLong = 0
        /// Watches not registered because the table was full.
        var watchesRefused = 0
        /// Bytes a flood made the intake pass over without parsing them (see `KeyLogIntake`).
        var skippedBytes: Int64 = 0
    }

    /// The longest line kept: `SERVER_HANDSHAKE_TRAFFIC_SECRET` + 64 + 96 hex digits is 193 bytes.
    static let maxLineBytes = 512
    static let handshakeLabel = "SERVER_HANDSHAKE_TRAFFIC_SECRET"
    static let traffic0Label = "SERVER_TRAFFIC_SECRET_0"

    let capacity: Int
    let ttl: Duration
    private(set) var counters = Counters()

    /// A line cut across two reads waits here (wiped once used).
    private let carry = UnsafeMutableRawBufferPointer.allocate(byteCount: KeyLogBook.maxLineBytes, alignment: 1)
    private var carried = 0
    /// Inside a line that grew past the limit: skip to its end.
    private var skipping = false

    private struct Interest {
        let id: Int
        let deliver: (KeyLogDelivery) -> Void
        let expires: ContinuousClock.Instant
        /// The file's size when the watch began: its client writes the line after that (it is
        /// answering a ClientHello pinproxy already holds), so every byte before it is worthless to it.
        var from: Int64
    }

    /// Per watched random: who wants its lines, and the secrets seen so far (to tell a repeat from
    /// a conflict). Released (and so zeroed) when the last watch goes.
    private struct Entry {
        var interests: [Interest] = []
        /// The random in hex as clients write it (lower case, and upper case), for the flood scan.
        var hex: [[UInt8]] = []
        var handshake: SecretBytes?
        var traffic0: SecretBytes?
    }

    private var entries: [[UInt8]: Entry] = [:]

    /// A delivery due once the bytes are parsed.
    private struct Delivery {
        let random: [UInt8]
        let id: Int
        let what: KeyLogDelivery
    }
    private var watching = 0
    private var nextID = 1
    private var nextSweep: ContinuousClock.Instant?

    /// - Parameters:
    ///   - capacity: the most watches at once (`max_tunnels`).
    ///   - ttl: a watch that was never cancelled expires after this long.
    init(capacity: Int, ttl: Duration = .seconds(60)) {
        self.capacity = capacity
        self.ttl = ttl
    }

    deinit {
        explicit_bzero(carry.baseAddress!, carry.count)
        carry.deallocate()
    }

    var watchCount: Int { watching }

    // MARK: watches

    /// Registers interest in one client random; nil when the table is full (counted) or the random
    /// is not 32 bytes.
    func watch(clientRandom: [UInt8], now: ContinuousClock.Instant, from: Int64 = 0, _ deliver: @escaping (KeyLogDelivery) -> Void) -> Int? {
        sweep(now: now)
        guard clientRandom.count == 32, watching < capacity else {
            counters.watchesRefused += 1
            return nil
        }
        let id = nextID
        nextID += 1
        var entry = entries[clientRandom] ?? Entry(hex: ["%02x", "%02X"].map { format in Array(clientRandom.map { String(format: format, $0) }.joined().utf8) })
        entry.interests.append(Interest(id: id, deliver: deliver, expires: now + ttl, from: from))
        entries[clientRandom] = entry
        watching += 1
        if nextSweep == nil || now + ttl < nextSweep! { nextSweep = now + ttl }
        return id
    }

    func cancel(id: Int, clientRandom: [UInt8]) {
        guard var entry = entries[clientRandom], let index = entry.interests.firstIndex(where: { $0.id == id }) else { return }
        entry.interests.remove(at: index)
        watching -= 1
        entries[clientRandom] = entry.interests.isEmpty ? nil : entry
    }

    /// Drops the watches whose TTL ran out. Runs at most when the earliest one is due.
    private func sweep(now: ContinuousClock.Instant) {
        guard let due = nextSweep, now >= due else { return }
        nextSweep = nil
        for (random, var entry) in entries {
            entry.interests.removeAll { $0.expires <= now }
            watching -= (entries[random]!.interests.count - entry.interests.count)
            entries[random] = entry.interests.isEmpty ? nil : entry
            for interest in entry.interests where nextSweep == nil || interest.expires < nextSweep! { nextSweep = interest.expires }
        }
    }

    /// Where the oldest watch began (nil: nobody waits, every byte in the file is worthless).
    var oldestStart: Int64? {
        entries.values.lazy.flatMap(\.interests).map(\.from).min()
    }

    /// The file was emptied or replaced: the offsets the watches began at mean nothing any more.
    func rebase() {
        for random in entries.keys {
            for index in entries[random]!.interests.indices { entries[random]!.interests[index].from = 0 }
        }
    }

    /// Bytes the intake passed over unparsed (a flood).
    func noteSkipped(_ bytes: Int64) { counters.skippedBytes += bytes }

    /// The randoms watched now, in hex (each in lower and upper case).
    var watchedHex: [[UInt8]] { entries.values.flatMap(\.hex) }

    // MARK: lines

    /// Takes the bytes read from the key log, in order. A line cut at the end waits for the rest.
    /// Deliveries run after the bytes are taken, so a watch may cancel itself (or read again) from
    /// its callback.
    func consume(_ bytes: UnsafeRawBufferPointer, now: ContinuousClock.Instant) {
        sweep(now: now)
        var deliveries: [Delivery] = []
        var start = 0
        while start < bytes.count {
            guard let newline = bytes[start...].firstIndex(of: UInt8(ascii: "\n")) else { break }
            let piece = UnsafeRawBufferPointer(rebasing: bytes[start..<newline])
            start = newline + 1
            if skipping {
                skipping = false
                counters.lines += 1
                counters.tooLong += 1
            } else if carried + piece.count > Self.maxLineBytes {
                wipeCarry()
                counters.lines += 1
                counters.tooLong += 1
            } else if carried > 0 {
                UnsafeMutableRawBufferPointer(rebasing: carry[carried..<(carried + piece.count)]).copyMemory(from: piece)
                carried += piece.count
                take(UnsafeRawBufferPointer(rebasing: carry[0..<carried]), into: &deliveries)
                wipeCarry()
            } else {
                take(piece, into: &deliveries)
            }
        }
        let rest = UnsafeRawBufferPointer(rebasing: bytes[start...])
        if !skipping && !rest.isEmpty {
            if carried + rest.count > Self.maxLineBytes {
                wipeCarry()
                skipping = true
            } else {
                UnsafeMutableRawBufferPointer(rebasing: carry[carried..<(carried + rest.count)]).copyMemory(from: rest)
                carried += rest.count
            }
        }
        // A callback may have cancelled a later watch (or itself): deliver only to those still there.
        for delivery in deliveries {
            guard let interest = entries[delivery.random]?.interests.first(where: { $0.id == delivery.id }) else { continue }
            interest.deliver(delivery.what)
        }
    }

    /// Forgets a partial line (the file was truncated under us, or pinproxy stops).
    func discardPartialLine() {
        wipeCarry()
        skipping = false
    }

    private func wipeCarry() {
        if carried > 0 { explicit_bzero(carry.baseAddress!, carried) }
        carried = 0
    }

    /// One whole line, without its newline.
    private func take(_ raw: UnsafeRawBufferPointer, into deliveries: inout [Delivery]) {
        let line = raw.last == UInt8(ascii: "\r") ? UnsafeRawBufferPointer(rebasing: raw.dropLast()) : raw
        if line.allSatisfy({ $0 == UInt8(ascii: " ") || $0 == UInt8(ascii: "\t") }) { return }  // blank: not a line
        counters.lines += 1
        if line.first == UInt8(ascii: "#") {
            counters.dropped += 1
            return
        }
        switch KeyLogLine.parse(line, wanted: { [entries] in entries[$0] != nil }) {
        case .unparsable:
            counters.unparsable += 1
        case .notWanted:
            counters.dropped += 1
        case .wanted(let label, let random, let secret):
            guard var entry = entries[random] else { return counters.dropped += 1 }
            let delivery: KeyLogDelivery
            let previous = label == Self.handshakeLabel ? entry.handshake : entry.traffic0
            if let previous {
                if previous.matches(secret) { return counters.dropped += 1 }  // the same line again
                delivery = .conflict(label: label)
            } else {
                if label == Self.handshakeLabel {
                    entry.handshake = secret
                    delivery = .secret(.serverHandshake(secret))
                } else {
                    entry.traffic0 = secret
                    delivery = .secret(.serverTraffic0(secret))
                }
                entries[random] = entry
            }
            counters.kept += 1
            for interest in entry.interests { deliveries.append(Delivery(random: random, id: interest.id, what: delivery)) }
        }
    }
}

/// One key-log line, parsed without copying its secret anywhere but into `SecretBytes`.
enum KeyLogLine {
    case unparsable
    /// Well-formed, but a label pinproxy never keeps or a random nobody watches. Its secret was
    /// never decoded.
    case notWanted
    case wanted(label: String, clientRandom: [UInt8], secret: SecretBytes)

    static let keptLabels = [KeyLogBook.handshakeLabel, KeyLogBook.traffic0Label]

    /// `LABEL SP RANDOM SP SECRET`: LABEL is `[A-Z0-9_]+`, RANDOM 64 hex digits, SECRET an even
    /// number of hex digits (at most 64 bytes; 32 or 48 for a kept TLS 1.3 traffic secret).
    static func parse(_ line: UnsafeRawBufferPointer, wanted: ([UInt8]) -> Bool) -> KeyLogLine {
        let fields = line.split(separator: UInt8(ascii: " "), maxSplits: 3, omittingEmptySubsequences: false)
        guard fields.count == 3 else { return .unparsable }
        let labelBytes = fields[0], randomHex = fields[1], secretHex = fields[2]
        guard !labelBytes.isEmpty, labelBytes.count <= 64,
              labelBytes.allSatisfy({ (0x41...0x5a).contains($0) || (0x30...0x39).contains($0) || $0 == 0x5f }),
              randomHex.count == 64, randomHex.allSatisfy(isHexDigit),
              !secretHex.isEmpty, secretHex.count % 2 == 0, secretHex.count <= 128, secretHex.allSatisfy(isHexDigit)
        else { return .unparsable }
        let label = String(decoding: labelBytes, as: UTF8.self)
        guard keptLabels.contains(label) else { return .notWanted }
        guard secretHex.count == 64 || secretHex.count == 96 else { return .unparsable }
        let random = hexBytes(randomHex)
        guard wanted(random) else { return .notWanted }
        let secret = SecretBytes(count: secretHex.count / 2) { out in
            for index in 0..<out.count {
                let high = secretHex[secretHex.startIndex + 2 * index], low = secretHex[secretHex.startIndex + 2 * index + 1]
                out[index] = hexValue(high) << 4 | hexValue(low)
            }
        }
        return .wanted(label: label, clientRandom: random, secret: secret)
    }

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8 {
        switch byte {
        case 0x30...0x39: return byte - 0x30
        case 0x41...0x46: return byte - 0x41 + 10
        default: return byte - 0x61 + 10
        }
    }

    private static func hexBytes(_ hex: Slice<UnsafeRawBufferPointer>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(hex.count / 2)
        var index = hex.startIndex
        while index < hex.endIndex {
            out.append(hexValue(hex[index]) << 4 | hexValue(hex[index + 1]))
            index += 2
        }
        return out
    }
}
