#!/usr/bin/env bash
# What the mirror's ML-KEM key shares cost a tunnel's CPU, release build:
#   Benchmarks/mlkemcost.sh [ROUNDS=2000]
# Builds the pinproxy-mlkemcost target (Benchmarks/MLKEMCost/main.swift) with -c release and prints
# a markdown table: per group, µs of thread CPU for the mirror's key (as MirrorHello makes it) and
# for the shared secret of a server's answer (decapsulation + the curve half). CPU only, no sockets.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product pinproxy-mlkemcost >/dev/null
exec .build/release/pinproxy-mlkemcost "${1:-2000}"
