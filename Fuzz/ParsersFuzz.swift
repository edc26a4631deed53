// libFuzzer harness for pinproxy's pure parsers: everything that reads bytes from the network or
// text from a policy file. Built by Fuzz/run.sh with `swiftc -sanitize=fuzzer,address` together
// with the parser sources (SwiftPM cannot link a fuzzer executable).
//
// The first input byte picks the parser; the rest is its input. Besides "does not crash", each
// target checks a property: what parses must round-trip or re-parse to the same value.

import Foundation

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzz(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    guard size > 0 else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data + 1, count: size - 1))
    let text = String(decoding: bytes, as: UTF8.self)
    switch data[0] % 8 {
    case 0:
        if case .success(let authority) = Authority.parse(text) {
            // A parsed authority prints as text that parses back to itself.
            guard case .success(let again) = Authority.parse(authority.description), again == authority else {
                fatalError("authority does not round-trip: \(authority)")
            }
        }
    case 1:
        _ = ConnectRequest.parse(head: bytes)
        _ = bytes.withUnsafeBytes { ConnectRequest.headLength(in: $0) }
    case 2:
        if case .success(let pattern) = HostPattern.parse(text), case .success(let again) = HostPattern.parse(pattern.description) {
            precondition(again == pattern, "pattern does not round-trip")
        }
    case 3:
        if case .success(let pin) = Pin.parse(text) {
            guard case .success(let again) = Pin.parse(pin.description), again == pin else { fatalError("pin does not round-trip") }
        }
    case 4:
        if let cidr = CIDR(text) { precondition(cidr.contains(cidr.network), "a range must contain its network") }
    case 5:
        if let date = RFC3339.parse(text), let again = RFC3339.parse(RFC3339.format(date)) {
            precondition(again.timeIntervalSince1970 == date.timeIntervalSince1970.rounded(.down), "time does not round-trip")
        }
    case 6:
        if let decoded = Base64.decode(text) { precondition(Base64.encode(decoded) == text, "base64 does not round-trip") }
    default:
        // A CT log list: every log that loads is the log its id names (the loader's cross-check).
        // Any key is taken: checking keys needs OpenSSL, which this pure target does not link.
        if let list = try? CTLogList.parse(bytes, at: Date(timeIntervalSince1970: 1_800_000_000), keyCheck: { _ in true }) {
            for log in list.operators.flatMap(\.logs) {
                precondition(log.id.bytes == SHA256.hash(log.key) && list.log(log.id) != nil, "a log whose id is not its key's hash")
            }
        }
    }
    return 0
}
