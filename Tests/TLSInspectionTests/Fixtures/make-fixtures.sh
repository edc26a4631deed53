#!/usr/bin/env bash
# Makes the test PKI that pinproxy's tests use, with the openssl CLI only, and records every
# certificate's pins as the openssl pipelines compute them (expected-pins.txt), so the tests compare
# pinproxy's own hashing with an independent computation.
#
#   good root (RSA 4096) ─→ good intermediate (EC P-384) ─→ leaves for *.pinproxy.test
#                                                           (RSA 2048, EC P-256, Ed25519, renewed
#                                                            same-key, other name, expired, IP 127.0.0.1)
#   rogue root (EC P-256) ─→ rogue leaf for api.pinproxy.test   (the attacker's CA the machine also trusts)
#   self-signed leaf for self.pinproxy.test                      (trust: pins-only)
#   backup key (EC P-256), public key only                       (file: pins)
#
# Run it from this directory; it rewrites everything but itself. Certificates are valid for 100
# years (the expired one ended in 2021), so the committed files do not age out.
set -euo pipefail
cd "$(dirname "$0")"
rm -f ./*.pem ./*.der ./*.srl ./*.cnf expected-pins.txt index.txt* serial* ./*.old
days=36500

key() {  # name type
  case $2 in
    rsa2048) openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:2048 -out "$1.key.pem" 2>/dev/null ;;
    rsa4096) openssl genpkey -algorithm RSA -pkeyopt rsa_keygen_bits:4096 -out "$1.key.pem" 2>/dev/null ;;
    p256)    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1.key.pem" ;;
    p384)    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-384 -out "$1.key.pem" ;;
    ed25519) openssl genpkey -algorithm ED25519 -out "$1.key.pem" ;;
  esac
}

ca_ext() { printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n' > ca.cnf; }
leaf_ext() { printf 'basicConstraints=critical,CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=%s\nsubjectKeyIdentifier=hash\nauthorityKeyIdentifier=keyid\n' "$1" > leaf.cnf; }

root() {  # name keytype cn
  key "$1" "$2"
  openssl req -x509 -new -key "$1.key.pem" -subj "/O=pinproxy tests/CN=$3" -days $days -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -addext "subjectKeyIdentifier=hash" -out "$1.pem"
}

issue() {  # name keytype-or-existing-key issuer cn ext-file [san]
  local name=$1 keytype=$2 issuer=$3 cn=$4
  [ -f "$keytype" ] && cp "$keytype" "$name.key.pem" || key "$name" "$keytype"
  openssl req -new -key "$name.key.pem" -subj "/O=pinproxy tests/CN=$cn" -out "$name.csr"
  openssl x509 -req -in "$name.csr" -CA "$issuer.pem" -CAkey "$issuer.key.pem" -CAcreateserial \
    -days $days -sha256 -extfile "$5" -out "$name.pem" 2>/dev/null
  rm -f "$name.csr"
}

root good-root rsa4096 "pinproxy good root"
ca_ext
issue good-intermediate p384 good-root "pinproxy good intermediate" ca.cnf
leaf_ext "DNS:api.pinproxy.test,DNS:*.api.pinproxy.test"
issue leaf-rsa2048 rsa2048 good-intermediate api.pinproxy.test leaf.cnf
issue leaf-ec256 p256 good-intermediate api.pinproxy.test leaf.cnf
issue leaf-ec256-renewed leaf-ec256.key.pem good-intermediate api.pinproxy.test leaf.cnf
issue leaf-rotated p256 good-intermediate api.pinproxy.test leaf.cnf
leaf_ext "DNS:ed.pinproxy.test"
issue leaf-ed25519 ed25519 good-intermediate ed.pinproxy.test leaf.cnf
leaf_ext "DNS:other.pinproxy.test"
issue leaf-other-name p256 good-intermediate other.pinproxy.test leaf.cnf
leaf_ext "IP:127.0.0.1"
issue leaf-ip p256 good-intermediate 127.0.0.1 leaf.cnf

# The expired leaf: `openssl ca` is the 3.0 CLI way to set explicit dates.
key leaf-expired p256
openssl req -new -key leaf-expired.key.pem -subj "/O=pinproxy tests/CN=api.pinproxy.test" -out leaf-expired.csr
touch index.txt; echo 1000 > serial
cat > expired-ca.cnf <<CNF
[ca]
default_ca = c
[c]
database = index.txt
serial = serial
new_certs_dir = .
certificate = good-intermediate.pem
private_key = good-intermediate.key.pem
default_md = sha256
policy = p
unique_subject = no
copy_extensions = none
[p]
organizationName = supplied
commonName = supplied
[x]
basicConstraints = critical,CA:FALSE
keyUsage = critical,digitalSignature
extendedKeyUsage = serverAuth
subjectAltName = DNS:api.pinproxy.test
CNF
openssl ca -batch -config expired-ca.cnf -extensions x -startdate 20200101000000Z -enddate 20210101000000Z \
  -in leaf-expired.csr -out leaf-expired.pem -notext 2>/dev/null
rm -f leaf-expired.csr 1000.pem index.txt* serial* expired-ca.cnf

root rogue-root p256 "rogue root"
ca_ext
leaf_ext "DNS:api.pinproxy.test,DNS:*.api.pinproxy.test"
issue rogue-leaf p256 rogue-root api.pinproxy.test leaf.cnf

key self-signed p256
openssl req -x509 -new -key self-signed.key.pem -subj "/CN=self.pinproxy.test" -days $days -sha256 \
  -addext "subjectAltName=DNS:self.pinproxy.test" -addext "basicConstraints=critical,CA:FALSE" \
  -addext "extendedKeyUsage=serverAuth" -out self-signed.pem

key backup p256
openssl pkey -in backup.key.pem -pubout -out backup.pub.pem
openssl pkey -in backup.key.pem -pubout -outform DER -out backup.pub.der
openssl x509 -in leaf-ec256.pem -outform DER -out leaf-ec256.der

# Chains as servers send them (leaf + intermediate).
for leaf in leaf-rsa2048 leaf-ec256 leaf-ec256-renewed leaf-rotated leaf-ed25519 leaf-other-name leaf-ip leaf-expired; do
  cat "$leaf.pem" good-intermediate.pem > "$leaf.chain.pem"
done
cat rogue-leaf.pem > rogue-leaf.chain.pem
# The attacker's trick: a forged chain with the genuine intermediate appended.
cat rogue-leaf.pem good-intermediate.pem > rogue-with-good-intermediate.chain.pem
cat good-root.pem rogue-root.pem > both-roots.pem
rm -f ./*.srl ca.cnf leaf.cnf

# Independent pins: the openssl pipeline docs/policy.md gives ("The workflow"), and the DER certificate hash.
for cert in good-root good-intermediate leaf-rsa2048 leaf-ec256 leaf-ec256-renewed leaf-rotated leaf-ed25519 \
            leaf-other-name leaf-ip leaf-expired rogue-root rogue-leaf self-signed; do
  spki=$(openssl x509 -in "$cert.pem" -pubkey -noout | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64)
  der=$(openssl x509 -in "$cert.pem" -outform DER | openssl dgst -sha256 -binary | base64)
  echo "$cert spki-sha256:$spki cert-sha256:$der" >> expected-pins.txt
done
spki=$(openssl pkey -pubin -in backup.pub.pem -outform DER | openssl dgst -sha256 -binary | base64)
echo "backup spki-sha256:$spki -" >> expected-pins.txt
echo "made $(ls ./*.pem | wc -l) PEM files"
