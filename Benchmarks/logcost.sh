#!/usr/bin/env bash
# What a tunnel's decision and close lines cost the logging thread (issue 8, item 4), release build:
#   Benchmarks/logcost.sh [RECORDS=20000]        env: ROUNDS (7)
# Builds the pinproxy-logcost target (Benchmarks/LogCost/main.swift) with -c release and prints a
# markdown table: µs of CPU per decision+close pair in text, JSON, and with both lines filtered out.
set -euo pipefail
cd "$(dirname "$0")/.."
swift build -c release --product pinproxy-logcost >/dev/null
exec .build/release/pinproxy-logcost "${1:-20000}"
