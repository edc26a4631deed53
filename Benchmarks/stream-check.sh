#!/usr/bin/env bash
# What the stream check costs:  Benchmarks/stream-check.sh [TUNNELS=300] [BASELINE=<commit before it>]
#
# Builds this tree and BASELINE (by default the commit before the stream check landed) in release,
# starts one TLS 1.2 upstream (openssl s_server) on 127.0.0.1 and one pinproxy of each build with
# the same pinned rule, then times CONNECT → first application byte of a TLS 1.2 tunnel with curl
# (time_starttransfer − time_connect: the CONNECT, the probe, the 200, the tunnel's handshake through
# the stream check, the request and the first byte back), alternating the two proxies in rounds of
# 20 so both see the same machine. Prints p50/p99 per build as a markdown table. Loopback only;
# every loop is bounded by TUNNELS.
set -euo pipefail
cd "$(dirname "$0")/.."
tunnels=${1:-300}
baseline=${2:-$(git log --format=%H -1 --grep='^Stream check (issue 7)')^}
F=$PWD/Tests/TLSInspectionTests/Fixtures
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; git worktree remove --force "$work/baseline" 2>/dev/null || true; rm -rf "$work"' EXIT

swift build -c release --product pinproxy >/dev/null
git worktree add -q --detach "$work/baseline" "$baseline"
(cd "$work/baseline" && swift build -c release --product pinproxy --scratch-path "$work/baseline-build" >/dev/null)
current=$PWD/.build/release/pinproxy
before=$work/baseline-build/release/pinproxy

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
upstream=$(free_port)
echo hello > "$work/index.html"
(cd "$work" && exec openssl s_server -accept "127.0.0.1:$upstream" -cert "$F/leaf-ec256.pem" -key "$F/leaf-ec256.key.pem" \
  -cert_chain "$F/good-intermediate.pem" -tls1_2 -WWW -quiet -naccept 100000) >/dev/null 2>&1 &
cat > "$work/policy.yaml" <<YAML
version: 1
proxy:
  allowed_ports: [$upstream]
  deny_destinations: [link-local]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 0
defaults: { unpinned: allow, trust: "ca-file:$F/both-roots.pem", require_backup: off }
resolve:
  api.pinproxy.test: 127.0.0.1
rules:
  - host: api.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="]
YAML
start_proxy() {  # $1 binary, $2 port
  "$1" run --config "$work/policy.yaml" --listen "127.0.0.1:$2" 2>"$work/proxy-$2.log" &
  for _ in $(seq 1 100); do grep -q event=started "$work/proxy-$2.log" 2>/dev/null && return; sleep 0.05; done
  echo "pinproxy on $2 did not start" >&2; exit 1
}
port_now=$(free_port); port_before=$(free_port)
start_proxy "$current" "$port_now"
start_proxy "$before" "$port_before"
sleep 0.5

measure() {  # $1 proxy port, $2 output file: one line per tunnel, seconds from connected to first byte
  curl -s -o /dev/null --max-time 10 --proxy "http://127.0.0.1:$1" --cacert "$F/both-roots.pem" \
    -w '%{time_connect} %{time_starttransfer}\n' "https://api.pinproxy.test:$upstream/index.html" >> "$2"
}
rounds=$(( (tunnels + 19) / 20 ))
for _ in $(seq 1 "$rounds"); do
  for _ in $(seq 1 20); do measure "$port_now" "$work/now.txt"; done
  for _ in $(seq 1 20); do measure "$port_before" "$work/before.txt"; done
done
grep -c 'verify=probe+stream' "$work/proxy-$port_now.log" >/dev/null || { echo "the current build did not verify in the stream" >&2; exit 1; }

python3 - "$work/now.txt" "$work/before.txt" "$tunnels" <<'PY'
import sys, statistics
def load(path):
    values = []
    for line in open(path):
        connect, first = map(float, line.split())
        if first > 0: values.append((first - connect) * 1000)
    return sorted(values)
def pct(v, p): return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
now, before = load(sys.argv[1]), load(sys.argv[2])
print("| TLS 1.2 pinned tunnel, CONNECT → first application byte | tunnels | p50 ms | p99 ms |")
print("|---|---|---|---|")
print("| without the stream check (baseline build) | %d | %.2f | %.2f |" % (len(before), pct(before, 50), pct(before, 99)))
print("| with the stream check (this build) | %d | %.2f | %.2f |" % (len(now), pct(now, 50), pct(now, 99)))
print()
print("difference at p50: %+.2f ms" % (pct(now, 50) - pct(before, 50)))
PY
