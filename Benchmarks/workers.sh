#!/usr/bin/env bash
# Many tunnels at once with workers=1 and workers=N (issue 8): builds release, then runs
# Benchmarks/workers.py — STREAMS (8) parallel SIZE (256 MiB) TLS 1.3 downloads directly and through
# pinproxy with each worker count in WORKERS (default "1,<cores>"), ROUNDS (3) interleaved rounds.
#   Benchmarks/workers.sh [OUTDIR]        env: ROUNDS, SIZE (bytes), STREAMS, WORKERS
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product pinproxy >/dev/null
exec python3 Benchmarks/workers.py "${1:-Benchmarks/results}"
