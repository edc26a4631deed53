#!/usr/bin/env python3
"""Captures the TLS 1.3 vectors of Tests/TestSupport/TLS13Vectors*.swift: real clients (openssl
s_client, curl, Python ssl) writing a key log (-keylogfile / SSLKEYLOGFILE / keylog_filename)
against openssl s_server with this directory's fixture certificates, through a recording relay on
127.0.0.1. The secrets are those of throwaway loopback test servers only.

    cd Tests/TLSInspectionTests/Fixtures && ./capture-tls13.py > ../../TestSupport/TLS13Vectors.swift

It prints one file, which the repository keeps split by subject so that no file exceeds 450 lines:
TLS13Vectors.swift holds TLS13Capture and `all`, each TLS13Vectors+<subject>.swift some captures in
an `extension TLS13Vectors`; split a new capture's output the same way, replacing those files.

Each capture keeps: the client's bytes up to its (last) ClientHello record plus one more record cut
to header + 16 bytes; the server's bytes up to the first application-data record after its
NewSessionTickets; the key-log secrets for that connection; and what this script itself finds by
decrypting (with Python's `cryptography`, independently of pinproxy's code): the flight's end, the
signature scheme, whether a CertificateRequest came, the tickets.
"""
import base64, os, select, socket, subprocess, sys, tempfile, threading, time, hmac, hashlib
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, ChaCha20Poly1305

HERE = os.path.dirname(os.path.abspath(__file__))
HOST = "api.pinproxy.test"
SUITES = {0x1301: ("TLS_AES_128_GCM_SHA256", 16, hashlib.sha256), 0x1302: ("TLS_AES_256_GCM_SHA384", 32, hashlib.sha384),
          0x1303: ("TLS_CHACHA20_POLY1305_SHA256", 32, hashlib.sha256)}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def relay_one(listener, upstream_port, result):
    client, _ = listener.accept()
    server = socket.create_connection(("127.0.0.1", upstream_port))
    recorded = {client: bytearray(), server: bytearray()}
    peer = {client: server, server: client}
    open_ = {client, server}
    deadline = time.time() + 10
    while open_ and time.time() < deadline:
        ready, _, _ = select.select(list(open_), [], [], 0.5)
        for s in ready:
            data = s.recv(65536)
            if not data:
                open_.discard(s)
                try:
                    peer[s].shutdown(socket.SHUT_WR)
                except OSError:
                    pass
                continue
            recorded[s] += data
            peer[s].sendall(data)
    client.close()
    server.close()
    result.append((bytes(recorded[client]), bytes(recorded[server])))


def records(data):
    out, i = [], 0
    while i + 5 <= len(data):
        length = int.from_bytes(data[i + 3:i + 5], "big")
        out.append((data[i], data[i:i + 5 + length], i + 5 + length))
        i += 5 + length
    return out


def messages(fragments):
    """Plaintext handshake messages out of concatenated fragments."""
    data, out, i = b"".join(fragments), [], 0
    while i + 4 <= len(data):
        n = int.from_bytes(data[i + 1:i + 4], "big")
        out.append(data[i:i + 4 + n])
        i += 4 + n
    return out


def expand_label(hash_, secret, label, length):
    full = b"tls13 " + label
    info = length.to_bytes(2, "big") + bytes([len(full)]) + full + b"\x00"
    out, block, counter = b"", b"", 1
    while len(out) < length:
        block = hmac.new(secret, block + info + bytes([counter]), hash_).digest()
        out += block
        counter += 1
    return out[:length]


def opener(suite, secret):
    _, key_len, hash_ = SUITES[suite]
    key, iv = expand_label(hash_, secret, b"key", key_len), expand_label(hash_, secret, b"iv", 12)
    aead = ChaCha20Poly1305(key) if suite == 0x1303 else AESGCM(key)
    seq = [0]

    def open_(record):
        nonce = bytes(a ^ b for a, b in zip(iv, seq[0].to_bytes(12, "big")))
        seq[0] += 1
        plain = aead.decrypt(nonce, record[5:], record[:5]).rstrip(b"\x00")
        return plain[-1], plain[:-1]
    return open_


def analyse(client, server, keylog):
    """Splits the capture and decrypts it: the vector's fields and expectations."""
    crecs = [r for r in records(client)]
    hellos, kept_client = [], b""
    for n, (kind, rec, end) in enumerate(crecs):
        kept_client += rec
        if kind == 22:
            hellos = [m for m in messages([r[5:] for k, r, _ in crecs[:n + 1] if k == 22])]
            if len(hellos) == 2 or (len(hellos) == 1 and not is_hrr(server)):
                tail = crecs[n + 1][1][:5 + 16] if n + 1 < len(crecs) else b""
                kept_client += tail
                break
    srecs = records(server)
    plain = messages([r[5:] for k, r, _ in srecs if k == 22])
    server_hellos = plain
    first_encrypted = next(i for i, (k, _, _) in enumerate(srecs) if k == 23)
    plaintext_end = srecs[first_encrypted][2] - len(srecs[first_encrypted][1])
    sh = server_hellos[-1]
    suite = int.from_bytes(sh[4 + 2 + 32 + 1 + sh[4 + 2 + 32]:][:2], "big")
    random = hellos[0][6:38]
    secrets = {}
    for line in keylog.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        label, rnd, value = line.split()
        if bytes.fromhex(rnd) == random:
            secrets[label] = value
    flight = opener(suite, bytes.fromhex(secrets["SERVER_HANDSHAKE_TRAFFIC_SECRET"]))
    fragments, flight_end, index = [], None, first_encrypted
    while flight_end is None:
        kind, rec, end = srecs[index]
        index += 1
        if kind != 23:
            continue
        inner, content = flight(rec)
        fragments.append(content)
        if any(m[0] == 20 for m in messages(fragments)):
            flight_end = end
    decrypted = messages(fragments)
    transcript = [hellos[0]] + ([server_hellos[0], hellos[1]] if len(hellos) == 2 else []) + [server_hellos[-1]]
    variants = tampered_flights(suite, bytes.fromhex(secrets["SERVER_HANDSHAKE_TRAFFIC_SECRET"]), transcript, decrypted)
    scheme = next(int.from_bytes(m[4:6], "big") for m in decrypted if m[0] == 15)
    requested = any(m[0] == 13 for m in decrypted)
    certificate = next(m for m in decrypted if m[0] == 11)
    chain, at = [], 4 + 1 + certificate[4] + 3
    while at < len(certificate):
        n = int.from_bytes(certificate[at:at + 3], "big")
        chain.append(certificate[at + 3:at + 3 + n])
        at += 3 + n
        at += 2 + int.from_bytes(certificate[at:at + 2], "big")
    app = opener(suite, bytes.fromhex(secrets["SERVER_TRAFFIC_SECRET_0"]))
    tickets, server_end = [], None
    for kind, rec, end in srecs[index:]:
        inner, content = app(rec)
        if inner != 22:
            server_end = end
            break
        for m in messages([content]):
            if m[0] == 4:
                body = m[4:]
                nonce_len = body[8]
                at = 9 + nonce_len
                tickets.append(body[at + 2:at + 2 + int.from_bytes(body[at:at + 2], "big")])
    assert server_end is not None, "no application data after the tickets"
    return dict(client=kept_client, server=server[:server_end], suite=suite, secrets=secrets, plaintext_end=plaintext_end,
                flight_end=flight_end - plaintext_end, scheme=scheme, requested=requested, tickets=tickets,
                hrr=len(hellos) == 2, variants=variants, chain=chain)


def sealer(suite, secret):
    _, key_len, hash_ = SUITES[suite]
    key, iv = expand_label(hash_, secret, b"key", key_len), expand_label(hash_, secret, b"iv", 12)
    aead = ChaCha20Poly1305(key) if suite == 0x1303 else AESGCM(key)

    def seal(plaintext):
        out = b""
        for seq, at in enumerate(range(0, len(plaintext), 16384)):
            inner = plaintext[at:at + 16384] + b"\x16"
            header = b"\x17\x03\x03" + (len(inner) + 16).to_bytes(2, "big")
            nonce = bytes(a ^ b for a, b in zip(iv, seq.to_bytes(12, "big")))
            out += header + aead.encrypt(nonce, inner, header)
        return out
    return seal


def handshake(kind, body):
    return bytes([kind]) + len(body).to_bytes(3, "big") + body


def sign_with_fresh_key(scheme, content):
    """A signature of `content` under `scheme` by a key nobody pinned."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
    if scheme == 0x0807:
        return ed25519.Ed25519PrivateKey.generate().sign(content)
    if scheme == 0x0808:
        from cryptography.hazmat.primitives.asymmetric import ed448
        return ed448.Ed448PrivateKey.generate().sign(content)
    if scheme == 0x0403:
        return ec.generate_private_key(ec.SECP256R1()).sign(content, ec.ECDSA(hashes.SHA256()))
    if scheme == 0x0503:
        return ec.generate_private_key(ec.SECP384R1()).sign(content, ec.ECDSA(hashes.SHA384()))
    # rsa_pss_rsae_* and rsa_pss_pss_*: a plain RSA key signs the same PSS way.
    digest = {0x0804: hashes.SHA256(), 0x0805: hashes.SHA384(), 0x0806: hashes.SHA512(),
              0x0809: hashes.SHA256(), 0x080A: hashes.SHA384(), 0x080B: hashes.SHA512()}[scheme]
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.sign(content, padding.PSS(mgf=padding.MGF1(digest), salt_length=digest.digest_size), digest)


def tampered_flights(suite, secret, transcript, flight):
    """The flight re-encrypted under the same keys, tampered three ways: CertificateVerify signed by
    another key (the genuine chain shown by someone without its key), the rogue chain with the
    genuine signature, and Finished altered."""
    _, _, hash_ = SUITES[suite]
    if len(transcript) == 4:
        transcript = [handshake(254, hash_(transcript[0]).digest())] + transcript[1:]
    seal = sealer(suite, secret)
    cert_at = next(i for i, m in enumerate(flight) if m[0] == 11)
    scheme = int.from_bytes(flight[cert_at + 1][4:6], "big")
    content = b"\x20" * 64 + b"TLS 1.3, server CertificateVerify\x00" + hash_(b"".join(transcript + flight[:cert_at + 1])).digest()
    signature = sign_with_fresh_key(scheme, content)
    resigned = handshake(15, scheme.to_bytes(2, "big") + len(signature).to_bytes(2, "big") + signature)
    rogue_signed = flight[:cert_at + 1] + [resigned] + flight[cert_at + 2:]

    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding
    with open(HERE + "/rogue-leaf.chain.pem", "rb") as f:
        rogue = [c.public_bytes(Encoding.DER) for c in x509.load_pem_x509_certificates(f.read())]
    entries = b"".join(len(c).to_bytes(3, "big") + c + b"\x00\x00" for c in rogue)
    rogue_certificate = handshake(11, b"\x00" + len(entries).to_bytes(3, "big") + entries)
    rogue_chain = flight[:cert_at] + [rogue_certificate] + flight[cert_at + 1:]

    finished = flight[-1]
    altered = flight[:-1] + [finished[:-1] + bytes([finished[-1] ^ 1])]
    return dict(rogueSigned=seal(b"".join(rogue_signed)), rogueChain=seal(b"".join(rogue_chain)),
                finishedAltered=seal(b"".join(altered)), resealed=seal(b"".join(flight)))


def is_hrr(server):
    sh = messages([r[5:] for k, r, _ in records(server) if k == 22])
    hrr_random = hashlib.sha256(b"HelloRetryRequest").digest()
    return any(m[0] == 2 and m[6:38] == hrr_random for m in sh)


GENERATED = tempfile.mkdtemp()


def generate_leaf(name, *genpkey):
    """A leaf for api.pinproxy.test under the fixture intermediate, with a key type no fixture has
    (written to a temporary directory; the vector keeps the chain the server sent)."""
    key, cert = "%s/%s.key.pem" % (GENERATED, name), "%s/%s.pem" % (GENERATED, name)
    subprocess.run(["openssl", "genpkey", *genpkey, "-out", key], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ext = GENERATED + "/san.ext"
    with open(ext, "w") as f:
        f.write("subjectAltName=DNS:api.pinproxy.test\n")
    request = subprocess.run(["openssl", "req", "-new", "-key", key, "-subj", "/CN=api.pinproxy.test"], check=True, capture_output=True).stdout
    subprocess.run(["openssl", "x509", "-req", "-days", "3650", "-CA", HERE + "/good-intermediate.pem", "-CAkey",
                    HERE + "/good-intermediate.key.pem", "-set_serial", "7", "-extfile", ext, "-out", cert],
                   input=request, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def s_server(*args, cert):
    port = free_port()
    where = GENERATED if cert.startswith("generated-") else HERE
    proc = subprocess.Popen(
        ["openssl", "s_server", "-accept", "127.0.0.1:%d" % port, "-www", "-quiet",
         "-cert", "%s/%s.pem" % (where, cert), "-key", "%s/%s.key.pem" % (where, cert),
         "-cert_chain", "%s/good-intermediate.pem" % HERE, *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("s_server did not start")


def s_client(*args):
    def run(port, keylog):
        proc = subprocess.Popen(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-CAfile", HERE + "/good-root.pem",
                                 "-servername", HOST, "-tls1_3", "-ign_eof", "-keylogfile", keylog, *args],
                                stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        proc.stdin.write(b"GET / HTTP/1.0\r\n\r\n")
        proc.stdin.flush()
        time.sleep(1)
        proc.stdin.close()
        proc.wait(15)
    return run


def curl(*args):
    def run(port, keylog):
        subprocess.run(["curl", "-sS", "-o", "/dev/null", "--tlsv1.3", "--cacert", HERE + "/good-root.pem",
                        "--resolve", "%s:%d:127.0.0.1" % (HOST, port), *args, "https://%s:%d/" % (HOST, port)],
                       env=dict(os.environ, SSLKEYLOGFILE=keylog), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=15)
    return run


def python_ssl(ciphers=None):
    import ssl

    def run(port, keylog):
        ctx = ssl.create_default_context(cafile=HERE + "/good-root.pem")
        ctx.minimum_version = ssl.TLSVersion.TLSv1_3
        ctx.keylog_filename = keylog
        with socket.create_connection(("127.0.0.1", port)) as raw, ctx.wrap_socket(raw, server_hostname=HOST) as tls:
            tls.sendall(b"GET / HTTP/1.0\r\nHost: api.pinproxy.test\r\n\r\n")
            while tls.recv(65536):
                pass
    return run


def capture(server_args, cert, client):
    proc, port = s_server(*server_args, cert=cert)
    try:
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        result = []
        thread = threading.Thread(target=relay_one, args=(listener, port, result), daemon=True)
        thread.start()
        with tempfile.TemporaryDirectory() as tmp:
            keylog = tmp + "/keys.log"
            client(listener.getsockname()[1], keylog)
            thread.join(15)
            with open(keylog) as f:
                return analyse(result[0][0], result[0][1], f.read())
    finally:
        proc.terminate()
        proc.wait(5)


CASES = [
    ("opensslAES128RSA", "openssl s_client -ciphersuites TLS_AES_128_GCM_SHA256, RSA 2048 leaf (rsa_pss_rsae_sha256)", "leaf-rsa2048",
     ["-ciphersuites", "TLS_AES_128_GCM_SHA256"], s_client()),
    ("curlAES256ECDSA", "curl --tls13-ciphers TLS_AES_256_GCM_SHA384, EC P-256 leaf (ecdsa_secp256r1_sha256)", "leaf-ec256",
     ["-ciphersuites", "TLS_AES_256_GCM_SHA384"], curl("--tls13-ciphers", "TLS_AES_256_GCM_SHA384")),
    ("pythonChaChaECDSA", "Python ssl, server -ciphersuites TLS_CHACHA20_POLY1305_SHA256, EC P-256 leaf", "leaf-ec256",
     ["-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"], python_ssl()),
    ("pythonHRR", "Python ssl (x25519 key share first) vs s_server -groups secp384r1: HelloRetryRequest, RSA 2048 leaf", "leaf-rsa2048",
     ["-groups", "secp384r1"], python_ssl()),
    ("curlHRRChaCha", "curl vs s_server -groups secp384r1 -ciphersuites TLS_CHACHA20_POLY1305_SHA256: HelloRetryRequest, EC leaf", "leaf-ec256",
     ["-groups", "secp384r1", "-ciphersuites", "TLS_CHACHA20_POLY1305_SHA256"], curl()),
    ("opensslCertificateRequest", "openssl s_client vs s_server -verify 1: CertificateRequest, the client sends no certificate", "leaf-ec256",
     ["-verify", "1"], s_client()),
    ("opensslEd25519", "openssl s_client, Ed25519 leaf (ed25519)", "leaf-ed25519", [], s_client()),
    ("opensslRSAPSSKey", "openssl s_client, a generated RSASSA-PSS-key leaf (rsa_pss_pss_sha256)", "generated-rsa-pss",
     [], s_client()),
    ("opensslP384", "openssl s_client, a generated EC P-384 leaf (ecdsa_secp384r1_sha384)", "generated-ec384", [], s_client()),
    ("opensslEd448", "openssl s_client, a generated Ed448 leaf (ed448)", "generated-ed448", [], s_client()),
]


def main():
    generate_leaf("generated-rsa-pss", "-algorithm", "RSA-PSS", "-pkeyopt", "rsa_keygen_bits:2048")
    generate_leaf("generated-ec384", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384")
    generate_leaf("generated-ed448", "-algorithm", "ED448")
    print("// Captured by Tests/TLSInspectionTests/Fixtures/capture-tls13.py: real TLS 1.3 clients writing a key")
    print("// log against openssl s_server with the fixture certificates, through a recording relay on 127.0.0.1.")
    print("// The secrets belong to throwaway loopback test servers. Expectations come from the script's own")
    print("// decryption (Python `cryptography`), not from pinproxy's code.")
    print()
    print("public struct TLS13Capture: Sendable {")
    print("    public let name: String")
    print("    public let leaf: String                  // fixture whose certificate the server sent (generated-*: none)")
    print("    public let suite: UInt16")
    print("    public let chain: [String]               // base64 DER, the chain the script decrypted, leaf first")
    print("    public let client: String                // base64: client bytes through the (second) ClientHello record, + 21 bytes")
    print("    public let server: String                // base64: server bytes through the first application data record")
    print("    public let handshakeSecret: String       // hex SERVER_HANDSHAKE_TRAFFIC_SECRET")
    print("    public let trafficSecret: String         // hex SERVER_TRAFFIC_SECRET_0")
    print("    public let plaintextEnd: Int             // where the server's plaintext (ServerHello, CCS) ends")
    print("    public let flightEnd: Int                // just past the Finished record, counted from plaintextEnd")
    print("    public let scheme: UInt16")
    print("    public let certificateRequested: Bool")
    print("    public let helloRetry: Bool")
    print("    public let tickets: [String]             // hex")
    print("    // The flight re-encrypted by the script under the same keys (base64, from plaintextEnd on):")
    print("    public let resealed: String              // unchanged (checks the re-encryption itself)")
    print("    public let rogueSigned: String           // CertificateVerify signed by a fresh key of the leaf's type")
    print("    public let rogueChain: String            // rogue-leaf.chain.pem in place of the chain, genuine signature")
    print("    public let finishedAltered: String       // Finished's last byte flipped")
    print("}")
    print()
    print("public enum TLS13Vectors {")
    names = []
    for name, doc, cert, server_args, client in CASES:
        v = capture(server_args, cert, client)
        names.append(name)
        print("    /// %s." % doc)
        print("    public static let %s = TLS13Capture(" % name)
        print('        name: "%s", leaf: "%s", suite: 0x%04X,' % (name, cert, v["suite"]))
        print("        chain: [%s]," % ", ".join('"%s"' % base64.b64encode(c).decode() for c in v["chain"]))
        for field in ("client", "server"):
            text = base64.b64encode(v[field]).decode()
            print('        %s: """' % field)
            for i in range(0, len(text), 96):
                print("            " + text[i:i + 96])
            print('            """,')
        print('        handshakeSecret: "%s",' % v["secrets"]["SERVER_HANDSHAKE_TRAFFIC_SECRET"])
        print('        trafficSecret: "%s",' % v["secrets"]["SERVER_TRAFFIC_SECRET_0"])
        print("        plaintextEnd: %d, flightEnd: %d, scheme: 0x%04X, certificateRequested: %s, helloRetry: %s," % (
            v["plaintext_end"], v["flight_end"], v["scheme"], str(v["requested"]).lower(), str(v["hrr"]).lower()))
        print("        tickets: [%s]," % ", ".join('"%s"' % t.hex() for t in v["tickets"]))
        for n, field in enumerate(("resealed", "rogueSigned", "rogueChain", "finishedAltered")):
            text = base64.b64encode(v["variants"][field]).decode()
            print('        %s: """' % field)
            for i in range(0, len(text), 96):
                print("            " + text[i:i + 96])
            print('            """%s' % (")" if n == 3 else ","))
    print()
    print("    public static let all = [%s]" % ", ".join(names))
    print("}")


main()
