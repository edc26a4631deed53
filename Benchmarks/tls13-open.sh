#!/usr/bin/env bash
# What opening a TLS 1.3 flight costs, per captured flight:  Benchmarks/tls13-open.sh [ROUNDS=500]
# Compiles TLSInspection's sources (with PinPolicy's pure files, as Fuzz/run.sh does), the captures
# of Tests/TestSupport/TLS13Vectors*.swift and Benchmarks/tls13-open.swift with -O into one binary,
# and prints p50/p99 of TLS13ServerFlight init+feed+open and the ticket reader's read, in µs, as a
# markdown table. CPU only (no sockets); bounded by ROUNDS.
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-500}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/src" "$work/cshims"
# The mirror's files need swift-crypto (ML-KEM), which this swiftc line does not build; the flight
# opener uses none of them.
for f in Sources/TLSInspection/*.swift; do
  case "$f" in */Mirror*.swift) continue ;; esac
  grep -v 'import PinPolicy$' "$f" > "$work/src/$(basename "$f")"
done
printf 'module CShims {\n    header "%s/Sources/CShims/include/CShims.h"\n    export *\n}\n' "$PWD" > "$work/cshims/module.modulemap"
clang -c -O2 -I Sources/CShims/include Sources/CShims/CShims.c -o "$work/cshims.o"
swiftc -O -parse-as-library -module-name TLS13Bench -I Sources/COpenSSL -I Sources/CCompression -I "$work/cshims" \
  $(grep -L '^import Yams' Sources/PinPolicy/*.swift) "$work"/src/*.swift \
  Tests/TestSupport/TLS13Vectors*.swift Benchmarks/tls13-open.swift "$work/cshims.o" -lssl -lcrypto -lz -lbrotlidec -lzstd -o "$work/tls13-open"
"$work/tls13-open" "$rounds"
