#!/usr/bin/env python3
"""Seeds for Fuzz/TLS13FlightFuzz.swift from RFC 8448 §3:  tls13-seeds.py RFC8448Vectors.swift DIR
raw: mode byte 0, then the encrypted flight record. sealed: mode byte 5 (sealed, 257-byte records),
then the plaintext EncryptedExtensions, Certificate, CertificateVerify, Finished. compressed-NAME:
mode byte 7 (sealed, the ClientHello offering compress_certificate, 257-byte records), then the same
messages with a CompressedCertificate (RFC 8879) in place of the Certificate; brotli and zstd only
when their Python modules are there."""
import re, sys, zlib

text = open(sys.argv[1]).read()


def vector(name):
    match = re.search(name + r' = hexBytes\("""(.*?)"""', text, re.S)
    return bytes.fromhex("".join(match.group(1).split()))


def message(kind, body):
    return bytes([kind]) + len(body).to_bytes(3, "big") + body


cert = vector("serverCertificate")
entry = len(cert).to_bytes(3, "big") + cert + b"\x00\x00"
certificate = message(11, b"\x00" + len(entry).to_bytes(3, "big") + entry)
encrypted_extensions = bytes.fromhex("080000240022000a00140012001d00170018001901000101010201030104001c0002400100000000")
certificate_verify = bytes.fromhex(
    "0f000084080400805a747c5d88fa9bd2e55ab085a61015b7211f824cd484145ab3ff52f1fda8477b0b7abc90db78e2d33a5c141a0786"
    "53fa6bef780c5ea248eeaaa785c4f394cab6d30bbe8d4859ee511f602957b15411ac027671459e46445c9ea58c181e818e95b8c3fb0b"
    "f3278409d3be152a3da5043e063dda65cdf5aea20d53dfacd42f74f3")
finished = bytes.fromhex("140000209b9b141d906337fbd2cbdce71df4deda4ab42c309572cb7fffee5454b78f0718")
with open(sys.argv[2] + "/raw", "wb") as f:
    f.write(b"\x00" + vector("serverFlightRecord"))
with open(sys.argv[2] + "/sealed", "wb") as f:
    f.write(b"\x05" + encrypted_extensions + certificate + certificate_verify + finished)

compressors = {"zlib": (1, zlib.compress)}
try:
    import brotli
    compressors["brotli"] = (2, brotli.compress)
except ImportError:
    pass
try:
    import zstandard
    compressors["zstd"] = (3, lambda data: zstandard.ZstdCompressor().compress(data))
except ImportError:
    pass
body = certificate[4:]
for name, (algorithm, compress) in compressors.items():
    data = compress(body)
    compressed = message(25, algorithm.to_bytes(2, "big") + len(body).to_bytes(3, "big") + len(data).to_bytes(3, "big") + data)
    with open(f"{sys.argv[2]}/compressed-{name}", "wb") as f:
        f.write(b"\x07" + encrypted_extensions + compressed + certificate_verify + finished)
