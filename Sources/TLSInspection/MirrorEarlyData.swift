// The early data of a client whose ClientHello the mirror copies (issue 18, RFC 8446 §4.2.10).

/// Turns the early data a client sends after a ClientHello with early_data (RFC 8446 §4.2.10)
/// into the mirror's: the same records, headers kept, each body random bytes of the same length
/// (pinproxy has no early traffic key, and the server, resuming nothing on the mirror, skips them).
/// A compatibility ChangeCipherSpec (RFC 8446 Appendix D.4) is copied as it is: its one byte is
/// fixed, and a random one would be a protocol error. Fed the client's bytes after its ClientHello's
/// records in any pieces; returns as many bytes.
public struct MirrorEarlyData: Sendable {
    /// Header bytes of the current record seen so far (0...5), and body bytes still to come.
    private var header: [UInt8] = []
    private var bodyLeft = 0
    private var copiesBody = false

    public init() {}

    /// The mirror of the client's next bytes: exactly as many, record headers as they were.
    public mutating func mirror(_ bytes: some Collection<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if bodyLeft == 0 {
                let byte = bytes[index]
                bytes.formIndex(after: &index)
                header.append(byte)
                out.append(byte)
                if header.count == tlsRecordHeaderLength {
                    bodyLeft = Int(header[3]) << 8 | Int(header[4])
                    copiesBody = header[0] == tlsContentTypeChangeCipherSpec
                    header.removeAll(keepingCapacity: true)
                }
                continue
            }
            let count = min(bodyLeft, bytes.distance(from: index, to: bytes.endIndex))
            let end = bytes.index(index, offsetBy: count)
            if copiesBody { out += bytes[index..<end] } else { out += randomBytes(count) }
            index = end
            bodyLeft -= count
        }
        return out
    }
}
