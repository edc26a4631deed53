#!/usr/bin/env python3
"""An unlogged leaf for the Certificate Transparency end-to-end tests, beside the PKI that
Tests/TLSInspectionTests/Fixtures/ct/make-ct-fixtures.py made in DIR: issued by DIR/<ca>.pem with
DIR/<ca>.key.pem for DNS:<name>, valid 90 days from two days ago, with no SCT anywhere. Writes
DIR/<out>.pem, DIR/<out>.key.pem and DIR/<out>.chain.pem (leaf + its CA).

Two uses: the interception root's everyday certificate (no one logs what it mints), and the
selective server's unlogged twin of a logged leaf (same name, so only CT tells them apart).

Usage: ct_leaf.py DIR CA NAME OUT. Needs `cryptography`. No network.
"""
import datetime, os, sys
from cryptography import x509
from cryptography.x509.oid import NameOID, ExtendedKeyUsageOID
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

directory, ca_name, name, out = sys.argv[1:5]
DAY = datetime.timedelta(days=1)
now = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)

with open(os.path.join(directory, ca_name + ".pem"), "rb") as f:
    ca_pem = f.read()
ca = x509.load_pem_x509_certificate(ca_pem)
with open(os.path.join(directory, ca_name + ".key.pem"), "rb") as f:
    ca_key = serialization.load_pem_private_key(f.read(), None)

key = ec.generate_private_key(ec.SECP256R1())
cert = (x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.subject).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - 2 * DAY).not_valid_after(now + 88 * DAY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, False, False, False, False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256()))
leaf_pem = cert.public_bytes(serialization.Encoding.PEM)
for suffix, data in ((".pem", leaf_pem), (".chain.pem", leaf_pem + ca_pem),
                     (".key.pem", key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                    serialization.NoEncryption()))):
    with open(os.path.join(directory, out + suffix), "wb") as f:
        f.write(data)
