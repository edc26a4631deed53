"""The table of Benchmarks/rows.sh's rows (ct.sh, mirror.sh, checks.sh): first-byte p50/p99, the
proxy's CPU and the upstream's server flights per tunnel, headed by the machine, the load and the
versions; then each named difference.

rows.py WORK TUNNELS LOAD_BEFORE LOAD_AFTER TITLE ROW=LABEL... [-- BASE:OTHER:TEXT...]
WORK/ROW.txt: "connect starttransfer code" per tunnel; ROW.cpu: nanoseconds; ROW.flights: per round.
WORK/ROW.ir, when there: instructions (callgrind) per CONNECT, printed as a column."""
import datetime, os, platform, subprocess, sys

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
commit = tool("git", "rev-parse", "--short", "HEAD")
print("%s UTC, %s × %s, Linux %s, pinproxy %s, curl %s, OpenSSL %s, upstream Node %s; %d tunnels per row in interleaved rounds of 20; "
      "load average %s before, %s after" % (datetime.datetime.utcnow().strftime("%Y-%m-%d %H:%M"), tool("nproc"), model,
      platform.release(), commit, tool("curl", "--version").split()[1], tool("openssl", "version").split()[1],
      tool("node", "-p", "process.version + ' (OpenSSL ' + process.versions.openssl + ')'"), tunnels, load_before, load_after))
print()
with_ir = any(d[3] is not None for d in data.values())
print("| %s | tunnels | first byte p50 ms | p99 ms | proxy CPU ms/tunnel |%s server flights/tunnel |" % (title, " instructions/CONNECT (callgrind) |" if with_ir else ""))
print("|---|---|---|---|---|%s---|" % ("---|" if with_ir else ""))
for name, label in rows:
    values, cpu, flights, ir = data[name]
    irtext = (" %s |" % ("%.0f" % ir if ir is not None else "–")) if with_ir else ""
    print("| %s | %d | %.2f | %.2f | %.3f |%s %.2f |" % (label, len(values), pct(values, 50), pct(values, 99), cpu, irtext, flights))
if diffs: print()
for base, other, text in diffs:
    a, b = data[base], data[other]
    line = "- %s: %+.2f ms at p50, %+.2f ms at p99, %+.3f ms CPU per tunnel" % (text, pct(b[0], 50) - pct(a[0], 50), pct(b[0], 99) - pct(a[0], 99), b[1] - a[1])
    if a[3] is not None and b[3] is not None: line += ", %+.0f instructions per CONNECT" % (b[3] - a[3])
    print(line)
