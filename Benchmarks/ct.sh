#!/usr/bin/env bash
# What Certificate Transparency costs per CONNECT:  Benchmarks/ct.sh [TUNNELS=300]
#
# Builds release, makes the CT test PKI (Tests/TLSInspectionTests/Fixtures/ct/make-ct-fixtures.py,
# into the work directory, dated now) and serves its leaf with two embedded SCTs from two test
# operators on one TLS 1.3 upstream on 127.0.0.1 (Benchmarks/tls13_upstream.js, handshakes served
# concurrently). Five pinproxy processes on it: the host unpinned with `ct: off` (pinproxy does not
# look at it: verify=unpinned), unpinned under `ct: require` with the verification cache warm and
# with `verify_cache_ttl: 0s` (pinproxy now probes the host and mirrors its TLS 1.3 tunnels:
# verify=probe+mirror), and the host pinned without and with `ct: require` (cache warm). Times
# CONNECT → first application byte of a TLS 1.3 tunnel with curl (no key log; time_starttransfer −
# time_connect), alternating the proxies in rounds of 20, TUNNELS per proxy (rounded up to 20, after 2
# uncounted ones); counts each proxy's CPU (schedstat of every thread) and the upstream's server flights per tunnel.
# Fails loudly unless every tunnel got 200 and closed with the expected verify= and every decision
# line under ct said ct=compliant. Prints a markdown table with the machine, the load and the tool
# versions (Benchmarks/rows.sh and rows.py, shared with mirror.sh and checks.sh). Loopback only; every loop is bounded; the trap stops every process and removes the work
# directory.
set -euo pipefail
cd "$(dirname "$0")/.."
tunnels=${1:-300}
source Benchmarks/rows.sh
python3 "$F/ct/make-ct-fixtures.py" --out "$work/ct" >/dev/null
leaf_pin=spki-sha256:$(openssl x509 -in "$work/ct/two-operators.pem" -pubkey -noout | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64)
start_upstream upstream "$work/ct/two-operators.key.pem" "$work/ct/two-operators.chain.pem"
host=two-operators.ct.pinproxy.test

# kind: name, pinned (yes|no), ct, verify_cache_ttl, the verify= every tunnel must close with
for kind in off:no:off:60s:unpinned ct-warm:no:require:60s:probe+mirror ct-cold:no:require:0s:probe+mirror \
            pins:yes:off:60s:probe+mirror pins-ct:yes:require:60s:probe+mirror; do
  IFS=: read -r name pinned ct ttl verify <<<"$kind"
  rules=""
  [ "$pinned" = yes ] && rules="rules: [{ host: $host, pins: [\"$leaf_pin\"] }]"
  cat > "$work/$name.yaml" <<YAML
version: 1
proxy:
  allowed_ports: [$upstream]
  deny_destinations: [link-local]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 0
  verify_cache_ttl: $ttl
  ct_log_list: $work/ct/log_list.json
defaults: { unpinned: allow, trust: "ca-file:$work/ct/ct-root.pem", require_backup: off, ct: $ct }
resolve:
  $host: 127.0.0.1
$rules
YAML
  add_row "$name" "$verify" "https://$host:$upstream/index.html" "$work/ct/ct-root.pem"
done
row_check() {  # every decision line under ct: require says ct=compliant
  case $1 in ct-*|pins-ct) grep -E 'event=tunnel_(allowed|unpinned|bypassed)' "$work/$1.log" | grep -v ' ct=compliant' || true ;; esac
}
run_rows
check_rows
print_rows "TLS 1.3 tunnel, no key log" \
  "off=unpinned, \`ct: off\`: not looked at (verify=unpinned)" \
  "ct-warm=unpinned, \`ct: require\`, cache warm: probe+mirror, ct=compliant" \
  "ct-cold=unpinned, \`ct: require\`, \`verify_cache_ttl: 0s\` (a probe per CONNECT): probe+mirror" \
  "pins=pinned, \`ct: off\`, cache warm: probe+mirror" \
  "pins-ct=pinned, \`ct: require\`, cache warm: probe+mirror, ct=compliant" -- \
  "off:ct-warm:CT on an unpinned host, cache warm − not looked at" \
  "off:ct-cold:CT on an unpinned host, a probe per CONNECT − not looked at" \
  "pins:pins-ct:pins and CT − pins"
