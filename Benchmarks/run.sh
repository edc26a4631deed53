#!/usr/bin/env bash
# pinproxy benchmarks, loopback only, every loop bounded:  Benchmarks/run.sh [RUNS]
#   throughput  one 256 MiB download over HTTPS: direct, through a pinned tunnel, through an unpinned one
#   latency     50 sequential new HTTPS connections: direct vs pinned (each pinned CONNECT pays a probe)
#   fan-out     200 concurrent urllib clients through the proxy
# Prints a markdown table; docs/performance.md's figures come from it. Numbers on 2 cores vary ~15 %.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-3}
F=Tests/TLSInspectionTests/Fixtures
swift build -c release --product pinproxy >/dev/null
bin=.build/release/pinproxy
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
head -c $((256 << 20)) /dev/zero > "$work/big"
echo hello > "$work/small"
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
(cd "$work" && exec openssl s_server -accept 127.0.0.1:$port -cert "$OLDPWD/$F/leaf-ec256.pem" -key "$OLDPWD/$F/leaf-ec256.key.pem" \
  -cert_chain "$OLDPWD/$F/good-intermediate.pem" -WWW -quiet -naccept 100000) >/dev/null 2>&1 &
cat > "$work/policy.yaml" <<YAML
version: 1
proxy:
  allowed_ports: [$port]
  deny_destinations: [link-local]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 0
defaults: { unpinned: allow, trust: "ca-file:$PWD/$F/both-roots.pem" }
resolve:
  api.pinproxy.test: 127.0.0.1
  free.pinproxy.test: 127.0.0.1
rules:
  - host: api.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=", "spki-sha256:KCDrug7ej6zlHN6aFwgek+aRk6ExpqGsKfgGdPF+qhM="]
    mirror_checks: 0   # openssl s_server answers one connection at a time: no mirror (docs/policy.md)
YAML
proxy_port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
$bin run --config "$work/policy.yaml" --listen 127.0.0.1:$proxy_port 2>"$work/proxy.log" &
proxy_pid=$!
sleep 1
common=(-s -o /dev/null --cacert "$F/both-roots.pem" --max-time 120)
direct=(--resolve "api.pinproxy.test:$port:127.0.0.1")
via=(--proxy "http://127.0.0.1:$proxy_port")

mib() { python3 -c "import sys; v=sorted(float(x)/1048576 for x in sys.argv[1:]); print('%.0f–%.0f MiB/s (median %.0f)' % (v[0], v[-1], v[len(v)//2]))" "$@"; }
ms() { python3 -c "import sys; v=sorted(float(x)*1000 for x in sys.argv[1:]); print('median %.1f ms, p95 %.1f ms' % (v[len(v)//2], v[int(len(v)*0.95)-1]))" "$@"; }

t_direct=(); t_pinned=(); t_unpinned=()
for _ in $(seq "$runs"); do
  t_direct+=("$(curl "${common[@]}" "${direct[@]}" -w '%{speed_download}' "https://api.pinproxy.test:$port/big")")
  t_pinned+=("$(curl "${common[@]}" "${via[@]}" -w '%{speed_download}' "https://api.pinproxy.test:$port/big")")
  t_unpinned+=("$(curl "${common[@]}" "${via[@]}" -k -w '%{speed_download}' "https://free.pinproxy.test:$port/big")")
done
l_direct=(); l_pinned=()
for _ in $(seq 50); do
  l_direct+=("$(curl "${common[@]}" "${direct[@]}" -w '%{time_total}' "https://api.pinproxy.test:$port/small")")
  l_pinned+=("$(curl "${common[@]}" "${via[@]}" -w '%{time_total}' "https://api.pinproxy.test:$port/small")")
done
start=$(date +%s.%N)
fan=$(HTTPS_PROXY=http://127.0.0.1:$proxy_port python3 Tests/TestSupport/scripts/clients.py many 200 "https://api.pinproxy.test:$port/small" "$F/both-roots.pem" | head -1)
fan_s=$(python3 -c "print('%.2f' % ($(date +%s.%N) - $start))")
rss=$(awk '/VmHWM/ {print $2}' /proc/$proxy_pid/status)
cpu=$(awk '{print ($14+$15)/100}' /proc/$proxy_pid/stat)

echo "| measurement (release build, loopback, $(nproc) cores) | result |"
echo "|---|---|"
echo "| 256 MiB over HTTPS, direct | $(mib "${t_direct[@]}") |"
echo "| 256 MiB through a pinned tunnel | $(mib "${t_pinned[@]}") |"
echo "| 256 MiB through an unpinned tunnel | $(mib "${t_unpinned[@]}") |"
echo "| new HTTPS connection + GET, direct (50×) | $(ms "${l_direct[@]}") |"
echo "| new HTTPS connection + GET through the pinned proxy (50×, each with a probe) | $(ms "${l_pinned[@]}") |"
echo "| 200 concurrent urllib clients through the proxy | $fan in ${fan_s} s |"
echo "| proxy peak RSS over all of the above | $((rss / 1024)) MiB |"
echo "| proxy CPU time over all of the above | ${cpu} s |"
