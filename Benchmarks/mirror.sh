#!/usr/bin/env bash
# What the mirror check costs:  Benchmarks/mirror.sh [TUNNELS=300]
#
# Builds release, starts one TLS 1.3 upstream on 127.0.0.1 (Benchmarks/tls13_upstream.js: Node's
# OpenSSL, handshakes served concurrently; openssl s_server serves one connection at a time and
# deadlocks with the mirror, see docs/performance.md) and four pinproxy processes on it with the
# same pinned rule and no key log: `mirror_checks: 0` (verify=probe-only; it probes every CONNECT,
# the probe being the tunnel's only check), `1` and `2` (verify=probe+mirror) with the verification
# cache at its default (60 s: after the first CONNECT no probe), and `1` with `verify_cache_ttl: 0s`
# (a probe per CONNECT, as with 0 mirrors). Times CONNECT → first application byte of a TLS 1.3
# tunnel with curl (no key log; time_starttransfer − time_connect), alternating the proxies in
# rounds of 20, TUNNELS per proxy (rounded up to 20, after 2 uncounted ones); counts each proxy's
# CPU (schedstat of every thread) and the upstream's server flights (a mirror costs one) per tunnel. Fails loudly unless
# every tunnel got 200 and closed with the expected verify= and no proxy refused, suspected,
# quarantined or warned about anything. Prints a markdown table with the machine, the load and the
# tool versions (Benchmarks/rows.sh and rows.py, shared with ct.sh and checks.sh). Loopback only;
# every loop is bounded; the trap stops every process and removes the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."
tunnels=${1:-300}
source Benchmarks/rows.sh
start_upstream upstream "$F/leaf-ec256.key.pem" "$F/leaf-ec256.chain.pem"

# kind: name, mirror_checks, verify_cache_ttl, the verify= every tunnel must close with
for kind in none:0:60s:probe-only warm-1:1:60s:probe+mirror warm-2:2:60s:probe+mirror cold-1:1:0s:probe+mirror; do
  IFS=: read -r name mirrors ttl verify <<<"$kind"
  cat > "$work/$name.yaml" <<YAML
version: 1
proxy:
  allowed_ports: [$upstream]
  deny_destinations: [link-local]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 0
  verify_cache_ttl: $ttl
defaults: { unpinned: allow, trust: "ca-file:$F/both-roots.pem", require_backup: off }
resolve:
  api.pinproxy.test: 127.0.0.1
rules:
  - host: api.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="]
    mirror_checks: $mirrors
YAML
  add_row "$name" "$verify" "https://api.pinproxy.test:$upstream/index.html" "$F/both-roots.pem"
done
run_rows
check_rows
print_rows "pinned TLS 1.3 tunnel, no key log" \
  "none=\`mirror_checks: 0\` (a probe per CONNECT): probe-only" \
  "warm-1=\`mirror_checks: 1\` (the default), cache warm: probe+mirror" \
  "warm-2=\`mirror_checks: 2\`, cache warm: probe+mirror" \
  "cold-1=\`mirror_checks: 1\`, \`verify_cache_ttl: 0s\` (a probe per CONNECT): probe+mirror" -- \
  "none:warm-1:1 mirror, cache warm − no mirror" "none:warm-2:2 mirrors, cache warm − no mirror" \
  "none:cold-1:1 mirror, probe per CONNECT − no mirror"
