#!/usr/bin/env bash
# The benchmark of issues 8 and 21 in one command: builds release, then runs Benchmarks/relay.py —
# interleaved in one run, loopback only, every loop bounded:
#   1 GiB over HTTPS (TLS 1.2 and 1.3, from Benchmarks/bulk_sender.c) directly and through the
#     ceiling (Benchmarks/ceiling_relay.c: copy and splice), pinproxy (relay: copy, relay: splice),
#     Squid and tinyproxy, ROUNDS rounds, medians, each proxy's CPU s/GiB from /proc;
#   PARALLEL tunnels at once sharing SIZE (TLS 1.3): aggregate MB/s per path;
#   CONNECT → 200 and → first byte over LATENCY sequential tunnels: pinproxy pinned cold (a probe
#     each), pinned warm (verification cache), unpinned, the C relay (copy), Squid, tinyproxy, and
#     direct (first byte); a table per upstream of SETUP_UPSTREAMS: one Node process ("node"), a
#     Node cluster of one process per online core ("node-cluster"; Benchmarks/tls13_upstream.js,
#     UPSTREAM_WORKERS), nginx with a worker per online core ("nginx", with the share of pinned
#     tunnels whose two connections two workers served, from a logged trial before the round);
#   what each check costs: Benchmarks/checks.sh with the same pinproxy binary, CHECKS tunnels per
#     row (no check TLS 1.3 / 1.2, probe, stream check, key-log check, mirror check, CT) and
#     CHECK_INSTRUCTIONS more per row under callgrind, its table and each check against its baseline;
#   1,000 and 9,000 simultaneous idle tunnels: success, RSS held, VmHWM open and through teardown.
# The two C programs are built with cc in the run's temporary work directory, removed at exit.
# Writes OUTDIR/relay.json and OUTDIR/relay.md (default Benchmarks/results/) and prints the tables,
# the first line naming the machine, every peer's version and the load average before and after
# the whole run. Exits 1 (after writing them) when checks.sh found a tunnel without its 200 or verify=.
#   Benchmarks/relay.sh [--quick] [OUTDIR]
#     env: ROUNDS (5), SIZE (bytes, 1 GiB), PARALLEL (16), LATENCY (500), IDLE (1000,9000),
#          IDLE_PROXIES (e.g. "pinproxy": the idle rounds of those proxies only),
#          CHECKS (300 tunnels per check row; 0: no checks), CHECK_INSTRUCTIONS (40 tunnels per row
#          under callgrind; 0: none),
#          PINPROXY_BIN (a pinproxy binary already built: no release build; the table names it)
#          SETUP_UPSTREAMS (node,node-cluster,nginx: the setup rounds to run, in that order)
#     --quick: ROUNDS=1 SIZE=256 MiB (CPU time counts in 10 ms ticks: 0.04 s/GiB at this size) LATENCY=50 IDLE=200 CHECKS=40,
#              into a temporary OUTDIR unless one is given
# Squid, tinyproxy, nginx (when its setup round runs) and valgrind (when CHECK_INSTRUCTIONS is not 0)
# are installed with apt when missing; Squid, tinyproxy and nginx run as this user's children on
# loopback ports with their own temporary configs, never as system services.
set -euo pipefail
[ -z "${PINPROXY_BIN:-}" ] || PINPROXY_BIN=$(realpath "$PINPROXY_BIN")  # before the cd below
cd "$(dirname "$0")/.."
out=Benchmarks/results
if [ "${1:-}" = "--quick" ]; then
  shift
  export ROUNDS=${ROUNDS:-1} SIZE=${SIZE:-$((256 << 20))} LATENCY=${LATENCY:-50} IDLE=${IDLE:-200} CHECKS=${CHECKS:-40}
  [ -n "${1:-}" ] || out=$(mktemp -d /tmp/pinproxy-bench-quick.XXXXXX)  # only when no OUTDIR is given
fi
out=${1:-$out}
for tool in squid tinyproxy; do
  command -v "$tool" >/dev/null || PATH=$PATH:/usr/sbin command -v "$tool" >/dev/null || apt-get install -y squid tinyproxy
done
if [ "${LATENCY:-500}" != 0 ] && [[ ",${SETUP_UPSTREAMS:-nginx}," == *,nginx,* ]]; then
  command -v nginx >/dev/null || PATH=$PATH:/usr/sbin command -v nginx >/dev/null || apt-get install -y nginx  # the nginx setup round
fi
if [ "${CHECKS:-300}" != 0 ] && [ "${CHECK_INSTRUCTIONS:-40}" != 0 ]; then
  command -v valgrind >/dev/null || apt-get install -y valgrind  # checks.sh's instruction counts
fi
[ -n "${PINPROXY_BIN:-}" ] || swift build -c release --product pinproxy >/dev/null
# 9,000 tunnels hold ~18,000 descriptors in the proxy and 9,000 in the client: up to the hard limit.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || ulimit -n 20000
exec env PATH="$PATH:/usr/sbin" python3 Benchmarks/relay.py "$out"
