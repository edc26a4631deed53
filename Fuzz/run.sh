#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for a bounded time or number of inputs.
#
#   Fuzz/run.sh [-t SECONDS] [-n RUNS] [-j JOBS] [TARGET...]     (default: every target, 60 s each)
#   Fuzz/run.sh -b [TARGET...]                                   (build only)
#
# Each target is one line of TARGETS below: its name, its harness, the sources compiled into the
# same module, and what it links: Yams, or OpenSSL with CShims and the zlib, brotli and zstd
# decoders (the TLS 1.3 flight opener). Seeds come from seed_<name> (a function below) or from
# Fuzz/seeds/<name>/; a dictionary from Fuzz/<name>.dict if there is one. To add a target, add a
# line (and a seed function or folder). SwiftPM cannot link a fuzzer executable, so each
# target is compiled with swiftc directly.
#
# Output: Fuzz/out/<name>-fuzz, its working corpus Fuzz/out/corpus/<name>/, and any finding as
# Fuzz/out/<name>-crash-… / -timeout-… / -oom-…; rerun one with: Fuzz/out/<name>-fuzz FILE
# Exit status: non-zero if any target found something (or did not build).
set -euo pipefail
cd "$(dirname "$0")/.."

tls_reader="Sources/TLSInspection/TLSRecordReader.swift Sources/TLSInspection/ClientHello.swift Sources/TLSInspection/ServerHello.swift Sources/TLSInspection/ClientFlightReader.swift Sources/TLSInspection/ServerFlightReader.swift"
pure_policy="$(grep -L '^import Yams' Sources/PinPolicy/*.swift | tr '\n' ' ')"   # no Yams
all_policy="$(ls Sources/PinPolicy/*.swift | tr '\n' ' ')"

# name         | harness                      | module     | links   | sources
TARGETS=(
  "parsers     | Fuzz/ParsersFuzz.swift       | Parsers    | none    | $pure_policy Fuzz/out/ConnectRequest.swift"
  "tlsreader   | Fuzz/TLSReaderFuzz.swift     | TLSReader  | none    | $tls_reader"
  "policy      | Fuzz/PolicyLoaderFuzz.swift  | PinPolicy  | yams    | $all_policy"
  "tls13       | Fuzz/TLS13FlightFuzz.swift   | TLS13      | openssl | $pure_policy Fuzz/out/tls13/*.swift"
  "plainhttp   | Fuzz/PlainHTTPFuzz.swift     | PlainHTTP  | none    | $pure_policy Fuzz/out/ConnectRequest.swift Fuzz/out/PlainHTTP.swift"
)

seconds=60 runs="" jobs=1 build_only=no
while getopts "t:n:j:b" opt; do
  case $opt in
    t) seconds=$OPTARG ;;
    n) runs=$OPTARG ;;
    j) jobs=$OPTARG ;;
    b) build_only=yes ;;
    *) echo "usage: $0 [-t SECONDS] [-n RUNS] [-j JOBS] [-b] [TARGET...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
wanted=("$@")

field() { echo "$1" | cut -d'|' -f"$2" | xargs; }
mkdir -p Fuzz/out/corpus

# The request parser's `import PinPolicy` goes: the parsers target is one module.
grep -v '^import PinPolicy$' Sources/ProxyCore/Request/ConnectRequest.swift > Fuzz/out/ConnectRequest.swift
grep -v '^import PinPolicy$' Sources/ProxyCore/Request/PlainHTTP.swift > Fuzz/out/PlainHTTP.swift
# The TLS 1.3 flight opener needs TLSInspection's other files (Certificate, for the leaf's key), and
# so PinPolicy's pure files: one module, their `import PinPolicy` lines dropped.
# The mirror's files are left out: they need swift-crypto (ML-KEM), which this swiftc line does not
# build, and the flight opener uses none of them.
mkdir -p Fuzz/out/tls13
rm -f Fuzz/out/tls13/Mirror*.swift
for f in Sources/TLSInspection/*.swift; do
  case "$f" in */Mirror*.swift) continue ;; esac
  grep -v 'import PinPolicy$' "$f" > "Fuzz/out/tls13/$(basename "$f")"
done

# CShims.c beside the module, and a module map for its header (SwiftPM makes one itself).
build_cshims() {
  mkdir -p Fuzz/out/cshims
  printf 'module CShims {\n    header "%s/Sources/CShims/include/CShims.h"\n    export *\n}\n' "$PWD" > Fuzz/out/cshims/module.modulemap
  clang -c -fsanitize=fuzzer-no-link,address -O1 -I Sources/CShims/include Sources/CShims/CShims.c -o Fuzz/out/cshims.o
}

# Yams (the version Package.resolved pins) as a static library built with the same sanitizers, so
# that its parser is covered too. CYaml is C: clang with coverage but without libFuzzer's main.
build_yams() {
  local yams=.build/checkouts/Yams out=Fuzz/out/yams
  [ -d "$yams/Sources/Yams" ] || swift package resolve >/dev/null
  if [ -f "$out/Yams.swiftmodule" ] && [ -f "$out/libYams.a" ] && [ -z "$(find "$yams/Sources" -newer "$out/libYams.a" -print -quit)" ]; then return; fi
  rm -rf "$out" && mkdir -p "$out"
  for c in "$yams"/Sources/CYaml/src/*.c; do
    clang -fsanitize=fuzzer-no-link,address -O1 -g -DYAML_DECLARE_STATIC -I "$yams/Sources/CYaml/include" -c "$c" -o "$out/$(basename "$c" .c).o"
  done
  (cd "$out" && swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name Yams -emit-module -emit-library -static \
     -DSWIFT_PACKAGE -Xcc -DYAML_DECLARE_STATIC -I "../../../$yams/Sources/CYaml/include" "../../../$yams"/Sources/Yams/*.swift -o libYams.a 2>&1 | grep -v "Cannot export local symbol" || true)
  ar rcs "$out/libYams.a" "$out"/*.o
}

build() {   # build NAME HARNESS MODULE LINKS SOURCES...
  local name=$1 harness=$2 module=$3 links=$4; shift 4
  local extra=()
  case $links in
    yams)
      build_yams
      extra=(-Xcc -DYAML_DECLARE_STATIC -I Fuzz/out/yams -I .build/checkouts/Yams/Sources/CYaml/include -L Fuzz/out/yams -lYams) ;;
    openssl)
      build_cshims
      extra=(-I Sources/COpenSSL -I Sources/CCompression -I Fuzz/out/cshims Fuzz/out/cshims.o -lssl -lcrypto -lz -lbrotlidec -lzstd) ;;
  esac
  rm -f "Fuzz/out/$name-fuzz"
  swiftc -sanitize=fuzzer,address -parse-as-library -O -module-name "$module" -I Sources/CStatfs ${extra[@]+"${extra[@]}"} \
    "$@" "$harness" -o "Fuzz/out/$name-fuzz" 2>&1 | grep -v "Cannot export local symbol" || true
  [ -x "Fuzz/out/$name-fuzz" ]
}

# Seeds: one valid input per parser (the first byte picks the parser).
seed_parsers() {
  printf '\x00api.example.com:443' > "$1/authority"
  printf '\x01CONNECT a.example:443 HTTP/1.1\r\nHost: a.example:443\r\n\r\n' > "$1/request"
  printf '\x02**.example.com' > "$1/pattern"
  printf '\x03spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=' > "$1/pin"
  printf '\x042001:db8::/32' > "$1/cidr"
  printf '\x052027-06-30T00:00:00+02:00' > "$1/time"
  printf '\x06AAECAwQ=' > "$1/base64"
  { printf '\x07'; cat Tests/TLSInspectionTests/Fixtures/ct/log_list.json; } > "$1/ct-log-list"
}

# Seeds: a request of each framing, a response head, and chunked and sized bodies (the first byte
# picks the target, the second is its knob: a parent proxy, HEAD, the slice size).
seed_plainhttp() {
  printf '\x00\x00GET http://a.example/x?y HTTP/1.1\r\nHost: b\r\nConnection: keep-alive, X-A\r\nX-A: 1\r\nAccept: */*\r\n\r\n' > "$1/get"
  printf '\x00\x01POST http://[::1]:8080/u HTTP/1.1\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n' > "$1/post-chunked"
  printf '\x00\x01PUT http://10.0.0.1/ HTTP/1.0\r\nContent-Length: 00\r\n\r\n' > "$1/put-length"
  printf '\x01\x00HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nConnection: close\r\n\r\n' > "$1/response"
  printf '\x01\x01HTTP/1.0 304 Not Modified\r\nContent-Length: 5\r\n\r\n' > "$1/not-modified"
  printf '\x02\x035;ext="a b"\r\nhello\r\n00a\r\n0123456789\r\n0\r\nX-Trailer: t\r\n\r\nnext' > "$1/chunked"
  printf '\x02\x85abcdefghij' > "$1/length"
}

# Seeds: every captured flight of the reader's tests (real clients and servers), each with a
# default-limit prefix byte and a small-limit, mid-split one.
seed_tlsreader() {
  python3 - "$1" Tests/TestSupport/TLSReaderVectors.swift <<'EOF'
import base64, re, sys
out, source = sys.argv[1], open(sys.argv[2]).read()
for name, body in re.findall(r'static let (\w+) = """\n(.*?)"""', source, re.S):
    data = base64.b64decode("".join(body.split()))
    open(f"{out}/{name}", "wb").write(b"\x00" + data)
    open(f"{out}/{name}-split", "wb").write(b"\x81" + data)
EOF
}

# Seeds: RFC 8448 §3's encrypted flight (raw mode) and its plaintext messages (sealed mode), and
# those messages with the Certificate compressed by each RFC 8879 algorithm (python3's zlib; brotli
# and zstd from the peers venv when it is there).
seed_tls13() {
  local python=python3
  [ -x .build-peers/bin/python ] && python=.build-peers/bin/python
  "$python" Fuzz/tls13-seeds.py Tests/TestSupport/RFC8448Vectors.swift "$1"
}

status=0
for row in "${TARGETS[@]}"; do
  name=$(field "$row" 1)
  if [ ${#wanted[@]} -gt 0 ] && [[ ! " ${wanted[*]} " == *" $name "* ]]; then continue; fi
  # shellcheck disable=SC2046
  if ! build "$name" "$(field "$row" 2)" "$(field "$row" 3)" "$(field "$row" 4)" $(field "$row" 5); then
    echo "fuzz $name: build failed" >&2; status=1; continue
  fi
  [ "$build_only" = yes ] && continue
  corpus=Fuzz/out/corpus/$name
  mkdir -p "$corpus"
  if declare -F "seed_$name" >/dev/null; then "seed_$name" "$corpus"; fi
  [ -d "Fuzz/seeds/$name" ] && cp Fuzz/seeds/"$name"/* "$corpus"/
  options=(-artifact_prefix="Fuzz/out/$name-" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048)
  if [ -n "$runs" ]; then options+=(-runs="$runs"); else options+=(-max_total_time="$seconds"); fi
  [ -f "Fuzz/$name.dict" ] && options+=(-dict="Fuzz/$name.dict")
  [ "$jobs" -gt 1 ] && options+=(-fork="$jobs" -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1)
  echo "fuzz $name: ${options[*]}"
  log=Fuzz/out/$name.log
  if "Fuzz/out/$name-fuzz" "${options[@]}" "$corpus" >"$log" 2>&1; then
    grep -E '^(stat::number_of_executed_units|stat::average_exec_per_sec|#[0-9]+ +DONE)' "$log" || true
  else
    echo "fuzz $name: FOUND SOMETHING (see $log)" >&2
    grep -E 'ERROR|Fatal error|Test unit written|SUMMARY|precondition' "$log" | head -20 >&2
    status=1
  fi
  if [ "$jobs" -gt 1 ] && ls Fuzz/out/"$name"-crash-* Fuzz/out/"$name"-timeout-* Fuzz/out/"$name"-oom-* >/dev/null 2>&1; then
    echo "fuzz $name: findings in Fuzz/out/$name-*" >&2; status=1
  fi
done
exit $status
