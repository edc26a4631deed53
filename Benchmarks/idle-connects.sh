#!/usr/bin/env bash
# What one local client can make pinproxy and a pinned server hold and do, with mirror_checks: 4:
#   Benchmarks/idle-connects.sh [PINPROXY=.build/release/pinproxy] [COUNT=1000]
# In a network namespace of its own (as root: its loopback only): the tests' threaded TLS server
# (Tests/TestSupport/scripts/upstream.py) on 8443, the tests' interceptor in pass-through mode in
# front of it on 9443 (it logs every connection with the ClientHello it carried, for 4.), and
# pinproxy pinning both.
#   1. COUNT CONNECTs that never send a ClientHello: pinproxy's descriptors and the upstream
#      connections at their peak, per CONNECT, and how many of them are still open 30 s later.
#   2. The same under a descriptor limit of 1,024: how many CONNECTs got their 200.
#   3. One process making idle CONNECTs as fast as it can for 10 s: CONNECT/s, and the answers.
#   4. One process sending one canned ClientHello in tunnel after tunnel for 10 s: tunnels/s, and
#      the handshakes the server made for them (hellos it received).
set -euo pipefail
cd "$(dirname "$0")/.."
pinproxy=$(realpath "${1:-.build/release/pinproxy}")
count=${2:-1000}
[ -x "$pinproxy" ] || { echo "no $pinproxy: swift build -c release" >&2; exit 1; }
exec unshare --net --mount bash -s "$pinproxy" "$count" "$PWD" <<'INNER'
set -euo pipefail
pinproxy=$1 count=$2 repo=$3
scripts=$repo/Tests/TestSupport/scripts fixtures=$repo/Tests/TLSInspectionTests/Fixtures
ip link set lo up
dir=$(mktemp -d); mount -t tmpfs tmpfs "$dir"
trap 'kill -KILL $(jobs -p) 2>/dev/null; wait 2>/dev/null; umount "$dir"; rmdir "$dir"' EXIT
ulimit -n "$(ulimit -Hn)"; most=$(ulimit -n)
sleep 3600 | python3 "$scripts/upstream.py" --cert "$fixtures/leaf-ec256.chain.pem" --key "$fixtures/leaf-ec256.key.pem" \
  --name good --ca "$fixtures/good-root.pem" --port 8443 > "$dir/upstream.out" 2>&1 &
for _ in $(seq 100); do grep -q PORT "$dir/upstream.out" 2>/dev/null && break; sleep 0.1; done
start_front() {
  : > "$dir/front.jsonl"
  python3 "$scripts/interceptor.py" --genuine 8443 --rogue 8443 --strategy none --log "$dir/front.jsonl" --port 9443 \
    --hello-timeout 60 > "$dir/front.out" 2>&1 &
  front=$!
  for _ in $(seq 100); do grep -q PORT "$dir/front.out" 2>/dev/null && break; sleep 0.1; done
}
start_proxy() {  # $1: descriptor limit
  cat > "$dir/policy.yaml" <<YAML
version: 1
proxy: { allowed_ports: [8443, 9443], deny_destinations: [unspecified], stats_interval: 0 }
defaults: { unpinned: deny, trust: "ca-file:$fixtures/both-roots.pem" }
resolve: { api.pinproxy.test: 127.0.0.1 }
rules:
  - host: api.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="]
    mirror_checks: 4
YAML
  (ulimit -S -n "$1"; exec "$pinproxy" run --config "$dir/policy.yaml" --listen 127.0.0.1:3129 2> "$dir/log") &
  proxy=$!
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/3129) 2>/dev/null && break; sleep 0.1; done
  # The probe's chain, cached (each worker's first CONNECT probes).
  for port in 8443 8443 9443 9443; do curl -s -x http://127.0.0.1:3129 --cacert "$fixtures/both-roots.pem" https://api.pinproxy.test:$port/ -o /dev/null; done
  base=$(ls /proc/$proxy/fd | wc -l)
}
stop_all() { kill -KILL "$proxy" "$front" 2>/dev/null; wait "$proxy" "$front" 2>/dev/null || true; }
upstreams() { ss -Htn state established "( dport = :8443 )" | wc -l; }  # pinproxy's, to the server
peak_while() {  # runs "$@" in the background, samples fds and upstream connections until it prints $marker
  "$@" > "$dir/run.out" 2>&1 &
  local run=$! fds=0 ups=0 f u
  while kill -0 $run 2>/dev/null && ! grep -q "$marker" "$dir/run.out"; do
    f=$(ls /proc/$proxy/fd 2>/dev/null | wc -l); u=$(upstreams)
    [ "$f" -gt "$fds" ] && fds=$f; [ "$u" -gt "$ups" ] && ups=$u
    sleep 0.05
  done
  echo "$fds $ups $run"
}

start_front; start_proxy "$most"
marker=ANSWERED
read fds ups run < <(peak_while python3 "$scripts/tunnel_abuse.py" idle 3129 api.pinproxy.test:8443 "$count" 30)
sleep 15  # past client_hello_timeout (10 s), far short of idle_timeout (300 s)
f=$(ls /proc/$proxy/fd | wc -l); u=$(upstreams)
for _ in $(seq 80); do kill -0 "$run" 2>/dev/null || break; sleep 0.5; done
echo "1. $count idle CONNECTs: $(head -1 "$dir/run.out"); at the peak $((fds - base)) descriptors ($(( (fds - base) * 100 / count ))/100 per CONNECT) and $ups upstream connections; 15 s later $((f - base)) descriptors and $u upstream connections still held; $(tail -1 "$dir/run.out")"
stop_all

start_front; start_proxy 1024
marker=ANSWERED
read fds ups run < <(peak_while python3 "$scripts/tunnel_abuse.py" idle 3129 api.pinproxy.test:8443 "$count" 1)
wait $run || true
echo "2. $count idle CONNECTs, 1,024 descriptors: $(head -1 "$dir/run.out"); peak $fds descriptors, $ups upstream connections"
stop_all

start_front; start_proxy "$most"
python3 "$scripts/tunnel_abuse.py" flood 3129 api.pinproxy.test:8443 10 500 > "$dir/run.out" &
run=$! ups=0
while kill -0 $run 2>/dev/null; do u=$(upstreams); [ "$u" -gt "$ups" ] && ups=$u; sleep 0.2; done
out=$(tail -1 "$dir/run.out"); n=${out#CONNECTS }; n=${n%% *}
echo "3. idle CONNECTs as fast as one process makes them (holding 500): $((n / 10))/s for 10 s ($out); at most $ups upstream connections open at once"
stop_all

start_front; start_proxy "$most"
before=$(grep -c '"genuine"' "$dir/front.jsonl" || true)
out=$(python3 "$scripts/tunnel_abuse.py" replayflood 3129 api.pinproxy.test:9443 api.pinproxy.test 10 | tail -1)
n=${out#REPLAYS }
sleep 2
hellos=$(( $(grep -c '"genuine"' "$dir/front.jsonl" || true) - before ))
echo "4. one canned ClientHello, tunnel after tunnel: $((n / 10)) tunnels/s for 10 s; the server received $hellos hellos for them ($(( hellos * 100 / (n > 0 ? n : 1) ))/100 per tunnel); refused hello_replayed: $(grep -c 'reason=hello_replayed' "$dir/log" || true)"
stop_all
INNER
