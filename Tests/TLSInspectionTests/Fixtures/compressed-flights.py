#!/usr/bin/env python3
"""Builds the TLS 1.3 flights of Tests/TestSupport/CompressedCertificateVectors.swift: a server
flight whose certificate is a CompressedCertificate (RFC 8879) for each of zlib, brotli and zstd,
signed by leaf-ec256's key over a transcript that holds the CompressedCertificate as sent, and
sealed under a made-up SERVER_HANDSHAKE_TRAFFIC_SECRET (no connection: the flight opener takes the
secret as given). Needs `cryptography`, `brotli` and `zstandard` (the peers venv has them):

    cd Tests/TLSInspectionTests/Fixtures && ../../../.build-peers/bin/python compressed-flights.py \
        > ../../TestSupport/CompressedCertificateVectors.swift

Besides each verifying flight, three that must be refused: CertificateVerify signed over the
decompressed Certificate instead of the message sent, a Certificate followed by a
CompressedCertificate, and two CompressedCertificates.
"""
import base64, hashlib, hmac, os, zlib

import brotli, zstandard
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

HERE = os.path.dirname(os.path.abspath(__file__))

SUITE = 0x1301
SECRET = hashlib.sha256(b"pinproxy compressed certificate flights").digest()
ALGORITHMS = {1: ("zlib", zlib.compress), 2: ("brotli", brotli.compress),
              3: ("zstd", lambda data: zstandard.ZstdCompressor().compress(data))}


def expand_label(secret, label, length):
    """RFC 8446 §7.1 HKDF-Expand-Label with an empty context, SHA-256 (as capture-tls13.py)."""
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\x00"
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(secret, block + info + bytes([counter]), hashlib.sha256).digest()
        out += block
        counter += 1
    return out[:length]


def seal(plaintext):
    """TLS_AES_128_GCM_SHA256 records of handshake content under SECRET, from sequence number 0."""
    aead = AESGCM(expand_label(SECRET, b"key", 16))
    iv = expand_label(SECRET, b"iv", 12)
    out = b""
    for seq, at in enumerate(range(0, len(plaintext), 16384)):
        inner = plaintext[at:at + 16384] + b"\x16"
        header = b"\x17\x03\x03" + (len(inner) + 16).to_bytes(2, "big")
        nonce = bytes(a ^ b for a, b in zip(iv, seq.to_bytes(12, "big")))
        out += header + aead.encrypt(nonce, inner, header)
    return out


def handshake(kind, body):
    return bytes([kind]) + len(body).to_bytes(3, "big") + body


def u16(n):
    return n.to_bytes(2, "big")


def extension(kind, data):
    return u16(kind) + u16(len(data)) + data


def client_hello():
    extensions = (extension(43, b"\x02\x03\x04")                       # supported_versions: TLS 1.3
                  + extension(27, b"\x06\x00\x01\x00\x02\x00\x03"))   # compress_certificate: zlib, brotli, zstd
    body = u16(0x0303) + bytes(range(32)) + b"\x00" + u16(2) + u16(SUITE) + b"\x01\x00" + u16(len(extensions)) + extensions
    return handshake(1, body)


def server_hello():
    key_share = u16(0x001D) + u16(32) + bytes(range(32, 64))
    extensions = extension(43, u16(0x0304)) + extension(51, key_share)
    body = u16(0x0303) + bytes(range(64, 96)) + b"\x00" + u16(SUITE) + b"\x00" + u16(len(extensions)) + extensions
    return handshake(2, body)


def certificate_body():
    with open(HERE + "/leaf-ec256.chain.pem", "rb") as f:
        chain = [c.public_bytes(serialization.Encoding.DER) for c in x509.load_pem_x509_certificates(f.read())]
    entries = b"".join(len(c).to_bytes(3, "big") + c + b"\x00\x00" for c in chain)
    return b"\x00" + len(entries).to_bytes(3, "big") + entries


def compressed_certificate(algorithm, body):
    data = ALGORITHMS[algorithm][1](body)
    return handshake(25, u16(algorithm) + len(body).to_bytes(3, "big") + len(data).to_bytes(3, "big") + data)


def certificate_verify(transcript):
    with open(HERE + "/leaf-ec256.key.pem", "rb") as f:
        key = serialization.load_pem_private_key(f.read(), None)
    content = b"\x20" * 64 + b"TLS 1.3, server CertificateVerify\x00" + hashlib.sha256(b"".join(transcript)).digest()
    signature = key.sign(content, ec.ECDSA(hashes.SHA256()))
    return handshake(15, u16(0x0403) + u16(len(signature)) + signature)


def finished(transcript):
    key = expand_label(SECRET, b"finished", 32)
    return handshake(20, hmac.new(key, hashlib.sha256(b"".join(transcript)).digest(), hashlib.sha256).digest())


def flight(hellos, certificates, signed_over=None):
    """EncryptedExtensions, the certificate messages, CertificateVerify over `signed_over` (by
    default the messages sent) and Finished, sealed."""
    messages = [handshake(8, u16(0))] + certificates
    verify = certificate_verify(hellos + (signed_over or messages))
    messages.append(verify)
    messages.append(finished(hellos + messages))
    return seal(b"".join(messages))


def swift_bytes(data):
    text = base64.b64encode(data).decode()
    lines = [text[i:i + 100] for i in range(0, len(text), 100)]
    return '"""\n' + "".join(f"            {line}\n" for line in lines) + '            """'


def main():
    hellos = [client_hello(), server_hello()]
    body = certificate_body()
    certificate = handshake(11, body)
    print("// Generated by Tests/TLSInspectionTests/Fixtures/compressed-flights.py: TLS 1.3 server flights whose")
    print("// certificate is an RFC 8879 CompressedCertificate of leaf-ec256.chain.pem, signed by leaf-ec256's key")
    print("// and sealed under a made-up handshake secret (no connection). Expectations come from the script.")
    print()
    print("public struct CompressedFlight: Sendable {")
    print("    public let algorithm: UInt16")
    print("    public let name: String")
    print("    public let flight: String                  // base64: EncryptedExtensions … Finished, sealed")
    print("    public let signedOverCertificate: String   // CertificateVerify over the decompressed Certificate instead")
    print("    public let afterCertificate: String        // a Certificate, then the CompressedCertificate")
    print("    public let twice: String                   // the CompressedCertificate twice")
    print("}")
    print()
    print("public enum CompressedCertificateVectors {")
    print(f"    public static let suite: UInt16 = 0x{SUITE:04x}")
    print(f'    public static let handshakeSecret = "{SECRET.hex()}"')
    print(f"    /// Offers compress_certificate (27) with zlib, brotli and zstd.")
    print(f"    public static let clientHello = {swift_bytes(hellos[0])}")
    print(f"    public static let serverHello = {swift_bytes(hellos[1])}")
    print(f"    /// The Certificate message every flight's CompressedCertificate decompresses to.")
    print(f"    public static let certificate = {swift_bytes(certificate)}")
    print()
    print("    public static let all: [CompressedFlight] = [")
    for algorithm, (name, _) in ALGORITHMS.items():
        compressed = compressed_certificate(algorithm, body)
        print(f'        CompressedFlight(algorithm: {algorithm}, name: "{name}",')
        print(f"            flight: {swift_bytes(flight(hellos, [compressed]))},")
        print(f"            signedOverCertificate: {swift_bytes(flight(hellos, [compressed], signed_over=[handshake(8, u16(0)), certificate]))},")
        print(f"            afterCertificate: {swift_bytes(flight(hellos, [certificate, compressed]))},")
        print(f"            twice: {swift_bytes(flight(hellos, [compressed, compressed]))}),")
    print("    ]")
    print("}")


if __name__ == "__main__":
    main()
