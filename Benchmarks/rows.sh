# What ct.sh, mirror.sh and checks.sh share (sourced, not run): one or more pinproxy processes on
# loopback, each a row; curl times CONNECT → first application byte through each row in
# interleaved rounds of 20; every row's tunnels must get 200 and close with the row's verify=; one
# markdown table (Benchmarks/rows.py) names the machine, the load before and after and the versions.
#
# The sourcing script sets `tunnels` (rounded up to 20 here), writes each row's policy to
# $work/NAME.yaml, then calls `add_row`, `run_rows`, `check_rows` and `print_rows`. Loopback only;
# every wait is bounded; the trap stops every process and removes the work directory.
#   env: PINPROXY_BIN (a pinproxy already built: no release build; the table names it),
#        ROWS_JSON (a file: rows.py also writes the table's figures there, as JSON)
set -euo pipefail
rounds=$(( (tunnels + 19) / 20 )); tunnels=$(( rounds * 20 ))
F=$PWD/Tests/TLSInspectionTests/Fixtures
work=$(mktemp -d)
trap 'kill $(jobs -p) 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$work"' EXIT

# PINPROXY_BIN: a pinproxy already built (relay.sh passes its own, so checks.sh measures the same
# binary); otherwise the release build.
if [ -n "${PINPROXY_BIN:-}" ]; then
  binary=$(realpath "$PINPROXY_BIN")
else
  swift build -c release --product pinproxy >/dev/null
  binary=$PWD/.build/release/pinproxy
fi
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_for() {  # $1 what, $2 tries of 0.1 s, $3... the command that must succeed
  local what=$1 tries=$2; shift 2
  for _ in $(seq 1 "$tries"); do "$@" 2>/dev/null && return; sleep 0.1; done
  echo "$(basename "$0"): $what did not happen" >&2; exit 1
}
# lines FILE PATTERN N: FILE has at least N lines matching PATTERN (for wait_for, which runs it
# again at every try).
lines() { [ "$(grep -c -- "$2" "$1" 2>/dev/null || true)" -ge "$3" ]; }

# Starts Benchmarks/tls13_upstream.js on a free port (printed into the variable named $1) with key
# $2 and chain $3; $4 (optional) its lowest TLS version (TLSv1.2 lets `curl --tls-max 1.2` in).
start_upstream() {
  local -n _port=$1
  _port=$(free_port)
  node Benchmarks/tls13_upstream.js "$_port" "$2" "$3" "${4:-TLSv1.3}" 2>>"$work/upstream.log" &
  wait_for "the upstream on $_port (node Benchmarks/tls13_upstream.js)" 100 \
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $_port), 1)"
}
flights() { grep -c '^flight$' "$work/upstream.log" || true; }  # one per server flight: tunnel, probe, mirror

declare -A port pid url cafile verify curlopts keylog
row_names=()
# add_row NAME VERIFY URL CAFILE [KEYLOG] [CURL OPTIONS...]: starts pinproxy on $work/NAME.yaml; its
# tunnels fetch URL (trusting CAFILE) and must close with verify=VERIFY. KEYLOG: the file curl
# writes its TLS secrets to (SSLKEYLOGFILE), empty for none.
add_row() {
  local name=$1
  verify[$name]=$2; url[$name]=$3; cafile[$name]=$4; keylog[$name]=${5:-}; shift 5 2>/dev/null || shift $#
  curlopts[$name]="$*"
  port[$name]=$(free_port)
  "$binary" run --config "$work/$name.yaml" --listen "127.0.0.1:${port[$name]}" 2>"$work/$name.log" &
  pid[$name]=$!
  wait_for "pinproxy $name's start" 200 grep -q event=started "$work/$name.log"
  row_names+=("$name")
}

# CPU of every thread of a process, in nanoseconds (schedstat: finer than /proc/PID/stat's ticks).
cpu_ns() { cat /proc/"$1"/task/*/schedstat | awk '{ s += $1 } END { printf "%d\n", s }'; }

fetch() {  # $1 row: one tunnel, one line "connect starttransfer http_code"
  local name=$1 env=(env -u SSLKEYLOGFILE)
  [ -z "${keylog[$name]}" ] || env=(env SSLKEYLOGFILE="${keylog[$name]}")
  # shellcheck disable=SC2086  # curlopts holds separate options
  "${env[@]}" curl -s -o /dev/null --max-time 30 --proxy "http://127.0.0.1:${port[$name]}" \
    --cacert "${cafile[$name]}" ${curlopts[$name]} -w '%{time_connect} %{time_starttransfer} %{http_code}\n' \
    "${url[$name]}" >> "$work/$name.txt" || true
}

# Interleaved rounds: 20 tunnels through each row in turn, `rounds` times (after WARM tunnels per
# row that are not counted: the first fills the verification cache).
run_rows() {
  local name before
  for name in "${row_names[@]}"; do
    for _ in $(seq 1 "${WARM:-2}"); do fetch "$name"; done
    : > "$work/$name.txt"; : > "$work/$name.flights"
    wait_for "the warm-up close lines of $name" 100 lines "$work/$name.log" event=tunnel_closed "${WARM:-2}"
    grep -c event=tunnel_closed "$work/$name.log" > "$work/$name.closed0"
    cpu_ns "${pid[$name]}" > "$work/$name.cpu0"
  done
  for _ in $(seq 1 "$rounds"); do
    for name in "${row_names[@]}"; do
      before=$(flights)
      for _ in $(seq 1 20); do fetch "$name"; done
      echo $(( $(flights) - before )) >> "$work/$name.flights"
    done
  done
  load_after=$(cut -d' ' -f1-3 /proc/loadavg)
}

# Every counted tunnel: 200, and its close line with the row's verify=; nothing refused, warned
# about or suspected. A function `row_check NAME` defined by the caller adds its own conditions.
check_rows() {
  local name failed=0 closed ok others bad expected
  for name in "${row_names[@]}"; do
    expected=$(( tunnels + $(cat "$work/$name.closed0") ))
    closed=0
    for _ in $(seq 1 100); do  # the last close lines may follow curl's exit by a moment
      closed=$(grep -c "event=tunnel_closed.* verify=${verify[$name]}\( \|$\)" "$work/$name.log" || true)
      [ "$closed" -ge "$expected" ] && break; sleep 0.1
    done
    ok=$(grep -c ' 200$' "$work/$name.txt" || true)
    others=$(grep 'event=tunnel_closed' "$work/$name.log" | grep -v " verify=${verify[$name]}\( \|$\)" || true)
    bad=$(grep -E 'level=(warning|error)|event=(tunnel_refused|interception_suspected|quarantine_lifted)|reason=(mirror_|quarantined)' "$work/$name.log" || true)
    if declare -F row_check >/dev/null; then bad+=$(row_check "$name"); fi
    if [ "$ok" -ne "$tunnels" ] || [ "$closed" -ne "$expected" ] || [ -n "$others" ] || [ -n "$bad" ]; then
      echo "FAIL $name: $ok of $tunnels tunnels got 200, $closed of $expected closed with verify=${verify[$name]}" >&2
      printf '%s\n' "$others" "$bad" | grep -v "^$" | head -5 >&2 || true
      failed=1
    fi
    echo $(( $(cpu_ns "${pid[$name]}") - $(cat "$work/$name.cpu0") )) > "$work/$name.cpu"
  done
  [ "$failed" -eq 0 ] || { echo "$(basename "$0"): the run is not valid (see above)" >&2; exit 1; }
}

# count_instructions N: each row's policy again in a fresh pinproxy under callgrind (after the timed
# rounds, so valgrind does not load them): WARM tunnels, counters zeroed, N tunnels, their close
# lines, a dump; $work/NAME.ir holds the instructions (every thread) per tunnel. Independent of
# the machine's load, unlike the times.
count_instructions() {
  local n=$1 name cg vg closed0 saved
  # Valgrind 3.19 cannot read Swift 6's DWARF 5: a copy without debug sections.
  objcopy --strip-debug "$binary" "$work/pinproxy-nodebug"
  for name in "${row_names[@]}"; do
    # The timed proxy is done (and two proxies must not share one key-log file).
    kill -TERM "${pid[$name]}" 2>/dev/null || true; wait "${pid[$name]}" 2>/dev/null || true
    cg=$work/$name.callgrind
    saved=${port[$name]}; port[$name]=$(free_port)
    cp "$work/$name.txt" "$work/$name.timed"  # the tunnels below are not timed
    valgrind --tool=callgrind --callgrind-out-file="$cg" --dump-instr=no \
      "$work/pinproxy-nodebug" run --config "$work/$name.yaml" --listen "127.0.0.1:${port[$name]}" 2>"$work/$name.cg.log" &
    vg=$!
    wait_for "pinproxy $name's start under valgrind" 1200 grep -q event=started "$work/$name.cg.log"
    for _ in $(seq 1 "${WARM:-2}"); do fetch "$name"; done
    wait_for "the warm-up close lines of $name under valgrind" 600 lines "$work/$name.cg.log" event=tunnel_closed "${WARM:-2}"
    closed0=$(grep -c event=tunnel_closed "$work/$name.cg.log")
    callgrind_control --zero "$vg" >/dev/null 2>&1
    for _ in $(seq 1 "$n"); do fetch "$name"; done
    wait_for "the close lines of $name under valgrind" 1200 lines "$work/$name.cg.log" "event=tunnel_closed.* verify=${verify[$name]}" $((closed0 + n))
    callgrind_control --dump=counted "$vg" >/dev/null 2>&1
    wait_for "callgrind's dump of $name" 300 test -s "$cg.1"
    kill -TERM "$vg"; wait "$vg" 2>/dev/null || true
    awk -v n="$n" '/^(summary|totals):/ { print $2 / n; exit }' "$cg.1" > "$work/$name.ir"
    port[$name]=$saved
    mv "$work/$name.timed" "$work/$name.txt"
  done
}

# print_rows TITLE ROW=LABEL... [-- BASE:OTHER:TEXT...]: the table, then each difference named.
print_rows() {
  python3 Benchmarks/rows.py "$work" "$tunnels" "$load_before" "$load_after" "$@"
}
