#!/usr/bin/env bash
# pinproxy soak test, loopback only, bounded:  Benchmarks/soak.sh [SECONDS=600] [KIND,KIND…]
#
# Runs a release pinproxy for SECONDS under a steady mix of clients (Benchmarks/soak_clients.py):
#   good tunnels    curl and urllib through pinned api.pinproxy.test to a TLS 1.2 and a TLS 1.3 server,
#                   the body asserted every time; slow heads (1 byte / 200 ms) that then tunnel;
#                   clients that stop reading a bulk download for 3 s
#   attacks         a rogue-CA server under a pinned name (502 pin_mismatch) and a replayer that shows
#                   the genuine chain without the key (502 tls_protocol_error)
#   abuse           connect-send-reset bursts to a flooding plain server (unpinned 127.0.0.1:<port>),
#                   heads that never finish (408), garbage (400/405/431; plain HTTP to a pinned host
#                   403; a ClientHello to the proxy a TLS alert)
#   local abuse     silentflood (connections from 127.0.0.2 that never speak, ~100 a second, ~400 held,
#                   the proxy's RLIMIT_NOFILE lowered to 1,024 so it must reap); plaincut (plain-HTTP
#                   exchanges cut by a reset or a close in the head, after it, in the body, waiting, in
#                   the answer) and plainabandon (a plain GET to a silent server, left after 1 s): the
#                   proxy must close its server side within 5 s (soak_plain.py times it); http10
#                   (a chunked answer de-chunked for an HTTP/1.0 client); sniscope (a report-mode CONNECT
#                   carrying the SNI of an enforced host to the rogue server: closed); metricstrickle
#                   (closed at 5 s) and scrape (200 meanwhile); keylogflood (~4 MiB/s of CLIENT_RANDOM
#                   lines into proxy.keylog on /dev/shm: the file holds under 32 MiB of memory — its
#                   allocated blocks; its size may grow where pinproxy punches out what it has read —,
#                   setup p50 under 100 ms, and every good TLS 1.3 tunnel, under require_keylog,
#                   still gets its line)
# KIND,KIND… runs only those kinds (with the sampler), to check one kind in a short run.
# plus a SIGHUP reload every 30 s (a valid, rewritten policy), and every 5 s a sample of RSS, open fds,
# active tunnels and silent_reaped (the `stats` line), the key-log file's size and the setup latency
# of one pinned CONNECT.
# Fails (exit 1, reasons printed) if a good tunnel fails, an attack or an abuse does not get its
# expected outcome (above), a reload is missed, the proxy dies or does not exit 0 on SIGTERM, tunnels
# and sessions do not drain to 0 after the clients stop, or RSS/fds trend upward: the median of the
# last third of the samples against the median of the middle third (the first third is warm-up),
# allowing max(+10 %, +4 MiB) RSS and +8 fds.
# Prints a markdown summary. Every child is killed on exit (and gets a parent-death signal).
set -euo pipefail
set -m   # every background job in its own process group, so cleanup can kill a job with its children
cd "$(dirname "$0")/.."
duration=${1:-600}
[[ $duration =~ ^[0-9]+$ ]] && (( duration >= 30 )) || { echo "usage: $0 [SECONDS>=30] [KIND,KIND…]" >&2; exit 2; }
# kind:threads — about 40 CONNECTs a second in the first nine (half of them reset bursts), and the
# local abuse (silentflood …) at rates that leave the 2 cores to the good clients
all_kinds=(curl:2 urllib:2 rogue:1 replay:1 resets:1 slow:2 stall:2 garbage:1 neverread:3
           silentflood:1 plaincut:2 plainabandon:3 http10:1 sniscope:1 metricstrickle:2 scrape:1 keylogflood:1)
specs=()
for spec in "${all_kinds[@]}"; do [[ -z ${2:-} || ,$2, == *,${spec%%:*},* ]] && specs+=("$spec"); done
(( ${#specs[@]} )) || { echo "no such kind in '$2'; kinds: ${all_kinds[*]%%:*}" >&2; exit 2; }
kinds=$(printf '%s\n' "${specs[@]%%:*}" | paste -sd,)
F=$PWD/Tests/TLSInspectionTests/Fixtures
S=$PWD/Tests/TestSupport/scripts
C=$PWD/Benchmarks/soak_clients.py
every=5
swift build -c release --product pinproxy >/dev/null
bin=$PWD/.build/release/pinproxy

work=$(mktemp -d "${TMPDIR:-/tmp}/pinproxy-soak.XXXXXX")
shm=$(mktemp -d /dev/shm/pinproxy-soak.XXXXXX)   # the key log must be on tmpfs
keylog=$shm/keylog
jobs_started=()
proxy_pid=
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  [[ -n $proxy_pid ]] && kill -TERM "$proxy_pid" 2>/dev/null || true
  if (( rc != 0 )) && [[ -s $work/proxy.log ]]; then echo "(proxy log kept in $work.log)" >&2; cp "$work/proxy.log" "$work.log"; fi
  exec 2>/dev/null   # no job-control notices for the helpers we kill
  for pid in "${jobs_started[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
  sleep 0.3
  [[ -n $proxy_pid ]] && kill -KILL "$proxy_pid" 2>/dev/null || true
  for pid in "${jobs_started[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work" "$shm"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Children die with us even if we are killed outright (parent-death signal); the helpers, which serve
# until their stdin closes, read a fifo we hold open.
child() { exec setpriv --pdeathsig KILL "$@"; }   # only as `child … &`: the job is the process itself
mkfifo "$work/hold"; exec 9<>"$work/hold"
helper() {  # helper NAME ARGS...: start a helper that prints 'PORT <n>', set ports[NAME]
  local name=$1; shift
  child python3 "$@" <&9 >"$work/$name.port" 2>"$work/$name.err" &
  jobs_started+=($!)
  for _ in $(seq 100); do grep -qs '^PORT ' "$work/$name.port" && break; sleep 0.1; done
  ports[$name]=$(awk '/^PORT / {print $2}' "$work/$name.port")
  [[ -n ${ports[$name]} ]] || { echo "helper $name did not start: $(cat "$work/$name.err")" >&2; exit 1; }
}
declare -A ports
up=("$S/upstream.py" --ca "$F/good-root.pem")
helper good12 "${up[@]}" --name good12 --tls 1.2 --cert "$F/leaf-ec256.chain.pem" --key "$F/leaf-ec256.key.pem"
helper good13 "${up[@]}" --name good13 --tls 1.3 --cert "$F/leaf-ec256.chain.pem" --key "$F/leaf-ec256.key.pem"
helper rogue "${up[@]}" --name rogue --cert "$F/rogue-leaf.chain.pem" --key "$F/rogue-leaf.key.pem"
helper bulk "${up[@]}" --name bulk --mode bulk --bulk-bytes $((64 << 20)) --cert "$F/leaf-ec256.chain.pem" --key "$F/leaf-ec256.key.pem"
helper flood "${up[@]}" --name flood --mode flood --bulk-bytes $((4 << 20))
helper replay12 "$S/replayer.py" --genuine "${ports[good12]}" --abort alert
helper replay13 "$S/replayer.py" --genuine "${ports[good13]}" --abort rst
helper plaincut "$PWD/Benchmarks/soak_plain.py" --results "$work"
helper plain "$S/plainhttp.py"
ports_json=$(for k in "${!ports[@]}"; do printf '"%s": %s\n' "$k" "${ports[$k]}"; done | paste -sd, | sed 's/^/{/; s/$/}/')

write_policy() {  # a valid policy; each reload writes it anew (atomically) with a new generation
  cat > "$work/policy.yaml.new" <<YAML
version: 1
# soak policy, generation $1
proxy:
  allowed_ports: [$(printf '%s\n' "${ports[@]}" | paste -sd, | sed 's/,/, /g')]
  deny_destinations: [link-local, unspecified, multicast]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 2s
  header_timeout: 15s
  plain_http: forward
  allowed_plain_ports: [${ports[plaincut]}, ${ports[plain]}]
  metrics_listen: "127.0.0.1:0"
  keylog: { path: "$keylog", wait: 1s }
defaults: { unpinned: allow, trust: "ca-file:$F/both-roots.pem", require_backup: off }
resolve:
  api.pinproxy.test: 127.0.0.1
  rogue.api.pinproxy.test: 127.0.0.1
  replay.pinproxy.test: 127.0.0.1
  report.api.pinproxy.test: 127.0.0.1
rules:
  # every client of the good tunnels writes SSLKEYLOGFILE: a TLS 1.3 tunnel without its line is refused
  - host: api.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=", { file: "$F/backup.pub.pem" }]
    require_keylog: true
  # report mode, scoped to this name only: a ClientHello naming api.pinproxy.test through it is refused
  - host: report.api.pinproxy.test
    mode: report
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=", { file: "$F/backup.pub.pem" }]
  # the rogue server's leaf (rogue CA, trusted by both-roots.pem) is valid for *.api.pinproxy.test,
  # so this is refused for its pins (pin_mismatch), not for its name
  - host: rogue.api.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=", { file: "$F/backup.pub.pem" }]
  - host: replay.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=", { file: "$F/backup.pub.pem" }]
YAML
  mv "$work/policy.yaml.new" "$work/policy.yaml"
}
write_policy 0
"$bin" check --config "$work/policy.yaml" >/dev/null

child "$bin" run --config "$work/policy.yaml" --listen 127.0.0.1:0 </dev/null 9>&- 2>"$work/proxy.log" &
proxy_pid=$!
for _ in $(seq 100); do grep -q ' event=started ' "$work/proxy.log" && break; sleep 0.1; done
proxy_port=$(grep -o ' listen=[^ ]*' "$work/proxy.log" | head -1 | grep -o '[0-9]*$')
[[ -n $proxy_port ]] || { echo "pinproxy did not start:"; cat "$work/proxy.log"; exit 1; }
metrics_port=$(grep -o ' metrics_listen=[^ ]*' "$work/proxy.log" | head -1 | grep -o '[0-9]*$')
[[ -n $metrics_port ]] || { echo "pinproxy did not say its metrics port:"; cat "$work/proxy.log"; exit 1; }
# A quarter of the descriptor limit may wait silent (read at every accept): 256 here, which
# silentflood's ~400 held connections pass, so the proxy must reap.
prlimit --pid "$proxy_pid" --nofile=1024: >/dev/null

start=$(date +%s)
deadline=$((start + duration))
common=(--until "$deadline" --proxy "$proxy_port" --ports "$ports_json" --results "$work" --metrics "$metrics_port" --keylog "$keylog")
export SSLKEYLOGFILE=$keylog   # curl and Python's ssl write their key lines there (require_keylog)
for spec in "${specs[@]}"; do
  child python3 "$C" run "${spec%%:*}" --threads "${spec##*:}" --header-timeout 15 "${common[@]}" </dev/null >/dev/null 2>"$work/${spec%%:*}.err" &
  jobs_started+=($!)
done
child python3 "$C" sample "${common[@]}" --pid "$proxy_pid" --log "$work/proxy.log" --csv "$work/samples.csv" --every $every </dev/null \
  >/dev/null 2>"$work/sample.err" &
jobs_started+=($!)
client_jobs=("${jobs_started[@]: -$(( ${#specs[@]} + 1 ))}")

reloads_sent=0; reloads_missed=0; alive=1
next_reload=$((start + 30))
while (( $(date +%s) < deadline )); do
  sleep 1
  kill -0 "$proxy_pid" 2>/dev/null || { alive=0; echo "pinproxy died at $(( $(date +%s) - start )) s" >&2; break; }
  now=$(date +%s)
  if (( now >= next_reload && now < deadline )); then
    before=$(grep -c ' event=policy_reloaded ' "$work/proxy.log" || true)
    write_policy $((reloads_sent + 1))
    kill -HUP "$proxy_pid" 2>/dev/null || true; reloads_sent=$((reloads_sent + 1)); next_reload=$((next_reload + 30))
    for _ in $(seq 50); do (( $(grep -c ' event=policy_reloaded ' "$work/proxy.log" || true) > before )) && break; sleep 0.1; done
    (( $(grep -c ' event=policy_reloaded ' "$work/proxy.log" || true) > before )) || reloads_missed=$((reloads_missed + 1))
  fi
done

# The clients stop at the deadline (a stalled head may take header_timeout longer); bound the wait.
for _ in $(seq 600); do
  running=0
  for pid in "${client_jobs[@]}"; do kill -0 "$pid" 2>/dev/null && running=1; done
  (( running )) || break
  sleep 0.1
done
for pid in "${client_jobs[@]}"; do kill -KILL -- "-$pid" 2>/dev/null || true; done

# Every tunnel and session must be gone within a few stats intervals of the last client. A stats
# line comes within stats_interval (2 s) of any change, and only then: once that long has passed,
# the newest one is the current state, even if it was written before the last client stopped.
settled="no (the newest stats line did not show tunnels=0 active_sessions=0 within 20 s)"
if (( alive )) && kill -0 "$proxy_pid" 2>/dev/null; then
  sleep 2.5
  for _ in $(seq 200); do
    if grep ' event=stats ' "$work/proxy.log" | tail -1 | grep ' active_sessions=0 ' | grep -q ' tunnels=0 '; then settled=yes; break; fi
    sleep 0.1
  done
else
  alive=0
fi
fds_idle=$(ls "/proc/$proxy_pid/fd" 2>/dev/null | wc -l)
rss_idle=$(awk '/VmRSS/ {print $2}' "/proc/$proxy_pid/status" 2>/dev/null || echo 0)

kill -TERM "$proxy_pid" 2>/dev/null || true
set +e; wait "$proxy_pid"; exit_code=$?; set -e
proxy_pid=

reloads_seen=$(grep -c ' event=policy_reloaded ' "$work/proxy.log" || true)
reload_failed=$(grep -c ' event=policy_reload_failed ' "$work/proxy.log" || true)
set +e
python3 "$C" summary --csv "$work/samples.csv" --results "$work" --log "$work/proxy.log" --every $every --duration "$duration" \
  --kinds "$kinds" --ports "$ports_json" \
  --reloads-sent "$reloads_sent" --reloads-seen "$reloads_seen" \
  --reload-failed "$reload_failed" --alive-at-end "$alive" --exit-code "$exit_code" --settled "$settled"
verdict=$?
set -e
echo
echo "idle after the clients stopped: $((rss_idle / 1024)) MiB RSS, $fds_idle fds; $(grep -c '' "$work/proxy.log") log lines"
if [[ -s $work/failures.log ]]; then echo "first failures:"; head -20 "$work/failures.log"; fi
for f in "$work"/*.err; do [[ -s $f ]] && { echo "stderr of $(basename "$f" .err):"; tail -5 "$f"; }; done
(( reloads_missed == 0 )) || { echo "FAIL: $reloads_missed reload(s) not confirmed by a policy_reloaded line within 5 s"; verdict=1; }
exit "$verdict"
