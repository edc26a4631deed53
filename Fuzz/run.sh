#!/usr/bin/env bash
# Builds and runs the parser fuzzer for a bounded time (default 60 s):  Fuzz/run.sh [SECONDS]
# Crashes land in Fuzz/out/ as crash-*; rerun one with: Fuzz/out/parsers-fuzz Fuzz/out/crash-…
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
mkdir -p Fuzz/out Fuzz/out/corpus
sources=$(ls Sources/PinPolicy/*.swift | grep -v PolicyLoader.swift)   # the YAML loader needs Yams; the rest is pure
# One module holds every parser, so the request parser's `import PinPolicy` goes.
grep -v '^import PinPolicy$' Sources/ProxyCore/ConnectRequest.swift > Fuzz/out/ConnectRequest.swift
swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name Parsers \
  $sources Fuzz/out/ConnectRequest.swift Fuzz/ParsersFuzz.swift -o Fuzz/out/parsers-fuzz 2>&1 | grep -v "Cannot export local symbol" || true
# Seeds: one valid input per parser.
printf '\x00api.example.com:443' > Fuzz/out/corpus/authority
printf '\x01CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n' > Fuzz/out/corpus/request
printf '\x02**.example.com' > Fuzz/out/corpus/pattern
printf '\x03sha256/kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=' > Fuzz/out/corpus/pin
printf '\x042001:db8::/32' > Fuzz/out/corpus/cidr
printf '\x052027-06-30T00:00:00+02:00' > Fuzz/out/corpus/time
printf '\x06AAECAwQ=' > Fuzz/out/corpus/base64
Fuzz/out/parsers-fuzz -max_total_time="$seconds" -artifact_prefix=Fuzz/out/ -print_final_stats=1 Fuzz/out/corpus 2>&1 | tail -15
