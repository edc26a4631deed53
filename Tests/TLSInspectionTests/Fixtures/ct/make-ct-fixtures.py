#!/usr/bin/env python3
"""Makes the Certificate Transparency test PKI: test CT logs, a CA, and leaves whose SCTs are made
the real way (RFC 6962 §3.1): a precertificate carrying the poison extension is "submitted" to the
test logs, each log signs the precertificate entry (issuer key hash + the TBSCertificate without
the poison), and the final certificate carries those SCTs in its SCT-list extension.

    logs    operator "Test Operator A": a1 (EC P-256, usable), a2 (RSA 2048, usable)
            operator "Test Operator B": b1 (EC P-256, usable), b2 (EC P-256, retired 30 days
                                        before the SCTs), b3 (EC P-256, pending)
            unlisted (EC P-256): in no list
    CA      ct-root (EC P-256), and interception-root (EC P-256: the root no one logs for, which
            here logs anyway)
    leaves  (all EC P-256, SAN DNS:<name>.ct.pinproxy.test)
      two-operators        90 days, SCTs a1 + b1            compliant
      three-long           398 days, SCTs a1 + a2 + b1      compliant
      two-long             398 days, SCTs a1 + b1           too few for the lifetime
      one-operator         90 days, SCTs a1 + a2            one operator only
      no-sct               90 days, no SCT                  (its TLS-extension SCTs: no-sct.tls-scts.bin)
      wrong-cert           90 days, a1 + b1 where b1's SCT is two-operators' (signed for another certificate)
      future               90 days, a1 + b1 where b1's timestamp is 10 years ahead
      retired-log          90 days, a1 + b2 (b2 retired before the SCT)
      unlisted-log         90 days, a1 + unlisted
      interception-logged  90 days, issued by interception-root, SCTs a1 + b1

For each leaf: <name>.pem, <name>.key.pem, <name>.chain.pem (leaf + its CA), <name>.precert.pem
(the poisoned precertificate the logs saw). SCTs delivered by TLS extension for no-sct (X.509
entry, a1 + b1): no-sct.tls-scts.bin (the SignedCertificateTimestampList), no-sct.serverinfo.pem
(openssl s_server -serverinfo, TLS 1.2 ServerHello) and no-sct.serverinfo-v2.pem (also TLS 1.3's
CertificateEntry). SCTs stapled in OCSP for no-sct (X.509 entry, a2 + b1): no-sct.ocsp.der (a good
OCSPResponse signed by ct-root, the SCTs in its SingleResponse's extension 1.3.6.1.4.1.11129.2.4.5;
openssl s_server -status_file) and no-sct.ocsp-scts.bin (the list alone). log_list.json: Google's v3
log-list schema for a1, a2, b1, b2, b3. expected.txt: per leaf and delivery (embedded, tls, ocsp),
the SCTs as log id (hex), timestamp (ms) and whether its signature is good, for the tests.

Usage: make-ct-fixtures.py [--out DIR] [--now UNIX_SECONDS]. Without --out it rewrites this
directory. Certificates are dated from --now (default: the current time): the committed ones expire,
so tests that need a currently valid chain run this script into a temporary directory.
Needs Python 3 and `cryptography` (48). No network.
"""
import argparse, base64, datetime, hashlib, json, os
from cryptography import x509
from cryptography.x509 import ocsp
from cryptography.x509.oid import NameOID, ExtendedKeyUsageOID, ObjectIdentifier
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa, padding

SCT_LIST_OID = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.2")
OCSP_SCT_LIST_OID = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.5")
POISON_OID = ObjectIdentifier("1.3.6.1.4.1.11129.2.4.3")
DAY = datetime.timedelta(days=1)


# --- DER, only as much as removing one extension from a TBSCertificate needs ---

def der_read(data, at):
    """(tag, header length, content length) of the TLV at `at`."""
    tag = data[at]
    first = data[at + 1]
    if first < 0x80:
        return tag, 2, first
    count = first & 0x7F
    return tag, 2 + count, int.from_bytes(data[at + 2:at + 2 + count], "big")


def der_length(n):
    if n < 0x80:
        return bytes([n])
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(raw)]) + raw


def der_tlv(tag, content):
    return bytes([tag]) + der_length(len(content)) + content


def der_children(data):
    out, at = [], 0
    while at < len(data):
        tag, header, length = der_read(data, at)
        out.append((tag, data[at:at + header + length], data[at + header:at + header + length]))
        at += header + length
    return out


def der_oid(oid):
    parts = [int(p) for p in oid.dotted_string.split(".")]
    body = bytes([40 * parts[0] + parts[1]])
    for p in parts[2:]:
        chunk = [p & 0x7F]
        p >>= 7
        while p:
            chunk.insert(0, 0x80 | (p & 0x7F))
            p >>= 7
        body += bytes(chunk)
    return der_tlv(0x06, body)


def tbs_without_extension(tbs, oid):
    """The TBSCertificate re-encoded without the extension `oid` (RFC 6962 §3.2's precert TBS)."""
    tag, header, length = der_read(tbs, 0)
    fields = der_children(tbs[header:header + length])
    wanted = der_oid(oid)
    out = b""
    removed = False
    for ftag, whole, content in fields:
        if ftag == 0xA3:  # [3] EXPLICIT Extensions
            (_, _, seq), = der_children(content)
            kept = []
            for _, ext, ext_content in der_children(seq):
                if ext_content.startswith(wanted):
                    removed = True
                else:
                    kept.append(ext)
            whole = der_tlv(0xA3, der_tlv(0x30, b"".join(kept)))
        out += whole
    assert removed, "extension not found"
    return der_tlv(tag, out)


def ocsp_with_single_extension(response_der, extension_der, ca_key):
    """An OCSPResponse (RFC 6960 §4.2.1) with `extension_der` added to its one SingleResponse's
    singleExtensions, its BasicOCSPResponse signed again with `ca_key` (ECDSA with SHA-256):
    `cryptography` builds only responseExtensions."""
    (_, _, response), = der_children(response_der)
    status, (_, _, response_bytes) = der_children(response)[0], der_children(response)[1]
    (_, _, inner), = der_children(response_bytes)
    response_type, (_, _, basic_der) = der_children(inner)
    (_, _, basic), = der_children(basic_der)
    tbs, algorithm, _signature, *certs = der_children(basic)
    fields = der_children(tbs[2])
    out = b""
    for tag, whole, content in fields:
        if tag == 0x30:  # responses: the only SEQUENCE in a ResponseData (RFC 6960 §4.2.1)
            (_, _, single), = der_children(content)
            parts = [p[1] for p in der_children(single)]
            parts.append(der_tlv(0xA1, der_tlv(0x30, extension_der)))
            whole = der_tlv(0x30, der_tlv(0x30, b"".join(parts)))
        out += whole
    new_tbs = der_tlv(0x30, out)
    signature = ca_key.sign(new_tbs, ec.ECDSA(hashes.SHA256()))
    new_basic = der_tlv(0x30, new_tbs + algorithm[1] + der_tlv(0x03, b"\x00" + signature) + b"".join(c[1] for c in certs))
    new_inner = der_tlv(0x30, response_type[1] + der_tlv(0x04, new_basic))
    return der_tlv(0x30, status[1] + der_tlv(0xA0, new_inner))


# --- RFC 6962 structures ---

def u(n, size):
    return n.to_bytes(size, "big")


def vector(data, length_bytes):
    return u(len(data), length_bytes) + data


def signed_data(timestamp_ms, entry_type, entry, extensions=b""):
    """RFC 6962 §3.2: the digitally-signed struct of an SCT."""
    return (bytes([0, 0]) + u(timestamp_ms, 8) + u(entry_type, 2) + entry + vector(extensions, 2))


class Log:
    def __init__(self, name, key):
        self.name, self.key = name, key
        self.spki = key.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        self.log_id = hashlib.sha256(self.spki).digest()

    def sct(self, timestamp_ms, entry_type, entry):
        """A v1 SCT (RFC 6962 §3.2) over the entry, as its TLS encoding."""
        data = signed_data(timestamp_ms, entry_type, entry)
        if isinstance(self.key, ec.EllipticCurvePrivateKey):
            signature, algorithm = self.key.sign(data, ec.ECDSA(hashes.SHA256())), 3
        else:
            signature, algorithm = self.key.sign(data, padding.PKCS1v15(), hashes.SHA256()), 1
        return (bytes([0]) + self.log_id + u(timestamp_ms, 8) + vector(b"", 2)
                + bytes([4, algorithm]) + vector(signature, 2))


def sct_list(scts):
    return vector(b"".join(vector(s, 2) for s in scts), 2)


def precert_entry(issuer_spki, tbs):
    return hashlib.sha256(issuer_spki).digest() + vector(tbs, 3)


def x509_entry(cert_der):
    return vector(cert_der, 3)


def pem(obj):
    return obj.public_bytes(serialization.Encoding.PEM)


def key_pem(key):
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", default=os.path.dirname(os.path.abspath(__file__)))
    parser.add_argument("--now", type=int, default=None)
    args = parser.parse_args()
    now = datetime.datetime.fromtimestamp(args.now if args.now is not None else int(datetime.datetime.now(datetime.timezone.utc).timestamp()), datetime.timezone.utc).replace(microsecond=0)
    out = args.out
    os.makedirs(out, exist_ok=True)

    def write(name, data):
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)

    logs = {
        "a1": Log("a1", ec.generate_private_key(ec.SECP256R1())),
        "a2": Log("a2", rsa.generate_private_key(65537, 2048)),
        "b1": Log("b1", ec.generate_private_key(ec.SECP256R1())),
        "b2": Log("b2", ec.generate_private_key(ec.SECP256R1())),
        "b3": Log("b3", ec.generate_private_key(ec.SECP256R1())),
        "unlisted": Log("unlisted", ec.generate_private_key(ec.SECP256R1())),
    }
    for log in logs.values():
        write(f"log-{log.name}.key.pem", key_pem(log.key))
        write(f"log-{log.name}.pub.der", log.spki)

    def root(name, cn):
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, "pinproxy tests"), x509.NameAttribute(NameOID.COMMON_NAME, cn)])
        cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number()).not_valid_before(now - 365 * DAY).not_valid_after(now + 36500 * DAY)
                .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
                .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
                .sign(key, hashes.SHA256()))
        write(f"{name}.pem", pem(cert))
        write(f"{name}.key.pem", key_pem(key))
        return cert, key

    ca = root("ct-root", "pinproxy CT test root")
    interception = root("interception-root", "pinproxy CT interception root")

    sct_time = int((now - DAY).timestamp()) * 1000  # the logs saw the precertificates a day ago
    future_time = int((now + 3650 * DAY).timestamp()) * 1000
    retired_at = now - DAY - 30 * DAY

    def leaf_builder(name, days, issuer, key):
        cert, _ = issuer
        return (x509.CertificateBuilder()
                .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{name}.ct.pinproxy.test")]))
                .issuer_name(cert.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
                .not_valid_before(now - 2 * DAY).not_valid_after(now - 2 * DAY + days * DAY)
                .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
                .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
                .add_extension(x509.SubjectAlternativeName([x509.DNSName(f"{name}.ct.pinproxy.test")]), critical=False)
                .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(cert.public_key()), critical=False))

    expected = []
    made = {}

    def leaf(name, days, signers, issuer=ca, borrowed=None):
        """signers: (log, timestamp) pairs; borrowed: (leaf name, index) of an SCT to copy instead."""
        cert_ca, ca_key = issuer
        key = ec.generate_private_key(ec.SECP256R1())
        builder = leaf_builder(name, days, issuer, key)
        precert = builder.add_extension(x509.UnrecognizedExtension(POISON_OID, b"\x05\x00"), critical=True).sign(ca_key, hashes.SHA256())
        tbs = tbs_without_extension(precert.tbs_certificate_bytes, POISON_OID)
        issuer_spki = cert_ca.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
        scts, facts = [], []
        for log, timestamp in signers:
            scts.append(log.sct(timestamp, 1, precert_entry(issuer_spki, tbs)))
            facts.append((log, timestamp, True))
        if borrowed:
            other, index = borrowed
            scts.append(made[other][0][index])
            log, timestamp, _ = made[other][1][index]
            facts.append((log, timestamp, False))
        if scts:
            value = der_tlv(0x04, sct_list(scts))
            builder = builder.add_extension(x509.UnrecognizedExtension(SCT_LIST_OID, value), critical=False)
        final = builder.sign(ca_key, hashes.SHA256())
        if scts:
            # The check the logs' promise rests on: the final certificate is the precertificate.
            assert tbs_without_extension(final.tbs_certificate_bytes, SCT_LIST_OID) == tbs
        write(f"{name}.pem", pem(final))
        write(f"{name}.key.pem", key_pem(key))
        write(f"{name}.chain.pem", pem(final) + pem(cert_ca))
        write(f"{name}.precert.pem", pem(precert))
        made[name] = (scts, facts, final)
        for log, timestamp, good in facts:
            expected.append(f"{name} embedded {log.log_id.hex()} {timestamp} {'good' if good else 'bad'}")
        if not facts:
            expected.append(f"{name} embedded none")
        return final

    a1, a2, b1, b2, unlisted = logs["a1"], logs["a2"], logs["b1"], logs["b2"], logs["unlisted"]
    leaf("two-operators", 90, [(a1, sct_time), (b1, sct_time)])
    leaf("three-long", 398, [(a1, sct_time), (a2, sct_time), (b1, sct_time)])
    leaf("two-long", 398, [(a1, sct_time), (b1, sct_time)])
    leaf("one-operator", 90, [(a1, sct_time), (a2, sct_time)])
    no_sct = leaf("no-sct", 90, [])
    leaf("wrong-cert", 90, [(a1, sct_time)], borrowed=("two-operators", 1))
    leaf("future", 90, [(a1, sct_time), (b1, future_time)])
    leaf("retired-log", 90, [(a1, sct_time), (logs["b2"], sct_time)])
    leaf("unlisted-log", 90, [(a1, sct_time), (unlisted, sct_time)])
    leaf("interception-logged", 90, [(a1, sct_time), (b1, sct_time)], issuer=interception)

    # SCTs by TLS extension (and OCSP): over the X.509 entry, the final certificate itself.
    entry = x509_entry(no_sct.public_bytes(serialization.Encoding.DER))
    tls_list = sct_list([a1.sct(sct_time, 0, entry), b1.sct(sct_time, 0, entry)])
    write("no-sct.tls-scts.bin", tls_list)
    for log in (a1, b1):
        expected.append(f"no-sct tls {log.log_id.hex()} {sct_time} good")
    extension = u(18, 2) + vector(tls_list, 2)
    b64 = base64.encodebytes(extension).decode()
    write("no-sct.serverinfo.pem", f"-----BEGIN SERVERINFO FOR signed_certificate_timestamp-----\n{b64}-----END SERVERINFO FOR signed_certificate_timestamp-----\n".encode())
    # SERVERINFOV2: a 4-byte context first. 0x1000 TLS 1.3 Certificate, 0x0100 TLS 1.2 ServerHello,
    # 0x0080 ClientHello, 0x0040 ignore on resumption (OpenSSL's SSL_EXT_* values).
    b64 = base64.encodebytes(u(0x11C0, 4) + extension).decode()
    write("no-sct.serverinfo-v2.pem", f"-----BEGIN SERVERINFOV2 FOR signed_certificate_timestamp-----\n{b64}-----END SERVERINFOV2 FOR signed_certificate_timestamp-----\n".encode())

    # SCTs stapled in an OCSP response (the singleExtensions of the leaf's SingleResponse), a2 + b1.
    ocsp_list = sct_list([logs["a2"].sct(sct_time, 0, entry), b1.sct(sct_time, 0, entry)])
    for log in (logs["a2"], b1):
        expected.append(f"no-sct ocsp {log.log_id.hex()} {sct_time} good")
    ca_cert, ca_key = ca
    plain = (ocsp.OCSPResponseBuilder()
             .add_response(cert=no_sct, issuer=ca_cert, algorithm=hashes.SHA1(), cert_status=ocsp.OCSPCertStatus.GOOD,
                           this_update=now - DAY, next_update=now + 6 * DAY, revocation_time=None, revocation_reason=None)
             .responder_id(ocsp.OCSPResponderEncoding.HASH, ca_cert).sign(ca_key, hashes.SHA256()))
    extension = der_tlv(0x30, der_oid(OCSP_SCT_LIST_OID) + der_tlv(0x04, der_tlv(0x04, ocsp_list)))
    stapled = ocsp_with_single_extension(plain.public_bytes(serialization.Encoding.DER), extension, ca_key)
    check = ocsp.load_der_ocsp_response(stapled)
    assert check.certificate_status == ocsp.OCSPCertStatus.GOOD and check.serial_number == no_sct.serial_number
    assert check.single_extensions.get_extension_for_oid(OCSP_SCT_LIST_OID)
    ca_cert.public_key().verify(check.signature, check.tbs_response_bytes, ec.ECDSA(hashes.SHA256()))
    write("no-sct.ocsp.der", stapled)
    write("no-sct.ocsp-scts.bin", ocsp_list)

    def stamp(when):
        return when.strftime("%Y-%m-%dT%H:%M:%SZ")

    def entry_for(log, description, state, state_time):
        return {
            "description": description,
            "log_id": base64.b64encode(log.log_id).decode(),
            "key": base64.b64encode(log.spki).decode(),
            "url": f"https://ct.pinproxy.test/{log.name}/",
            "mmd": 86400,
            "state": {state: {"timestamp": stamp(state_time)}},
            "temporal_interval": {"start_inclusive": stamp(now - 400 * DAY), "end_exclusive": stamp(now + 1000 * DAY)},
        }

    log_list = {
        "version": "1.0",
        "log_list_timestamp": stamp(now),
        "operators": [
            {"name": "Test Operator A", "email": ["ct-a@pinproxy.test"], "logs": [
                entry_for(a1, "Test Operator A 'a1' log", "usable", now - 300 * DAY),
                entry_for(a2, "Test Operator A 'a2' log", "usable", now - 300 * DAY),
            ], "tiled_logs": []},
            {"name": "Test Operator B", "email": ["ct-b@pinproxy.test"], "logs": [
                entry_for(b1, "Test Operator B 'b1' log", "usable", now - 300 * DAY),
                entry_for(b2, "Test Operator B 'b2' log", "retired", retired_at),
                entry_for(logs["b3"], "Test Operator B 'b3' log", "pending", now - 10 * DAY),
            ], "tiled_logs": []},
        ],
    }
    write("log_list.json", (json.dumps(log_list, indent=2) + "\n").encode())
    write("expected.txt", ("\n".join(expected) + "\n").encode())


if __name__ == "__main__":
    main()
