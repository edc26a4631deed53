#!/usr/bin/env bash
# What each check costs, in one run:  Benchmarks/checks.sh [TUNNELS=300] [INSTRUCTIONS=40]
# (Benchmarks/relay.sh runs it too, with its own binary, and folds the table into its report.)
#
# Builds release (or measures PINPROXY_BIN), makes the CT test PKI
# (Tests/TLSInspectionTests/Fixtures/ct/make-ct-fixtures.py) and serves its leaf (two embedded SCTs)
# from one upstream on 127.0.0.1 (Benchmarks/tls13_upstream.js, TLS 1.2 and 1.3, handshakes served
# concurrently; one process unless UPSTREAM_WORKERS says more). One pinproxy per row, every row with the same
# log list, trust and host; curl times CONNECT → first application byte (time_starttransfer −
# time_connect), the rows alternating in rounds of 20 (Benchmarks/rows.sh, shared with ct.sh and
# mirror.sh):
#   - no check, TLS 1.3 and TLS 1.2: the host unpinned (verify=unpinned), the baselines;
#   - probe: pinned, `mirror_checks: 0`, so a probe per CONNECT and nothing else (verify=probe-only);
#   - stream check: pinned, cache warm, curl --tls-max 1.2 (verify=probe+stream; the default mirror
#     connection is made and dropped when the server answers with TLS 1.2);
#   - key-log check: pinned, cache warm, `proxy.keylog` on a /dev/shm file curl writes
#     (SSLKEYLOGFILE; verify=probe+keylog);
#   - mirror check: pinned, cache warm, no key log (verify=probe+mirror);
#   - CT: the mirror row's rule under `ct: require` (verify=probe+mirror, ct=compliant).
# Then each row's policy again under callgrind for INSTRUCTIONS tunnels (0: skip): instructions
# per CONNECT, the figure the machine's load does not move. Fails loudly unless every tunnel got
# 200 and closed with its row's verify= and nothing was refused or warned about. Prints one
# markdown table (machine, load before and after, versions) and each check's cost against its
# baseline; ROWS_JSON=FILE writes the same figures there as JSON (Benchmarks/rows.py). Loopback
# only; every loop is bounded; the trap stops every process and removes the work directories.
set -euo pipefail
cd "$(dirname "$0")/.."
tunnels=${1:-300}
instructions=${2:-40}
source Benchmarks/rows.sh
keylogdir=$(mktemp -d -p /dev/shm pinproxy-bench-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work" "$keylogdir"' EXIT
python3 "$F/ct/make-ct-fixtures.py" --out "$work/ct" >/dev/null
leaf_pin=spki-sha256:$(openssl x509 -in "$work/ct/two-operators.pem" -pubkey -noout | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64)
start_upstream upstream "$work/ct/two-operators.key.pem" "$work/ct/two-operators.chain.pem" TLSv1.2
host=two-operators.ct.pinproxy.test

# row: name, pinned (yes|no), mirror_checks, ct, key log (yes|no), TLS (1.2|1.3), the verify= its tunnels close with
for row in none-13:no:1:off:no:1.3:unpinned none-12:no:1:off:no:1.2:unpinned probe:yes:0:off:no:1.3:probe-only \
           stream:yes:1:off:no:1.2:probe+stream keylog:yes:1:off:yes:1.3:probe+keylog mirror:yes:1:off:no:1.3:probe+mirror \
           ct:yes:1:require:no:1.3:probe+mirror; do
  IFS=: read -r name pinned mirrors ct withkeylog tls verify <<<"$row"
  rules="" keylogsetting="" clientkeylog=""
  [ "$pinned" = yes ] && rules="rules: [{ host: $host, pins: [\"$leaf_pin\"], mirror_checks: $mirrors, ct: $ct }]"
  if [ "$withkeylog" = yes ]; then
    keylogsetting="keylog: { path: $keylogdir/keylog, wait: 100ms }"
    clientkeylog=$keylogdir/keylog
  fi
  cat > "$work/$name.yaml" <<YAML
version: 1
proxy:
  allowed_ports: [$upstream]
  deny_destinations: [link-local]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 0
  ct_log_list: $work/ct/log_list.json
  $keylogsetting
defaults: { unpinned: allow, trust: "ca-file:$work/ct/ct-root.pem", require_backup: off, ct: off }
resolve:
  $host: 127.0.0.1
$rules
YAML
  add_row "$name" "$verify" "https://$host:$upstream/index.html" "$work/ct/ct-root.pem" "$clientkeylog" --tls-max "$tls"
done
row_check() {  # the CT row's decision lines say ct=compliant
  [ "$1" != ct ] || grep -E 'event=tunnel_allowed' "$work/$1.log" | grep -v ' ct=compliant' || true
}
run_rows
check_rows
[ "$instructions" -eq 0 ] || count_instructions "$instructions"
print_rows "tunnel to the same host, first application byte" \
  "none-13=no check, TLS 1.3 (unpinned: verify=unpinned)" \
  "none-12=no check, TLS 1.2 (unpinned: verify=unpinned)" \
  "probe=probe: pinned, \`mirror_checks: 0\` (a probe per CONNECT), TLS 1.3: probe-only" \
  "stream=stream check: pinned, cache warm, TLS 1.2: probe+stream" \
  "keylog=key-log check: pinned, cache warm, TLS 1.3, curl writes the key log: probe+keylog" \
  "mirror=mirror check: pinned, cache warm, TLS 1.3, no key log: probe+mirror" \
  "ct=CT: the mirror row under \`ct: require\`: probe+mirror, ct=compliant" -- \
  "none-13:probe:the probe (TLS 1.3) − no check" \
  "none-12:stream:the stream check (TLS 1.2) − no check" \
  "none-13:keylog:the key-log check (TLS 1.3) − no check" \
  "none-13:mirror:the mirror check (TLS 1.3) − no check" \
  "mirror:ct:CT − the mirror row"
