/// Walks the TLS record headers of a byte stream fed in pieces, skipping the record bodies, to see
/// when a record of some content type starts, however the pieces split the headers.
struct RecordHeaderWalk {
    /// Bytes of the stream fed so far (counted from the stream's start).
    private(set) var fed: Int
    /// Where the next record header starts.
    private var nextRecord: Int
    private var header: [UInt8] = []

    /// Starts at stream offset `start`, where a record header begins.
    init(at start: Int) {
        fed = start
        nextRecord = start
    }

    /// Feeds the next piece; true once the header of a record of content type `type` is read (the
    /// rest of the piece is not looked at).
    mutating func feed(_ bytes: UnsafeRawBufferPointer, until type: UInt8) -> Bool {
        defer { fed += bytes.count }
        var offset = 0
        while offset < bytes.count {
            let position = fed + offset
            if position < nextRecord {  // inside a record's body: skip it
                offset += min(nextRecord - position, bytes.count - offset)
                continue
            }
            header.append(bytes[offset])
            offset += 1
            guard header.count == 5 else { continue }
            let found = header[0], length = Int(header[3]) << 8 | Int(header[4])
            header = []
            nextRecord = fed + offset + length
            if found == type { return true }
        }
        return false
    }
}
