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
# rounds of 20, TUNNELS per proxy (rounded up to 20); counts each proxy's CPU (utime+stime from
# /proc) and the upstream's server flights (a mirror costs one) per tunnel. Fails loudly unless
# every tunnel got 200 and closed with the expected verify= and no proxy refused, suspected,
# quarantined or warned about anything. Prints a markdown table with the machine, the load and the
# tool versions. Loopback only; every loop is bounded; the trap stops every process and removes the
# work directory.
set -euo pipefail
cd "$(dirname "$0")/.."
tunnels=${1:-300}
rounds=$(( (tunnels + 19) / 20 )); tunnels=$(( rounds * 20 ))
F=$PWD/Tests/TLSInspectionTests/Fixtures
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

swift build -c release --product pinproxy >/dev/null
binary=$PWD/.build/release/pinproxy
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
upstream=$(free_port)
node Benchmarks/tls13_upstream.js "$upstream" "$F/leaf-ec256.key.pem" "$F/leaf-ec256.chain.pem" 2>"$work/upstream.log" &
for i in $(seq 1 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $upstream), 1)" 2>/dev/null && break
  [ "$i" -lt 100 ] || { echo "the upstream (node Benchmarks/tls13_upstream.js) did not start" >&2; cat "$work/upstream.log" >&2; exit 1; }
  sleep 0.1
done
flights() { grep -c '^flight$' "$work/upstream.log" || true; }  # one per server flight: tunnel, probe, mirror

# kind: name, mirror_checks, verify_cache_ttl, the verify= every tunnel must close with
kinds=(none:0:60s:probe-only warm-1:1:60s:probe+mirror warm-2:2:60s:probe+mirror cold-1:1:0s:probe+mirror)
declare -A port pid
start_proxy() {  # $1 kind name, $2 mirror_checks, $3 verify_cache_ttl
  cat > "$work/$1.yaml" <<YAML
version: 1
proxy:
  allowed_ports: [$upstream]
  deny_destinations: [link-local]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 0
  verify_cache_ttl: $3
defaults: { unpinned: allow, trust: "ca-file:$F/both-roots.pem", require_backup: off }
resolve:
  api.pinproxy.test: 127.0.0.1
rules:
  - host: api.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="]
    mirror_checks: $2
YAML
  port[$1]=$(free_port)
  "$binary" run --config "$work/$1.yaml" --listen "127.0.0.1:${port[$1]}" 2>"$work/$1.log" &
  pid[$1]=$!
  for _ in $(seq 1 200); do grep -q event=started "$work/$1.log" 2>/dev/null && return; sleep 0.05; done
  echo "pinproxy $1 did not start" >&2; cat "$work/$1.log" >&2; exit 1
}
for kind in "${kinds[@]}"; do IFS=: read -r name mirrors ttl _ <<<"$kind"; start_proxy "$name" "$mirrors" "$ttl"; done
cpu() { cut -d')' -f2 "/proc/$1/stat" | awk '{ print $12 + $13 }'; }  # utime+stime of every thread, in ticks
for kind in "${kinds[@]}"; do name=${kind%%:*}; echo "$(cpu "${pid[$name]}")" > "$work/$name.cpu0"; : > "$work/$name.flights"; done

fetch() {  # $1 kind name: one tunnel, one line "connect starttransfer http_code"
  curl -s -o /dev/null --max-time 30 --proxy "http://127.0.0.1:${port[$1]}" --cacert "$F/both-roots.pem" \
    -w '%{time_connect} %{time_starttransfer} %{http_code}\n' "https://api.pinproxy.test:$upstream/index.html" >> "$work/$1.txt" || true
}
for _ in $(seq 1 "$rounds"); do
  for kind in "${kinds[@]}"; do
    name=${kind%%:*}
    before=$(flights)
    for _ in $(seq 1 20); do fetch "$name"; done
    echo $(( $(flights) - before )) >> "$work/$name.flights"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# Every tunnel: 200, and its close line with the expected verify=; nothing refused or suspected.
failed=0
for kind in "${kinds[@]}"; do
  IFS=: read -r name _ _ verify <<<"$kind"
  closed=0
  for _ in $(seq 1 100); do  # the last close lines may follow curl's exit by a moment
    closed=$(grep -c "event=tunnel_closed.* verify=$verify\( \|$\)" "$work/$name.log" || true)
    [ "$closed" -ge "$tunnels" ] && break; sleep 0.1
  done
  ok=$(grep -c ' 200$' "$work/$name.txt" || true)
  others=$(grep 'event=tunnel_closed' "$work/$name.log" | grep -v " verify=$verify\( \|$\)" || true)
  bad=$(grep -E 'level=(warning|error)|event=(tunnel_refused|interception_suspected|quarantine_lifted)|reason=(mirror_|quarantined)' "$work/$name.log" || true)
  if [ "$ok" -ne "$tunnels" ] || [ "$closed" -ne "$tunnels" ] || [ -n "$others" ] || [ -n "$bad" ]; then
    echo "FAIL $name: $ok of $tunnels tunnels got 200, $closed closed with verify=$verify" >&2
    printf '%s\n' "$others" "$bad" | grep -v "^$" | head -5 >&2 || true
    failed=1
  fi
  echo $(( $(cpu "${pid[$name]}") - $(cat "$work/$name.cpu0") )) > "$work/$name.cpu"
done
[ "$failed" -eq 0 ] || { echo "mirror.sh: the run is not valid (see above)" >&2; exit 1; }

python3 - "$work" "$tunnels" "$(getconf CLK_TCK)" "$load_before" "$load_after" "$upstream" <<'PY'
import sys, datetime, platform, subprocess
work, tunnels, tick, load_before, load_after = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
def load(name):
    values = []
    for line in open("%s/%s.txt" % (work, name)):
        connect, first, _ = line.split()
        values.append((float(first) - float(connect)) * 1000)
    return sorted(values)
def pct(v, p): return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip()
curl = subprocess.run(["curl", "--version"], capture_output=True, text=True).stdout.split()[1]
openssl = subprocess.run(["openssl", "version"], capture_output=True, text=True).stdout.split()[1]
node = subprocess.run(["node", "-p", "process.version + ' (OpenSSL ' + process.versions.openssl + ')'"], capture_output=True, text=True).stdout.strip()
rows = [("none", "`mirror_checks: 0` (a probe per CONNECT): probe-only"),
        ("warm-1", "`mirror_checks: 1` (the default), cache warm: probe+mirror"),
        ("warm-2", "`mirror_checks: 2`, cache warm: probe+mirror"),
        ("cold-1", "`mirror_checks: 1`, `verify_cache_ttl: 0s` (a probe per CONNECT): probe+mirror")]
data = {}
for name, _ in rows:
    flights = sum(int(l) for l in open("%s/%s.flights" % (work, name)))
    cpu = int(open("%s/%s.cpu" % (work, name)).read()) / tick
    data[name] = (load(name), cpu * 1000 / tunnels, flights / tunnels)
print("%s UTC, %s × %s, Linux %s, curl %s, OpenSSL %s, upstream Node %s; %d TLS 1.3 tunnels per row in interleaved rounds of 20; "
      "load average %s before, %s after" % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), nproc, model,
      platform.release(), curl, openssl, node, tunnels, load_before, load_after))
print()
print("| pinned TLS 1.3 tunnel, no key log | tunnels | first byte p50 ms | p99 ms | proxy CPU ms/tunnel | server flights/tunnel |")
print("|---|---|---|---|---|---|")
for name, label in rows:
    values, cpu, flights = data[name]
    print("| %s | %d | %.2f | %.2f | %.2f | %.2f |" % (label, len(values), pct(values, 50), pct(values, 99), cpu, flights))
print()
short = {"none": "no mirror", "warm-1": "1 mirror, cache warm", "warm-2": "2 mirrors, cache warm", "cold-1": "1 mirror, probe per CONNECT"}
for base, other in (("none", "warm-1"), ("none", "warm-2"), ("none", "cold-1")):
    a, b = data[base][0], data[other][0]
    print("- %s − %s: %+.2f ms at p50, %+.2f ms at p99, %+.2f ms CPU per tunnel" % (short[other], short[base], pct(b, 50) - pct(a, 50),
          pct(b, 99) - pct(a, 99), data[other][1] - data[base][1]))
PY
