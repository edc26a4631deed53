#!/usr/bin/env python3
"""Many tunnels at once with 1 and N worker loops (issue 8, items 3 and 5). Run through
Benchmarks/workers.sh, which builds release first. Loopback only; every loop is bounded.

  STREAMS parallel curl downloads of SIZE bytes each over TLS 1.3 (one Benchmarks/bulk_server.py per
  stream, so no upstream's GIL is shared), through nothing and through pinproxy (a pinned rule) with
  `workers: 1` and `workers: N` for each N in WORKERS; ROUNDS interleaved rounds, medians of the
  aggregate MB/s (all bytes over the wall time of the slowest stream) and pinproxy's CPU seconds per
  GiB from /proc/PID/stat.

Writes OUTDIR/workers.json and OUTDIR/workers.md and prints the table.
"""
import json, os, platform, socket, statistics, subprocess, sys, tempfile, time
from benchproc import cpu_seconds, free_port, run, start, stop, wait_port, write_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F = os.path.join(ROOT, "Tests/TLSInspectionTests/Fixtures")
BIN = os.environ.get("PINPROXY_BIN", os.path.join(ROOT, ".build/release/pinproxy"))
ROUNDS = int(os.environ.get("ROUNDS", "3"))
SIZE = int(os.environ.get("SIZE", str(256 << 20)))
STREAMS = int(os.environ.get("STREAMS", "8"))
WORKERS = [int(x) for x in os.environ.get("WORKERS", "1,%d" % max(2, os.cpu_count() or 2)).split(",") if x]
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "Benchmarks/results")
work = tempfile.mkdtemp(prefix="pinproxy-workers-")

upstreams = []
for _ in range(STREAMS):
    port = free_port()
    start([sys.executable, os.path.join(ROOT, "Benchmarks/bulk_server.py"), str(port), F + "/leaf-ec256.key.pem",
           F + "/leaf-ec256.chain.pem", "1.3", str(SIZE)])
    upstreams.append(port)
for port in upstreams: wait_port(port)

def start_pinproxy(workers):
    path = os.path.join(work, "pinproxy-%d.yaml" % workers)
    with open(path, "w") as f:
        f.write("""version: 1
proxy:
  allowed_ports: [%s]
  deny_destinations: [link-local]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 0
  workers: %d
defaults: { unpinned: allow, trust: "ca-file:%s/both-roots.pem" }
resolve:
  api.pinproxy.test: 127.0.0.1
rules:
  - host: api.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=", "spki-sha256:KCDrug7ej6zlHN6aFwgek+aRk6ExpqGsKfgGdPF+qhM="]
""" % (", ".join(map(str, upstreams)), workers, F))
    port = free_port()
    p = start([BIN, "run", "--config", path, "--listen", "127.0.0.1:%d" % port], stderr=open(os.path.join(work, "pinproxy-%d.log" % workers), "a"))
    wait_port(port)
    return p, port

def curl_args(port, proxy_port):
    args = ["curl", "-s", "-o", "/dev/null", "--cacert", F + "/both-roots.pem", "--max-time", "300", "-w", "%{size_download}",
            "--resolve", "api.pinproxy.test:%d:127.0.0.1" % port, "https://api.pinproxy.test:%d/big" % port]
    return args + (["--proxy", "http://127.0.0.1:%d" % proxy_port] if proxy_port else [])

def burst(proxy_port):
    """STREAMS downloads at once; aggregate MB/s, or None if one came up short."""
    env = dict(os.environ, NO_PROXY="", no_proxy="")
    began = time.monotonic()
    procs = [subprocess.Popen(curl_args(port, proxy_port), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env) for port in upstreams]
    sizes = []
    for p in procs:
        try: sizes.append(int(p.communicate(timeout=330)[0] or 0))
        except subprocess.TimeoutExpired: p.kill(); sizes.append(0)
    wall = time.monotonic() - began
    return (STREAMS * SIZE / wall / 1e6) if all(s == SIZE for s in sizes) else None

def main():
    load_before = open("/proc/loadavg").read().split()[:3]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    proxies = {"pinproxy workers=%d" % w: start_pinproxy(w) for w in WORKERS}
    paths = ["direct"] + list(proxies)
    results = {p: {"mb_s": [], "cpu_s": 0.0, "bytes": 0, "failures": 0} for p in paths}
    for _ in range(ROUNDS):
        for path in paths:
            proc, port = proxies.get(path, (None, None))
            before = cpu_seconds([proc.pid]) if proc else 0
            speed = burst(port)
            r = results[path]
            if speed is None: r["failures"] += 1; continue
            r["mb_s"].append(round(speed, 1))
            if proc: r["cpu_s"] += cpu_seconds([proc.pid]) - before
            r["bytes"] += STREAMS * SIZE
    for p, _ in proxies.values(): stop(p)
    for path, r in results.items():
        r["median_mb_s"] = round(statistics.median(r["mb_s"]), 1) if r["mb_s"] else None
        r["cpu_s_per_gib"] = round(r["cpu_s"] / (r["bytes"] / (1 << 30)), 3) if path != "direct" and r["bytes"] else None
    load_after = open("/proc/loadavg").read().split()[:3]
    report = {"date": started, "cores": os.cpu_count(), "kernel": platform.release(), "rounds": ROUNDS, "streams": STREAMS, "bytes": SIZE,
              "loadavg_before": load_before, "loadavg_after": load_after, "results": results}
    lines = ["%s, %d cores, Linux %s; %d interleaved rounds of %d parallel %d MiB TLS 1.3 downloads; load average %s before, %s after" %
             (started, os.cpu_count(), platform.release(), ROUNDS, STREAMS, SIZE >> 20, " ".join(load_before), " ".join(load_after)), "",
             "| path | aggregate MB/s (median) | rounds | pinproxy CPU s/GiB |", "|---|---|---|---|"]
    for path, r in results.items():
        rounds = ", ".join(map(str, r["mb_s"])) + (" (%d failed)" % r["failures"] if r["failures"] else "")
        lines.append("| %s | %s | %s | %s |" % (path, r["median_mb_s"], rounds, "–" if r["cpu_s_per_gib"] is None else r["cpu_s_per_gib"]))
    write_report(OUT, "workers", report, "\n".join(lines))

run(main, work)
