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
# time_connect), alternating the proxies in rounds of 20, TUNNELS per proxy (rounded up to 20);
# counts each proxy's CPU (utime+stime from /proc) and the upstream's server flights per tunnel.
# Fails loudly unless every tunnel got 200 and closed with the expected verify= and every decision
# line under ct said ct=compliant. Prints a markdown table with the machine, the load and the tool
# versions. Loopback only; every loop is bounded; the trap stops every process and removes the work
# directory.
set -euo pipefail
cd "$(dirname "$0")/.."
tunnels=${1:-300}
rounds=$(( (tunnels + 19) / 20 )); tunnels=$(( rounds * 20 ))
F=$PWD/Tests/TLSInspectionTests/Fixtures
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

swift build -c release --product pinproxy >/dev/null
python3 "$F/ct/make-ct-fixtures.py" --out "$work/ct" >/dev/null
leaf_pin=spki-sha256:$(openssl x509 -in "$work/ct/two-operators.pem" -pubkey -noout | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64)
binary=$PWD/.build/release/pinproxy
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
upstream=$(free_port)
node Benchmarks/tls13_upstream.js "$upstream" "$work/ct/two-operators.key.pem" "$work/ct/two-operators.chain.pem" 2>"$work/upstream.log" &
for i in $(seq 1 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $upstream), 1)" 2>/dev/null && break
  [ "$i" -lt 100 ] || { echo "the upstream (node Benchmarks/tls13_upstream.js) did not start" >&2; cat "$work/upstream.log" >&2; exit 1; }
  sleep 0.1
done
flights() { grep -c '^flight$' "$work/upstream.log" || true; }  # one per server flight: tunnel, probe, mirror

# kind: name, pinned (yes|no), ct, verify_cache_ttl, the verify= every tunnel must close with
kinds=(off:no:off:60s:unpinned ct-warm:no:require:60s:probe+mirror ct-cold:no:require:0s:probe+mirror
       pins:yes:off:60s:probe+mirror pins-ct:yes:require:60s:probe+mirror)
host=two-operators.ct.pinproxy.test
declare -A port pid
start_proxy() {  # $1 kind name, $2 pinned, $3 ct, $4 verify_cache_ttl
  rules=""
  [ "$2" = yes ] && rules="rules: [{ host: $host, pins: [\"$leaf_pin\"] }]"
  cat > "$work/$1.yaml" <<YAML
version: 1
proxy:
  allowed_ports: [$upstream]
  deny_destinations: [link-local]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 0
  verify_cache_ttl: $4
  ct_log_list: $work/ct/log_list.json
defaults: { unpinned: allow, trust: "ca-file:$work/ct/ct-root.pem", require_backup: off, ct: $3 }
resolve:
  $host: 127.0.0.1
$rules
YAML
  port[$1]=$(free_port)
  "$binary" run --config "$work/$1.yaml" --listen "127.0.0.1:${port[$1]}" 2>"$work/$1.log" &
  pid[$1]=$!
  for _ in $(seq 1 200); do grep -q event=started "$work/$1.log" 2>/dev/null && return; sleep 0.05; done
  echo "pinproxy $1 did not start" >&2; cat "$work/$1.log" >&2; exit 1
}
for kind in "${kinds[@]}"; do IFS=: read -r name pinned ct ttl _ <<<"$kind"; start_proxy "$name" "$pinned" "$ct" "$ttl"; done
cpu() { cut -d')' -f2 "/proc/$1/stat" | awk '{ print $12 + $13 }'; }  # utime+stime of every thread, in ticks
for kind in "${kinds[@]}"; do name=${kind%%:*}; echo "$(cpu "${pid[$name]}")" > "$work/$name.cpu0"; : > "$work/$name.flights"; done

fetch() {  # $1 kind name: one tunnel, one line "connect starttransfer http_code"
  curl -s -o /dev/null --max-time 30 --proxy "http://127.0.0.1:${port[$1]}" --cacert "$work/ct/ct-root.pem" \
    -w '%{time_connect} %{time_starttransfer} %{http_code}\n' "https://$host:$upstream/index.html" >> "$work/$1.txt" || true
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
  IFS=: read -r name _ ct _ verify <<<"$kind"
  closed=0
  for _ in $(seq 1 100); do  # the last close lines may follow curl's exit by a moment
    closed=$(grep -c "event=tunnel_closed.* verify=$verify\( \|$\)" "$work/$name.log" || true)
    [ "$closed" -ge "$tunnels" ] && break; sleep 0.1
  done
  ok=$(grep -c ' 200$' "$work/$name.txt" || true)
  others=$(grep 'event=tunnel_closed' "$work/$name.log" | grep -v " verify=$verify\( \|$\)" || true)
  bad=$(grep -E 'level=(warning|error)|event=(tunnel_refused|interception_suspected|quarantine_lifted)|reason=(mirror_|quarantined)' "$work/$name.log" || true)
  if [ "$ct" = require ]; then
    bad+=$(grep -E 'event=tunnel_(allowed|unpinned|bypassed)' "$work/$name.log" | grep -v ' ct=compliant' || true)
  fi
  if [ "$ok" -ne "$tunnels" ] || [ "$closed" -ne "$tunnels" ] || [ -n "$others" ] || [ -n "$bad" ]; then
    echo "FAIL $name: $ok of $tunnels tunnels got 200, $closed closed with verify=$verify" >&2
    printf '%s\n' "$others" "$bad" | grep -v "^$" | head -5 >&2 || true
    failed=1
  fi
  echo $(( $(cpu "${pid[$name]}") - $(cat "$work/$name.cpu0") )) > "$work/$name.cpu"
done
[ "$failed" -eq 0 ] || { echo "ct.sh: the run is not valid (see above)" >&2; exit 1; }

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
rows = [("off", "unpinned, `ct: off`: not looked at (verify=unpinned)"),
        ("ct-warm", "unpinned, `ct: require`, cache warm: probe+mirror, ct=compliant"),
        ("ct-cold", "unpinned, `ct: require`, `verify_cache_ttl: 0s` (a probe per CONNECT): probe+mirror"),
        ("pins", "pinned, `ct: off`, cache warm: probe+mirror"),
        ("pins-ct", "pinned, `ct: require`, cache warm: probe+mirror, ct=compliant")]
data = {}
for name, _ in rows:
    flights = sum(int(l) for l in open("%s/%s.flights" % (work, name)))
    cpu = int(open("%s/%s.cpu" % (work, name)).read()) / tick
    data[name] = (load(name), cpu * 1000 / tunnels, flights / tunnels)
print("%s UTC, %s × %s, Linux %s, curl %s, OpenSSL %s, upstream Node %s; %d TLS 1.3 tunnels per row in interleaved rounds of 20; "
      "load average %s before, %s after" % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), nproc, model,
      platform.release(), curl, openssl, node, tunnels, load_before, load_after))
print()
print("| TLS 1.3 tunnel, no key log | tunnels | first byte p50 ms | p99 ms | proxy CPU ms/tunnel | server flights/tunnel |")
print("|---|---|---|---|---|---|")
for name, label in rows:
    values, cpu, flights = data[name]
    print("| %s | %d | %.2f | %.2f | %.2f | %.2f |" % (label, len(values), pct(values, 50), pct(values, 99), cpu, flights))
print()
short = {"off": "not looked at", "ct-warm": "CT on an unpinned host, cache warm", "ct-cold": "CT on an unpinned host, a probe per CONNECT",
         "pins": "pins", "pins-ct": "pins and CT"}
for base, other in (("off", "ct-warm"), ("off", "ct-cold"), ("pins", "pins-ct")):
    a, b = data[base][0], data[other][0]
    print("- %s − %s: %+.2f ms at p50, %+.2f ms at p99, %+.2f ms CPU per tunnel" % (short[other], short[base], pct(b, 50) - pct(a, 50),
          pct(b, 99) - pct(a, 99), data[other][1] - data[base][1]))
PY
