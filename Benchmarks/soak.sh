#!/usr/bin/env bash
# pinproxy soak test, loopback only, bounded:  Benchmarks/soak.sh [SECONDS=600]
#
# Runs a release pinproxy for SECONDS under a steady mix of clients (Benchmarks/soak_clients.py):
#   good tunnels    curl and urllib through pinned api.pinproxy.test to a TLS 1.2 and a TLS 1.3 server,
#                   the body asserted every time; slow heads (1 byte / 200 ms) that then tunnel;
#                   clients that stop reading a bulk download for 3 s
#   attacks         a rogue-CA server under a pinned name (502 pin_mismatch) and a replayer that shows
#                   the genuine chain without the key (502 tls_protocol_error)
#   abuse           connect-send-reset bursts to a flooding plain server (unpinned 127.0.0.1:<port>),
#                   heads that never finish (408), garbage (400/405/431)
# plus a SIGHUP reload every 30 s (a valid, rewritten policy), and every 5 s a sample of RSS, open fds,
# active tunnels (the `stats` line) and the setup latency of one pinned CONNECT.
# Fails (exit 1, reasons printed) if a good tunnel fails, an attack is not refused as expected, a
# reload is missed, the proxy dies or does not exit 0 on SIGTERM, tunnels do not drain to 0 after
# the clients stop, or RSS/fds trend upward: the median of the last third of the samples against the
# median of the middle third (the first third is warm-up), allowing max(+10 %, +4 MiB) RSS and +8 fds.
# Prints a markdown summary. Every child is killed on exit (and gets a parent-death signal).
set -euo pipefail
set -m   # every background job in its own process group, so cleanup can kill a job with its children
cd "$(dirname "$0")/.."
duration=${1:-600}
[[ $duration =~ ^[0-9]+$ ]] && (( duration >= 30 )) || { echo "usage: $0 [SECONDS>=30]" >&2; exit 2; }
F=$PWD/Tests/TLSInspectionTests/Fixtures
S=$PWD/Tests/TestSupport/scripts
C=$PWD/Benchmarks/soak_clients.py
every=5
swift build -c release --product pinproxy >/dev/null
bin=$PWD/.build/release/pinproxy

work=$(mktemp -d "${TMPDIR:-/tmp}/pinproxy-soak.XXXXXX")
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
  rm -rf "$work"
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
  for _ in $(seq 100); do grep -q '^PORT ' "$work/$name.port" && break; sleep 0.1; done
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
defaults: { unpinned: allow, trust: "ca-file:$F/both-roots.pem", require_backup: off }
resolve:
  api.pinproxy.test: 127.0.0.1
  rogue.api.pinproxy.test: 127.0.0.1
  replay.pinproxy.test: 127.0.0.1
rules:
  - host: api.pinproxy.test
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

start=$(date +%s)
deadline=$((start + duration))
common=(--until "$deadline" --proxy "$proxy_port" --ports "$ports_json" --results "$work")
# kind:threads — about 40 CONNECTs a second in all (half of them reset bursts), so 2 cores are not saturated
for spec in curl:2 urllib:2 rogue:1 replay:1 resets:1 slow:2 stall:2 garbage:1 neverread:3; do
  child python3 "$C" run "${spec%%:*}" --threads "${spec##*:}" --header-timeout 15 "${common[@]}" </dev/null >/dev/null 2>"$work/${spec%%:*}.err" &
  jobs_started+=($!)
done
child python3 "$C" sample "${common[@]}" --pid "$proxy_pid" --log "$work/proxy.log" --csv "$work/samples.csv" --every $every </dev/null \
  >/dev/null 2>"$work/sample.err" &
jobs_started+=($!)
client_jobs=("${jobs_started[@]: -10}")

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

# Every tunnel must be gone within a few stats intervals of the last client.
settled="no (no stats line with tunnels=0 active_sessions=0 within 20 s)"
if (( alive )) && kill -0 "$proxy_pid" 2>/dev/null; then
  mark=$(wc -l < "$work/proxy.log")
  for _ in $(seq 200); do
    if tail -n +"$((mark + 1))" "$work/proxy.log" | grep ' event=stats ' | grep ' active_sessions=0 ' | grep -q ' tunnels=0 '; then settled=yes; break; fi
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
