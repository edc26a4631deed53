#!/usr/bin/env bash
# A policy of many rules (issue 30): how long `check`, a start and a reload take, and one CONNECT's
# rule lookup, release build:
#   Benchmarks/manyrules.sh [RULES=50000]        env: ROUNDS (3), DOMAINS (300000)
# Generates the policy with Benchmarks/manyrules.py (exact names, `*.` and `**.` wildcards, a port
# split, IPv4 and IPv6 rules, a pinset, exclusions under wildcards), then per round: `pinproxy check`
# (wall time and peak memory), `pinproxy run` from exec until its `started` line is written and
# /metrics answers (the main loop is free: the start's lint lines are out), and a SIGHUP to a file
# with one rule changed until `policy_reloaded` is written and /metrics answers again. Last,
# Benchmarks/RuleLookup's µs per lookup on the same policy, and `pinproxy pin --import nsc` of a
# network_security_config.xml of DOMAINS domains (Benchmarks/manydomains.py): wall time and peak
# memory. Runs in a network namespace of its own
# (as root: its loopback only), so its fixed ports are free.
set -euo pipefail
cd "$(dirname "$0")/.."
rules=${1:-50000}
rounds=${ROUNDS:-3}
domains=${DOMAINS:-300000}
swift build -c release --product pinproxy >/dev/null
swift build -c release --product pinproxy-rulelookup >/dev/null
if [ -z "${MANYRULES_IN_NAMESPACE:-}" ]; then
  exec env MANYRULES_IN_NAMESPACE=1 unshare --net "$0" "$@"
fi
ip link set lo up
pinproxy=$PWD/.build/release/pinproxy
dir=$(mktemp -d)
proxy=
trap '[ -n "$proxy" ] && kill -KILL "$proxy" 2>/dev/null; wait 2>/dev/null; rm -rf "$dir"' EXIT

metrics=127.0.0.1:39464
python3 Benchmarks/manyrules.py "$rules" 0 "$metrics" > "$dir/policy.yaml"
python3 Benchmarks/manyrules.py "$rules" 1 "$metrics" > "$dir/changed.yaml"
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }
# Waits (at most 600 s) until the log has $1 lines with event=$2 or msg $2, then until /metrics answers.
await() {
  for _ in $(seq 6000); do
    [ "$(grep -c "$2" "$dir/log" || true)" -ge "$1" ] && break
    kill -0 "$proxy" 2>/dev/null || { echo "pinproxy exited:" >&2; tail -5 "$dir/log" >&2; exit 1; }
    sleep 0.1
  done
  curl -s --max-time 600 "http://$metrics/metrics" -o /dev/null || { echo "no /metrics" >&2; exit 1; }
}
echo "$rules rules, $(wc -c < "$dir/policy.yaml") bytes; release build; $(nproc) cores; load average $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  /usr/bin/time -f '%e %M' -o "$dir/time" "$pinproxy" check --config "$dir/policy.yaml" > "$dir/check.out"
  read -r check_s check_kb < "$dir/time"
  warnings=$(grep -c 'warning\[' "$dir/check.out" || true)

  cp "$dir/policy.yaml" "$dir/live.yaml"
  start=$(now)
  "$pinproxy" run --config "$dir/live.yaml" --listen 127.0.0.1:39128 2> "$dir/log" &
  proxy=$!
  await 1 'started'
  start_s=$(since "$start")

  cp "$dir/changed.yaml" "$dir/live.yaml"
  start=$(now)
  kill -HUP "$proxy"
  await 1 'policy_reloaded'
  reload_s=$(since "$start")
  grep -q 'rules +0 -0 ~1' "$dir/log" || { echo "the reload did not change one rule:" >&2; grep policy_reloaded "$dir/log" >&2; exit 1; }
  rss_kb=$(awk '/VmHWM/ { print $2 }' "/proc/$proxy/status")
  kill -KILL "$proxy"; wait "$proxy" 2>/dev/null || true; proxy=

  echo "round $round: check ${check_s} s (peak $((check_kb / 1024)) MiB, $warnings warnings); start ${start_s} s; reload ${reload_s} s (run's peak $((rss_kb / 1024)) MiB)"
done
.build/release/pinproxy-rulelookup "$dir/policy.yaml" 7
python3 Benchmarks/manydomains.py "$domains" > "$dir/nsc.xml"
/usr/bin/time -f '%e %M' -o "$dir/time" "$pinproxy" pin --import nsc "$dir/nsc.xml" > "$dir/imported.yaml"
read -r import_s import_kb < "$dir/time"
echo "pin --import nsc: $domains domains ($(wc -c < "$dir/nsc.xml") bytes), $(grep -c '^- host:' "$dir/imported.yaml") rules in ${import_s} s, peak $((import_kb / 1024)) MiB"
