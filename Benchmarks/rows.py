"""The table of Benchmarks/rows.sh's rows (ct.sh, mirror.sh, checks.sh): first-byte p50/p99, the
proxy's CPU and the upstream's server flights per tunnel, headed by the machine, the load and the
versions; then each named difference.

rows.py WORK TUNNELS LOAD_BEFORE LOAD_AFTER TITLE ROW=LABEL... [-- BASE:OTHER:TEXT...]
WORK/ROW.txt: "connect starttransfer code" per tunnel; ROW.cpu: nanoseconds; ROW.flights: per round.
WORK/ROW.ir, when there: instructions (callgrind) per CONNECT, printed as a column.
env ROWS_JSON=FILE: the same figures also as JSON in FILE, with the header line and the markdown
after it apart (Benchmarks/relay.py folds checks.sh's table into its own report that way).
env PINPROXY_BIN: the binary measured, named in the header instead of the commit."""
import datetime, json, os, platform, subprocess, sys

work, tunnels, load_before, load_after, title = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
rest = sys.argv[6:]
rows = [a.split("=", 1) for a in (rest[:rest.index("--")] if "--" in rest else rest)]
diffs = [a.split(":", 2) for a in rest[rest.index("--") + 1:]] if "--" in rest else []

def first_bytes(name):
    values = []
    for line in open("%s/%s.txt" % (work, name)):
        connect, first, _ = line.split()
        values.append((float(first) - float(connect)) * 1000)
    return sorted(values)

def pct(v, p): return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]

def tool(*args):
    try: return subprocess.run(args, capture_output=True, text=True).stdout.strip()
    except OSError: return "?"

data = {}
for name, _ in rows:
    flights = sum(int(l) for l in open("%s/%s.flights" % (work, name)))
    cpu_ms = int(open("%s/%s.cpu" % (work, name)).read()) / 1e6
    ir = "%s/%s.ir" % (work, name)
    data[name] = (first_bytes(name), cpu_ms / tunnels, flights / tunnels, float(open(ir).read()) if os.path.exists(ir) else None)
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
binary = "binary " + os.environ["PINPROXY_BIN"] if os.environ.get("PINPROXY_BIN") else tool("git", "rev-parse", "--short", "HEAD")
curl = tool("curl", "--version").split()[1]
openssl = tool("openssl", "version").split()[1]
node = tool("node", "-p", "process.version + ' (OpenSSL ' + process.versions.openssl + ')'")
header = ("%s UTC, %s × %s, Linux %s, pinproxy %s, curl %s, OpenSSL %s, upstream Node %s; %d tunnels per row in interleaved rounds of 20; "
          "load average %s before, %s after" % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), tool("nproc"), model,
          platform.release(), binary, curl, openssl, node, tunnels, load_before, load_after))

with_ir = any(d[3] is not None for d in data.values())
lines = ["| %s | tunnels | first byte p50 ms | p99 ms | proxy CPU ms/tunnel |%s server flights/tunnel |" % (title, " instructions/CONNECT (callgrind) |" if with_ir else ""),
         "|---|---|---|---|---|%s---|" % ("---|" if with_ir else "")]
report_rows = []
for name, label in rows:
    values, cpu, flights, ir = data[name]
    irtext = (" %s |" % ("%.0f" % ir if ir is not None else "–")) if with_ir else ""
    lines.append("| %s | %d | %.2f | %.2f | %.3f |%s %.2f |" % (label, len(values), pct(values, 50), pct(values, 99), cpu, irtext, flights))
    report_rows.append({"row": name, "label": label, "tunnels": len(values), "first_byte_ms_p50": round(pct(values, 50), 3),
                        "first_byte_ms_p99": round(pct(values, 99), 3), "cpu_ms_per_tunnel": round(cpu, 4),
                        "instructions_per_connect": None if ir is None else round(ir), "server_flights_per_tunnel": round(flights, 3)})
if diffs: lines.append("")
report_diffs = []
for base, other, text in diffs:
    a, b = data[base], data[other]
    p50, p99, cpu = pct(b[0], 50) - pct(a[0], 50), pct(b[0], 99) - pct(a[0], 99), b[1] - a[1]
    ir = b[3] - a[3] if a[3] is not None and b[3] is not None else None
    line = "- %s: %+.2f ms at p50, %+.2f ms at p99, %+.3f ms CPU per tunnel" % (text, p50, p99, cpu)
    if ir is not None: line += ", %+.0f instructions per CONNECT" % ir
    lines.append(line)
    report_diffs.append({"base": base, "other": other, "text": text, "first_byte_ms_p50": round(p50, 3), "first_byte_ms_p99": round(p99, 3),
                         "cpu_ms_per_tunnel": round(cpu, 4), "instructions_per_connect": None if ir is None else round(ir)})

print(header)
print()
print("\n".join(lines))
if os.environ.get("ROWS_JSON"):
    json.dump({"header": header, "tunnels_per_row": tunnels, "loadavg_before": load_before.split(), "loadavg_after": load_after.split(),
               "versions": {"pinproxy": binary, "curl": curl, "openssl": openssl, "node": node},
               "rows": report_rows, "differences": report_diffs, "markdown": "\n".join(lines)},
              open(os.environ["ROWS_JSON"], "w"), indent=2)
