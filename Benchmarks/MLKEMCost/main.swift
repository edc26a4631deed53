// What the mirror's post-quantum key shares cost a tunnel, in a release build:
// Benchmarks/mlkemcost.sh [ROUNDS=2000]. Per group, ROUNDS times: the mirror's key as MirrorHello
// makes it (ML-KEM key generation on swift-crypto, and the curve half on OpenSSL for a hybrid),
// and the shared secret of a server's answer (decapsulation, and the curve half's derive) — the
// two steps a mirrored tunnel adds for that share. The server's answers are made beforehand with
// swift-crypto, outside the timing. Prints the median and p99 of the calling thread's CPU time
// (CLOCK_THREAD_CPUTIME_ID) per step, in µs, as a markdown table. CPU only; bounded by ROUNDS.
// Not a test: numbers for the README.
import Crypto
import Foundation
@_spi(Benchmarks) import TLSInspection

func threadCPU() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
    return Double(now.tv_sec) * 1e6 + Double(now.tv_nsec) / 1e3
}

func percentile(_ values: [Double], _ p: Double) -> Double {
    let sorted = values.sorted()
    return sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))]
}

/// A server's key_exchange for the client's `share` of `group` (the layouts of MirrorKEM.swift).
func serverShare(group: UInt16, share: [UInt8]) throws -> [UInt8] {
    switch group {
    case 0x11EC:
        let ct = try MLKEM768.PublicKey(rawRepresentation: Array(share[..<1184])).encapsulate().encapsulated
        return Array(ct) + Array(Curve25519.KeyAgreement.PrivateKey().publicKey.rawRepresentation)
    case 0x11EB:
        let ct = try MLKEM768.PublicKey(rawRepresentation: Array(share[65...])).encapsulate().encapsulated
        return Array(P256.KeyAgreement.PrivateKey().publicKey.x963Representation) + Array(ct)
    case 0x11ED:
        let ct = try MLKEM1024.PublicKey(rawRepresentation: Array(share[97...])).encapsulate().encapsulated
        return Array(P384.KeyAgreement.PrivateKey().publicKey.x963Representation) + Array(ct)
    case 0x0201: return Array(try MLKEM768.PublicKey(rawRepresentation: share).encapsulate().encapsulated)
    case 0x0202: return Array(try MLKEM1024.PublicKey(rawRepresentation: share).encapsulate().encapsulated)
    default: return Array(Curve25519.KeyAgreement.PrivateKey().publicKey.rawRepresentation)  // X25519
    }
}

let rounds = max(10, Int(CommandLine.arguments.dropFirst().first ?? "") ?? 2000)
let groups: [(String, UInt16)] = [("X25519 (for comparison)", 0x001D), ("X25519MLKEM768", 0x11EC), ("MLKEM768", 0x0201),
                                  ("SecP256r1MLKEM768", 0x11EB), ("SecP384r1MLKEM1024", 0x11ED), ("MLKEM1024", 0x0202)]
print("| group | rounds | key p50 µs | key p99 µs | secret p50 µs | secret p99 µs | key+secret p50 µs |")
print("|---|---|---|---|---|---|---|")
for (name, group) in groups {
    var keys: [Double] = [], secrets: [Double] = []
    for _ in 0..<rounds {
        let start = threadCPU()
        guard let key = MirrorKeyCost(group: group) else { fatalError("no key for \(name)") }
        let made = threadCPU()
        let answer = try serverShare(group: group, share: key.share)
        let before = threadCPU()
        guard key.secretLength(serverShare: answer) != nil else { fatalError("\(name): the answer was refused") }
        let end = threadCPU()
        keys.append(made - start)
        secrets.append(end - before)
    }
    let both = zip(keys, secrets).map { $0 + $1 }
    print(String(format: "| %@ | %d | %.1f | %.1f | %.1f | %.1f | %.1f |", name, rounds, percentile(keys, 0.5), percentile(keys, 0.99),
                 percentile(secrets, 0.5), percentile(secrets, 0.99), percentile(both, 0.5)))
}
