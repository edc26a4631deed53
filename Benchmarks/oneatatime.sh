#!/usr/bin/env bash
# How fast a server that serves one connection at a time (openssl s_server) is told apart:
#   Benchmarks/oneatatime.sh [ROUNDS=20] [PINPROXY=.build/release/pinproxy]
# In a network namespace of its own (as root: its loopback only), a self-signed s_server on
# 127.0.0.1:8443 and pinproxy pinning it, probe_timeout 10 s. ROUNDS curls through it with the
# rule's mirror checks on (each refused mirror_lost: the time is until curl gives up) and ROUNDS with
# `mirror_checks: 0` (each 200). Prints min / median / max of curl's time_total per case, and fails
# unless every refusal's log line says the server serves one connection at a time.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-20}
pinproxy=$(realpath "${2:-.build/release/pinproxy}")
[ -x "$pinproxy" ] || { echo "no $pinproxy: swift build -c release" >&2; exit 1; }
exec unshare --net --mount bash -s "$rounds" "$pinproxy" <<'INNER'
set -euo pipefail
rounds=$1 pinproxy=$2
ip link set lo up
dir=$(mktemp -d); mount -t tmpfs tmpfs "$dir"
trap 'kill -KILL $(jobs -p) 2>/dev/null; wait 2>/dev/null; umount "$dir"; rmdir "$dir"' EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 -subj /CN=local.test \
  -addext subjectAltName=DNS:local.test -keyout "$dir/key.pem" -out "$dir/cert.pem" 2>/dev/null
openssl s_server -quiet -www -accept 127.0.0.1:8443 -cert "$dir/cert.pem" -key "$dir/key.pem" >/dev/null 2>&1 &
policy() {
  cat <<YAML
version: 1
proxy: { allowed_ports: [8443], deny_destinations: [unspecified], probe_timeout: 10s }
defaults: { unpinned: deny, trust: pins-only }
resolve: { local.test: 127.0.0.1 }
rules:
  - host: local.test
    pins: [ { file: $dir/cert.pem } ]
    mirror_checks: $1
YAML
}
listening() { for _ in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/$1) 2>/dev/null && return; sleep 0.1; done; exit 1; }
summary() { sort -n | awk '{ t[NR] = $1 } END { printf "min %.3f s, median %.3f s, max %.3f s (%d runs)\n", t[1], t[int((NR + 1) / 2)], t[NR], NR }'; }
measure() {  # $1: mirror_checks, $2: the http_code every curl must print
  policy "$1" > "$dir/policy.yaml"
  "$pinproxy" run --config "$dir/policy.yaml" --listen 127.0.0.1:3129 2> "$dir/log" &
  local proxy=$!
  listening 8443; listening 3129
  for _ in $(seq "$rounds"); do
    out=$(curl -s -x http://127.0.0.1:3129 --cacert "$dir/cert.pem" https://local.test:8443/ -o /dev/null -w '%{http_code} %{time_total}' || true)
    [ "${out%% *}" = "$2" ] || { echo "mirror_checks: $1: curl printed ${out%% *}, not $2" >&2; exit 1; }
    echo "${out#* }"
  done > "$dir/times"
  kill -KILL "$proxy"; wait "$proxy" 2>/dev/null || true
  if [ "$2" = 000 ]; then
    [ "$(grep -c 'serves one connection at a time does that' "$dir/log")" = "$rounds" ] || { echo "not every refusal said why" >&2; exit 1; }
  fi
  summary < "$dir/times"
}
echo "mirror checks on (refused mirror_lost): $(measure 1 000)"
echo "mirror_checks: 0 (200):                 $(measure 0 200)"
INNER
