#!/usr/bin/env bash
# A local flood of silent connections at full speed, and what it costs real clients:
#   Benchmarks/silent-flood.sh [PINPROXY=.build/release/pinproxy] [SECONDS=15] [CAP=9000] [ROUNDS=3]
# In a network namespace of its own (as root: its loopback only): nginx as the HTTPS server (TLS 1.3,
# the tests' leaf-ec256 certificate) on 8443, so that neither proxy is judged by a server that a
# flood passed on to it would drown; pinproxy pinning it on 3129 (release build; the descriptor
# limit of the systemd unit, LimitNOFILE=65536, or the hard limit when lower; LIMIT=N to choose,
# e.g. LIMIT=1024 for systemd's own default); and the anchor, nginx's stream proxy in front of the
# same server on 3130 (nginx-light with libnginx-mod-stream: two workers, the same descriptor
# limit, its default listen backlog of 511).
# For each, ROUNDS times: two flooders (Tests/TestSupport/scripts/flood.py, from 127.0.2.* and
# 127.0.3.* so that the kernel's search for a free port never slows them; SOURCES="A B" to choose)
# open non-blocking connections as fast as they can and never send a byte, for SECONDS; meanwhile
# a real client (curl) makes one pinned TLS 1.3 request a second with a 3 s deadline.
#   FLOOD=fill (the default): each flooder stops adding once it holds CAP, and holds them.
#   FLOOD=rolling: each closes its oldest past CAP and goes on opening at full speed.
# Printed per round: requests served of made, with curl's exit code for each failure; curl's
# connect, TLS and total times (median, slowest); the listener's accept queue at its fullest (ss
# Recv-Q, sampled every 50 ms); the kernel's dropped SYNs (nstat ListenOverflows, ListenDrops,
# TCPReqQFullDrop); pinproxy's descriptors at the peak, before, and 5 s and 15 s after the flood,
# its `accept_failed` lines; and nginx's error log, counted by message.
set -euo pipefail
cd "$(dirname "$0")/.."
pinproxy=$(realpath "${1:-.build/release/pinproxy}")
seconds=${2:-15} cap=${3:-9000} rounds=${4:-3}
[ -x "$pinproxy" ] || { echo "no $pinproxy: swift build -c release" >&2; exit 1; }
[ -e /usr/lib/nginx/modules/ngx_stream_module.so ] || { echo "nginx's stream module is missing: apt-get install nginx-light libnginx-mod-stream" >&2; exit 1; }
LIMIT=${LIMIT:-} NGINX_ONLY=${NGINX_ONLY:-} exec unshare --net --mount bash -s "$pinproxy" "$seconds" "$cap" "$rounds" "$PWD" "${SOURCES:-127.0.2.* 127.0.3.*}" "${FLOOD:-fill}" <<'INNER'
set -euo pipefail -f
pinproxy=$1 seconds=$2 cap=$3 rounds=$4 repo=$5 sources=($6) kind=$7
scripts=$repo/Tests/TestSupport/scripts fixtures=$repo/Tests/TLSInspectionTests/Fixtures
ip link set lo up
dir=$(mktemp -d); mount -t tmpfs tmpfs "$dir"
trap 'kill -KILL $(jobs -p) 2>/dev/null; pkill -KILL -f "nginx: worker" 2>/dev/null; wait 2>/dev/null; umount "$dir"; rmdir "$dir"' EXIT
limit=${LIMIT:-$(( $(ulimit -Hn) < 65536 ? $(ulimit -Hn) : 65536 ))}
ulimit -S -n "$(ulimit -Hn)"  # the flooders raise theirs to what they hold
# The server: nginx itself (HTTPS, TLS 1.3), so that neither proxy is judged by a server that a
# flood passed on to it would drown.
mkdir -p "$dir/server"
cat > "$dir/server.conf" <<CONF
worker_processes 2;
worker_rlimit_nofile $limit;
pid $dir/server.pid;
error_log $dir/server/error.log warn;
events { worker_connections $limit; }
http {
  access_log off;
  server {
    listen 127.0.0.1:8443 ssl;
    ssl_protocols TLSv1.2 TLSv1.3;
    ssl_certificate $fixtures/leaf-ec256.chain.pem;
    ssl_certificate_key $fixtures/leaf-ec256.key.pem;
    location / { return 200 "hello from good\n"; }
  }
}
CONF
nginx -p "$dir/server" -c "$dir/server.conf" -g "daemon off;" > "$dir/server/out" 2>&1 &
for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/8443) 2>/dev/null && break; sleep 0.1; done

cat > "$dir/policy.yaml" <<YAML
version: 1
proxy: { allowed_ports: [8443], deny_destinations: [unspecified], stats_interval: 0 }
defaults: { unpinned: deny, trust: "ca-file:$fixtures/both-roots.pem" }
resolve: { api.pinproxy.test: 127.0.0.1 }
rules:
  - host: api.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE="]
YAML
mkdir -p "$dir/nginx"
cat > "$dir/nginx.conf" <<CONF
load_module /usr/lib/nginx/modules/ngx_stream_module.so;
worker_processes 2;
worker_rlimit_nofile $limit;
pid $dir/nginx.pid;
error_log $dir/nginx/error.log warn;
events { worker_connections $limit; }
stream { server { listen 127.0.0.1:3130; proxy_pass 127.0.0.1:8443; } }
CONF

counter() { nstat -az "$1" 2>/dev/null | awk -v k="$1" '$1 == k { print $2 }'; }
counters() { echo "$(counter TcpExtListenOverflows) $(counter TcpExtListenDrops) $(counter TcpExtTCPReqQFullDrop)"; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) print "-"; else print v[int((NR + 1) / 2)] }'; }
most() { sort -n | tail -1; }

# One flooder against $1 from $2: FLOOD=fill holds what it opened, FLOOD=rolling closes its oldest
# past CAP and goes on opening (the pressure on accept never stops).
flood() {
  case $kind in
    fill) exec python3 "$scripts/flood.py" fill "$1" "$seconds" "$cap" "$2" ;;
    rolling) exec python3 "$scripts/flood.py" silent "$1" "$seconds" "$cap" 0 "" "$2" ;;
  esac
}

# One round against the listener on $port; $1 names it, the rest is curl's way there.
round() {
  local name=$1 port=$2; shift 2
  local before after served=0 made=0 queue=0 fds=0 q f t0 pid=${watched:-}
  read -r -a before < <(counters)
  : > "$dir/times"
  flood "$port" "${sources[0]}" > "$dir/flood1" 2>&1 &
  local f1=$!
  flood "$port" "${sources[1]}" > "$dir/flood2" 2>&1 &
  local f2=$!
  t0=$(date +%s.%N)
  (while kill -0 $f1 2>/dev/null || kill -0 $f2 2>/dev/null; do
     ss -Hltn "sport = :$port" | awk '{ print $2 }'
     [ -n "$pid" ] && ls /proc/$pid/fd 2>/dev/null | wc -l | sed 's/^/fd /'
     sleep 0.05
   done) > "$dir/samples" &
  local sampler=$!
  for i in $(seq $((seconds - 1))); do
    sleep "$(echo "$t0 + $i - $(date +%s.%N)" | bc)" 2>/dev/null || true
    made=$((made + 1))
    out=$(curl -s -o /dev/null --cacert "$fixtures/both-roots.pem" --max-time 3 \
      -w '%{http_code} %{time_connect} %{time_appconnect} %{time_total} %{exitcode}' "$@" https://api.pinproxy.test:8443/ || true)
    echo "$out" >> "$dir/times"
    [ "${out%% *}" = 200 ] && served=$((served + 1))
  done
  wait $f1 $f2 || true
  wait $sampler || true
  read -r -a after < <(counters)
  queue=$(grep -v "^fd" "$dir/samples" | most || true)
  fds=$(grep "^fd" "$dir/samples" | awk "{ print \$2 }" | most || true)
  local tc ta tt
  tc=$(awk '$1 == 200 { print $2 }' "$dir/times" | median); ta=$(awk '$1 == 200 { print $3 }' "$dir/times" | median)
  tt=$(awk '$1 == 200 { print $4 }' "$dir/times" | median)
  printf '%s: served %d of %d; median connect %ss, TLS %ss, total %ss (slowest total %ss); accept queue at most %s; ListenOverflows +%d ListenDrops +%d ReqQFullDrop +%d; flooders: %s / %s%s\n' \
    "$name" "$served" "$made" "$tc" "$ta" "$tt" "$(awk '{ print $4 }' "$dir/times" | most)" "${queue:-0}" \
    $((after[0] - before[0])) $((after[1] - before[1])) $((after[2] - before[2])) \
    "$(tail -1 "$dir/flood1")" "$(tail -1 "$dir/flood2")" "${fds:+; pinproxy held at most $fds descriptors}"
  grep -v '^200 ' "$dir/times" | sort | uniq -c | sed 's/^/    failed: /' || true
}

for r in $(seq "$rounds"); do
  if [ -z "${NGINX_ONLY:-}" ]; then  # NGINX_ONLY=1: the anchor alone
  (ulimit -S -n "$limit"; exec "$pinproxy" run --config "$dir/policy.yaml" --listen 127.0.0.1:3129 2> "$dir/log") &
  proxy=$!
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/3129) 2>/dev/null && break; sleep 0.1; done
  curl -s -o /dev/null -x http://127.0.0.1:3129 --cacert "$fixtures/both-roots.pem" https://api.pinproxy.test:8443/
  base=$(ls /proc/$proxy/fd | wc -l)
  watched=$proxy round "pinproxy $r" 3129 -x http://127.0.0.1:3129
  sleep 5; five=$(ls /proc/$proxy/fd | wc -l); sleep 10
  after5=$five
  after15=$(ls /proc/$proxy/fd | wc -l)
  states=$(ss -Htn "( sport = :3129 )" | awk '{ print $1 }' | sort | uniq -c | tr -s ' \n' ' ')
  kill -TERM $proxy; wait $proxy || true
  echo "    pinproxy: $base descriptors before the flood, $after5 5 s after, $after15 15 s after (client connections: ${states:-none}); accept_failed lines: $(grep -c 'accept_failed' "$dir/log" || true); $(grep -o 'silent_reaped=[0-9]*\|silent_closed=[0-9]*' "$dir/log" | tail -2 | tr '\n' ' ')"
  fi

  nginx -p "$dir/nginx" -c "$dir/nginx.conf" -g "daemon off;" > "$dir/nginx/out" 2>&1 &
  for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/3130) 2>/dev/null && break; sleep 0.1; done
  watched= round "nginx stream $r" 3130 --connect-to api.pinproxy.test:8443:127.0.0.1:3130
  sort "$dir/nginx/error.log" | cut -c21- | sed "s/, client: .*//; s/\*[0-9]* //" | sort | uniq -c | sort -rn | head -4 | sed "s/^/    nginx: /"
  kill -TERM "$(cat "$dir/nginx.pid")"; sleep 1
done
INNER
