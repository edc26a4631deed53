#!/usr/bin/env python3
"""Seeds for Fuzz/TLS13FlightFuzz.swift from RFC 8448 §3:  tls13-seeds.py RFC8448Vectors.swift DIR
raw: mode byte 0, then the encrypted flight record. sealed: mode byte 3 (sealed, 129-byte records),
then the plaintext EncryptedExtensions, Certificate, CertificateVerify, Finished."""
import re, sys

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
    f.write(b"\x03" + encrypted_extensions + certificate + certificate_verify + finished)
