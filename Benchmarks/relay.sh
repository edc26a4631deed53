#!/usr/bin/env bash
# The relay benchmark (issue 8, item 5): builds release, then runs Benchmarks/relay.py — 1 GiB over
# HTTPS (TLS 1.2 and 1.3) directly and through pinproxy (relay: copy, relay: splice), Squid and
# tinyproxy in interleaved rounds, and 1,000 / 9,000 idle tunnels' success and peak RSS.
#   Benchmarks/relay.sh [OUTDIR]        env: ROUNDS (5), SIZE (bytes, 1 GiB), IDLE (1000,9000)
# Squid and tinyproxy are installed with apt when missing; they run as this user's children on
# loopback ports with their own temporary configs, never as system services.
set -euo pipefail
cd "$(dirname "$0")/.."
for tool in squid tinyproxy; do
  command -v "$tool" >/dev/null || PATH=$PATH:/usr/sbin command -v "$tool" >/dev/null || apt-get install -y squid tinyproxy
done
swift build -c release --product pinproxy >/dev/null
ulimit -n 20000
exec env PATH="$PATH:/usr/sbin" python3 Benchmarks/relay.py "${1:-Benchmarks/results}"
