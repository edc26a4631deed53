#!/usr/bin/env bash
# What the TLS 1.3 key-log check costs:  Benchmarks/keylog.sh [TUNNELS=300] [MIB=256]
#
# Builds release, starts one TLS 1.3 upstream (openssl s_server -WWW) on 127.0.0.1, one pinproxy
# without a key log and one with `proxy.keylog` on a tmpfs file (same pinned rule), then times
# CONNECT → first application byte of a TLS 1.3 tunnel with curl (time_starttransfer − time_connect),
# alternating in rounds of 20: no key log configured (verify=probe-only); key log configured and curl
# writing it (verify=probe+keylog: the server's flight is held until the client's line opens it);
# key log configured and curl not writing it (probe-only after `wait`). Then the throughput of a
# MIB-MiB download through the first two kinds of tunnel (3 rounds each, interleaved).
# Loopback only; every loop is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."
tunnels=${1:-300}
mib=${2:-256}
F=$PWD/Tests/TLSInspectionTests/Fixtures
work=$(mktemp -d)
keylogdir=$(mktemp -d -p /dev/shm pinproxy-bench-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work" "$keylogdir"' EXIT

swift build -c release --product pinproxy >/dev/null
binary=$PWD/.build/release/pinproxy

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
upstream=$(free_port)
echo hello > "$work/index.html"
head -c "$((mib * 1024 * 1024))" /dev/zero > "$work/bulk.bin"
(cd "$work" && exec openssl s_server -accept "127.0.0.1:$upstream" -cert "$F/leaf-ec256.pem" -key "$F/leaf-ec256.key.pem" \
  -cert_chain "$F/good-intermediate.pem" -tls1_3 -WWW -quiet -naccept 100000) >/dev/null 2>&1 &
cat > "$work/policy.yaml" <<YAML
version: 1
proxy:
  allowed_ports: [$upstream]
  deny_destinations: [link-local]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 0
  keylog: { path: $keylogdir/keylog, wait: 100ms }
defaults: { unpinned: allow, trust: "ca-file:$F/both-roots.pem", require_backup: off }
resolve:
  api.pinproxy.test: 127.0.0.1
rules:
  - host: api.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="]
    mirror_checks: 0   # openssl s_server answers one connection at a time: no mirror (docs/policy.md)
YAML
grep -v keylog "$work/policy.yaml" > "$work/plain.yaml"
start_proxy() {  # $1 config, $2 port
  "$binary" run --config "$1" --listen "127.0.0.1:$2" 2>"$work/proxy-$2.log" &
  for _ in $(seq 1 100); do grep -q event=started "$work/proxy-$2.log" 2>/dev/null && return; sleep 0.05; done
  echo "pinproxy on $2 did not start" >&2; cat "$work/proxy-$2.log" >&2; exit 1
}
port=$(free_port); plain_port=$(free_port)
start_proxy "$work/policy.yaml" "$port"
start_proxy "$work/plain.yaml" "$plain_port"
sleep 0.3

fetch() {  # $1 proxy port, $2 keylog (empty: none), $3 path, $4 curl -w format
  if [ -n "$2" ]; then export SSLKEYLOGFILE=$2; else unset SSLKEYLOGFILE; fi
  curl -s -o /dev/null --max-time 60 --proxy "http://127.0.0.1:$1" --cacert "$F/both-roots.pem" -w "$4" \
    "https://api.pinproxy.test:$upstream/$3"
}
timing='%{time_connect} %{time_starttransfer}\n'
rounds=$(( (tunnels + 19) / 20 ))
for _ in $(seq 1 "$rounds"); do
  for _ in $(seq 1 20); do fetch "$plain_port" "" index.html "$timing" >> "$work/probe-only.txt"; done
  for _ in $(seq 1 20); do fetch "$port" "$keylogdir/keylog" index.html "$timing" >> "$work/keylog.txt"; done
  for _ in $(seq 1 20); do fetch "$port" "" index.html "$timing" >> "$work/no-line.txt"; done
done
for _ in 1 2 3; do
  fetch "$plain_port" "" bulk.bin '%{speed_download}\n' >> "$work/bulk-probe-only.txt"
  fetch "$port" "$keylogdir/keylog" bulk.bin '%{speed_download}\n' >> "$work/bulk-keylog.txt"
done
verified=$(grep -c 'verify=probe+keylog' "$work/proxy-$port.log" || true)
[ "$verified" -ge "$tunnels" ] || { echo "only $verified tunnels were verified with the key log" >&2; exit 1; }

python3 - "$work" "$tunnels" "$mib" <<'PY'
import sys, statistics
work, tunnels, mib = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(name):
    values = []
    for line in open("%s/%s" % (work, name)):
        connect, first = map(float, line.split())
        if first > 0: values.append((first - connect) * 1000)
    return sorted(values)
def pct(v, p): return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
def speed(name): return statistics.median(float(l) for l in open("%s/%s" % (work, name))) / 1e6
rows = [("no proxy.keylog: probe-only", load("probe-only.txt"), speed("bulk-probe-only.txt")),
        ("proxy.keylog, curl with SSLKEYLOGFILE: probe+keylog", load("keylog.txt"), speed("bulk-keylog.txt")),
        ("proxy.keylog, curl without it: probe-only after wait (100 ms)", load("no-line.txt"), None)]
print("| TLS 1.3 pinned tunnel | tunnels | first byte p50 ms | p99 ms | %d MiB download MB/s (median of 3) |" % mib)
print("|---|---|---|---|---|")
for name, values, mbs in rows:
    print("| %s | %d | %.2f | %.2f | %s |" % (name, len(values), pct(values, 50), pct(values, 99), "%.0f" % mbs if mbs else "–"))
print()
print("key log at p50: %+.2f ms" % (pct(rows[1][1], 50) - pct(rows[0][1], 50)))
PY
