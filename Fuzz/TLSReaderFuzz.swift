// libFuzzer harness for the passive TLS reader (ClientFlightReader, ServerFlightReader). Built with
// `swiftc -sanitize=fuzzer,address` together with the reader's sources, which need nothing but the
// standard library:
//
//   swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name TLSReader \
//     Sources/TLSInspection/{TLSRecordReader,ClientHello,ServerHello,ClientFlightReader,ServerFlightReader}.swift \
//     Fuzz/TLSReaderFuzz.swift -o Fuzz/out/tlsreader-fuzz
//
// The first input byte picks the limit (low bit: default or 2000 bytes) and a split position (the
// other seven bits, as a fraction of the length); the rest is the bytes a peer sent. Both readers
// read them in one piece, in two pieces cut there, and one byte at a time, and must give the same
// result (split at every byte gives the same result as one piece). Besides "does not
// crash", each check a property: the bytes taken stay within the input and the limit.

enum ClientRun: Equatable {
    case read(ClientHello?, consumed: Int)
    case failed(TLSReadError)
}

enum ServerRun: Equatable {
    case read([ServerFlightEvent], consumed: Int)
    case failed(TLSReadError)
}

func runClient(_ bytes: [UInt8], cuts: [Int], limit: Int) -> ClientRun {
    var reader = ClientFlightReader(limit: limit)
    var start = 0
    do {
        for cut in cuts + [bytes.count] {
            if let hello = try reader.feed(bytes[start..<cut]) { return .read(hello, consumed: reader.bytesConsumed) }
            start = cut
        }
        return .read(nil, consumed: reader.bytesConsumed)
    } catch {
        return .failed(error)
    }
}

func runServer(_ bytes: [UInt8], cuts: [Int], limit: Int) -> ServerRun {
    var reader = ServerFlightReader(limit: limit)
    var events: [ServerFlightEvent] = []
    var start = 0
    do {
        for cut in cuts + [bytes.count] {
            events += try reader.feed(bytes[start..<cut])
            start = cut
        }
        return .read(events, consumed: reader.bytesConsumed)
    } catch {
        return .failed(error)
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let clientLimit = data[0] & 1 == 0 ? 64 * 1024 : 2000
    let serverLimit = data[0] & 1 == 0 ? 128 * 1024 : 2000
    let split = bytes.count * Int(data[0] >> 1) / 127
    let drip = bytes.isEmpty ? [] : Array(1..<bytes.count)

    let client = runClient(bytes, cuts: [], limit: clientLimit)
    precondition(runClient(bytes, cuts: [split], limit: clientLimit) == client, "client: split at \(split) differs from one piece")
    precondition(runClient(bytes, cuts: drip, limit: clientLimit) == client, "client: drip differs from one piece")
    if case .read(let hello, let consumed) = client {
        precondition(consumed <= bytes.count && consumed <= clientLimit, "client took \(consumed) bytes")
        if let hello {
            precondition(hello.random.count == 32 && hello.sessionID.count <= 32 && hello.raw.first == 1, "client hello fields")
            precondition(hello.raw.count + 5 <= consumed, "hello longer than the bytes taken")
        }
    }

    let server = runServer(bytes, cuts: [], limit: serverLimit)
    precondition(runServer(bytes, cuts: [split], limit: serverLimit) == server, "server: split at \(split) differs from one piece")
    precondition(runServer(bytes, cuts: drip, limit: serverLimit) == server, "server: drip differs from one piece")
    if case .read(let events, let consumed) = server {
        precondition(consumed <= bytes.count && consumed <= serverLimit, "server took \(consumed) bytes")
        // Nothing follows the event that ends the plaintext.
        if let end = events.firstIndex(where: { $0 == .changeCipherSpec || $0 == .encrypted }) {
            precondition(end == events.count - 1, "events after the end of the plaintext")
        }
    }
    return 0
}
