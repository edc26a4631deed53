#!/usr/bin/env bash
# Where a warm CONNECT's instructions go:  Benchmarks/profile.sh [CONNECTS=200] [OUTDIR]
#
# Builds release and runs ONE pinproxy (`workers: 1`) under
# `valgrind --tool=callgrind`, with two TLS 1.3 upstreams on 127.0.0.1 (Benchmarks/tls13_upstream.js
# serving the CT test PKI's leaf with two embedded SCTs): one host unpinned, the same host pinned on
# a first port, and pinned under `ct: require` on a second. For each row it warms the verification
# cache (WARM CONNECTs, the first of which probes), zeroes callgrind's counters, drives CONNECTS
# sequential CONNECTs from one Python client and dumps the counters once every close line is
# written; instructions per CONNECT are the dump's totals over CONNECTS. Two kinds of client: `raw`
# sends the CONNECT, reads the `200` and closes (the path up to the 200 and the decision line, then
# the close); `tls` then makes a real TLS 1.3 handshake and a GET through the tunnel (with the
# stream and mirror checks a pinned tunnel gets). Instruction counts do not depend on the machine's
# load (unlike times), so they are the measure to compare before and after a change.
#
# Prints (and writes to OUTDIR/profile.md, default a temporary directory) the instructions per
# CONNECT of each row and, per row, the functions with the most instructions (self and inclusive),
# Swift names demangled. OUTDIR keeps the callgrind dumps for callgrind_annotate.
# Loopback only; every loop is bounded; the trap stops every process and removes the work directory.
set -euo pipefail
cd "$(dirname "$0")/.."
connects=${1:-200}
out=${2:-}
warm=${WARM:-5}
top=${TOP:-25}
tunnels=0
source Benchmarks/rows.sh  # the build, the work directory and its trap, the upstreams, wait_for
[ -n "$out" ] || out=$work/out
mkdir -p "$out"
# Valgrind 3.19 cannot read Swift 6's DWARF 5 and gives up: it runs a copy without debug sections
# (function names come from the symbol table).
objcopy --strip-debug "$binary" "$work/pinproxy"
python3 "$F/ct/make-ct-fixtures.py" --out "$work/ct" >/dev/null
leaf_pin=spki-sha256:$(openssl x509 -in "$work/ct/two-operators.pem" -pubkey -noout | openssl pkey -pubin -outform DER | openssl dgst -sha256 -binary | base64)
host=two-operators.ct.pinproxy.test
start_upstream pinned "$work/ct/two-operators.key.pem" "$work/ct/two-operators.chain.pem"
start_upstream pinned_ct "$work/ct/two-operators.key.pem" "$work/ct/two-operators.chain.pem"
cat > "$work/policy.yaml" <<YAML
version: 1
proxy:
  workers: 1
  allowed_ports: [$pinned, $pinned_ct]
  deny_destinations: [link-local]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 0
  verify_cache_ttl: 1h
  probe_timeout: 60s
  ct_log_list: $work/ct/log_list.json
defaults: { unpinned: allow, trust: "ca-file:$work/ct/ct-root.pem", require_backup: off, ct: off }
resolve:
  $host: 127.0.0.1
  unpinned.pinproxy.test: 127.0.0.1
rules:
  - { host: $host, ports: [$pinned], pins: ["$leaf_pin"] }
  - { host: $host, ports: [$pinned_ct], pins: ["$leaf_pin"], ct: require }
YAML
proxy_port=$(free_port)
valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" --dump-instr=no --compress-strings=no \
  "$work/pinproxy" run --config "$work/policy.yaml" --listen "127.0.0.1:$proxy_port" 2>"$work/proxy.log" &
vg=$!
wait_for "pinproxy's start under valgrind" 1200 grep -q event=started "$work/proxy.log"

cat > "$work/client.py" <<'PY'
import socket, ssl, sys
proxy, target, name, count, kind, cafile = int(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5], sys.argv[6]
context = ssl.create_default_context(cafile=cafile)
context.check_hostname = name.startswith("two-operators")
for _ in range(count):
    with socket.create_connection(("127.0.0.1", proxy), timeout=120) as s:
        s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 4096:
            chunk = s.recv(4096)
            if not chunk: break
            head += chunk
        if not head.startswith(b"HTTP/1.1 200"): sys.exit("no 200 for %s: %r" % (target, head[:200]))
        if kind == "tls":
            with context.wrap_socket(s, server_hostname=name) as t:
                t.sendall(b"GET /index.html HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % name.encode())
                body = b""
                while not body.endswith(b"hello\n") and len(body) < 65536:
                    chunk = t.recv(4096)
                    if not chunk: break
                    body += chunk
                if not body.endswith(b"hello\n"): sys.exit("no answer through %s: %r" % (target, body[:200]))
PY
closed() { grep -c event=tunnel_closed "$work/proxy.log" || true; }
# row: name, kind, CONNECT target, TLS name, the verify= its close lines carry
rows=("unpinned raw:raw:unpinned.pinproxy.test:$pinned:unpinned.pinproxy.test"
      "pinned raw:raw:$host:$pinned:$host"
      "pinned+ct raw:raw:$host:$pinned_ct:$host"
      "unpinned tls:tls:unpinned.pinproxy.test:$pinned:unpinned.pinproxy.test"
      "pinned tls:tls:$host:$pinned:$host"
      "pinned+ct tls:tls:$host:$pinned_ct:$host")
dump=0
for row in "${rows[@]}"; do
  IFS=: read -r label kind name port sni <<<"$row"
  before=$(closed)
  python3 "$work/client.py" "$proxy_port" "$name:$port" "$sni" "$warm" "$kind" "$work/ct/ct-root.pem"
  wait_for "the warm-up's close lines ($label)" 600 lines "$work/proxy.log" event=tunnel_closed $((before + warm))
  callgrind_control --zero "$vg" >/dev/null 2>&1
  python3 "$work/client.py" "$proxy_port" "$name:$port" "$sni" "$connects" "$kind" "$work/ct/ct-root.pem"
  wait_for "the close lines ($label)" 1200 lines "$work/proxy.log" event=tunnel_closed $((before + warm + connects))
  callgrind_control --dump="$label" "$vg" >/dev/null 2>&1
  dump=$((dump + 1))
  wait_for "callgrind's dump $dump" 300 test -s "$out/callgrind.out.$dump"
  echo "$label" > "$out/row.$dump"
done
kill -TERM "$vg"; wait "$vg" 2>/dev/null || true
if grep -E 'event=(tunnel_refused|interception_suspected)|level=(warning|error)' "$work/proxy.log" | grep -v 'ct_list' >&2; then
  echo "profile.sh: a CONNECT was refused or warned about (above): the profile is not of warm CONNECTs" >&2; exit 1
fi

python3 - "$out" "$dump" "$connects" "$top" "$(nproc)" "$(git rev-parse --short HEAD)" "$warm" <<'PY' | tee "$out/profile.md"
import re, subprocess, sys, datetime
out, dumps, connects, top, nproc, commit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
def profile(path):
    """(total, {function: self}, {function: inclusive}) from a callgrind dump. Read here rather than
    with callgrind_annotate: a call that began before the counters were zeroed is written with
    `calls=0`, and callgrind_annotate 3.19 then counts the whole call as the caller's own cost."""
    self_cost, inclusive, total = {}, {}, 0
    fn, in_call, callee = None, False, None
    for line in open(path):
        if line.startswith("fn="):
            fn = line[3:].strip(); in_call = False
        elif line.startswith("cfn="):
            callee = line[4:].strip()
        elif line.startswith("calls="):
            in_call = True
        elif line.startswith("totals:") or line.startswith("summary:"):
            total = int(line.split()[1])
        elif line[:1].isdigit() or line[:1] in "+-*":
            parts = line.split()
            if len(parts) < 2 or fn is None: continue
            cost = int(parts[-1])
            if in_call:
                in_call = False
                if callee != fn: inclusive[fn] = inclusive.get(fn, 0) + cost
            else:
                self_cost[fn] = self_cost.get(fn, 0) + cost
                inclusive[fn] = inclusive.get(fn, 0) + cost
    ranked = lambda d: sorted(((c, f) for f, c in d.items()), reverse=True)
    return total, ranked(self_cost), ranked(inclusive)
def demangle(names):
    if not names: return {}
    r = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(names), capture_output=True, text=True)
    lines = r.stdout.splitlines()
    return dict(zip(names, lines)) if len(lines) == len(names) else {n: n for n in names}
def short(name):
    name = re.sub(r"\s+", " ", name)
    return (name[:117] + "…") if len(name) > 118 else name
print("%s UTC, pinproxy %s (release), callgrind (valgrind %s), `workers: 1`, TLS 1.3 upstream Node %s; %d CONNECTs per row after %s warm ones; "
      "instructions (Ir) of every thread per CONNECT, independent of the machine's load" % (
      datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), commit,
      subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip().removeprefix("valgrind-"),
      subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip(), connects, sys.argv[7]))
print()
summary, details = [], []
for i in range(1, dumps + 1):
    label = open("%s/row.%d" % (out, i)).read().strip()
    path = "%s/callgrind.out.%d" % (out, i)
    total, self_rows, incl_rows = profile(path)
    # The pinproxy functions under which the work happens, without the loop and thread frames
    # every CONNECT passes through (over 90 %).
    own = [(c, f) for c, f in incl_rows if c < 0.9 * total and re.match(r"\$s\d*(ProxyCore|PinPolicy|TLSInspection|pinproxy)", f)]
    names = demangle(sorted({f for _, f in self_rows[:top] + own[:top]}))
    summary.append((label, total / connects))
    details.append("#### %s: %.0f instructions per CONNECT\n" % (label, total / connects))
    details.append("| self Ir/CONNECT | % | function |\n|---|---|---|")
    for count, function in self_rows[:top]:
        details.append("| %.0f | %.1f | `%s` |" % (count / connects, 100 * count / total, short(names.get(function, function)).replace("|", "\\|")))
    details.append("\n| inclusive Ir/CONNECT | % | pinproxy's function (with what it calls) |\n|---|---|---|")
    for count, function in own[:top]:
        details.append("| %.0f | %.1f | `%s` |" % (count / connects, 100 * count / total, short(names.get(function, function)).replace("|", "\\|")))
    details.append("")
print("| row | instructions per CONNECT |\n|---|---|")
for label, per in summary: print("| %s | %.0f |" % (label, per))
print()
print("\n".join(details))
PY
