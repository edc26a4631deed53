#!/usr/bin/env python3
"""Throughput and memory of pinproxy's relay next to Squid, tinyproxy and no proxy (issue 8, item 5).
Run through Benchmarks/relay.sh, which builds release first. Loopback only; every loop is bounded.

  throughput  1 GiB over HTTPS (curl → Benchmarks/bulk_server.py, 1 MiB per SSL_write), TLS 1.2 and 1.3, through: nothing,
              pinproxy (relay: copy and relay: splice, a pinned rule), Squid, tinyproxy; ROUNDS
              interleaved rounds (each round runs every path once), medians; each proxy's CPU seconds
              per GiB from /proc/PID/stat (utime + stime) over its transfers.
  idle        1,000 and 9,000 simultaneous idle CONNECT tunnels (plain TCP to a holding upstream):
              how many got 200, and the proxy's VmHWM (peak RSS) after they were opened and closed,
              each count in a fresh proxy.

Writes JSON and a markdown table to OUTDIR (relay.json, relay.md) and prints the table.
"""
import json, os, platform, resource, selectors, signal, socket, statistics, subprocess, sys, tempfile, threading, time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F = os.path.join(ROOT, "Tests/TLSInspectionTests/Fixtures")
BIN = os.environ.get("PINPROXY_BIN", os.path.join(ROOT, ".build/release/pinproxy"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
SIZE = int(os.environ.get("SIZE", str(1 << 30)))
IDLE_COUNTS = [int(x) for x in os.environ.get("IDLE", "1000,9000").split(",") if x]
OUT = sys.argv[1] if len(sys.argv) > 1 else ROOT
TICK = os.sysconf("SC_CLK_TCK")
work = tempfile.mkdtemp(prefix="pinproxy-bench-")
children = []

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def start(args, **kw):
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=kw.pop("stderr", subprocess.DEVNULL), **kw)
    children.append(p)
    return p

def wait_port(port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close(); return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("nothing listens on %d" % port)

def stop(p):
    if p.poll() is None:
        p.terminate()
        try: p.wait(10)
        except subprocess.TimeoutExpired: p.kill(); p.wait(5)

def cpu_seconds(pids):
    total = 0
    for pid in pids:
        try:
            fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / TICK

def process_tree(pid):
    """pid and its descendants (Squid forks a worker)."""
    out, todo = [], [pid]
    while todo and len(out) < 64:
        p = todo.pop(); out.append(p)
        try: todo += [int(c) for c in open("/proc/%d/task/%d/children" % (p, p)).read().split()]
        except OSError: pass
    return out

def vmhwm_kib(pids):
    total = 0
    for pid in pids:
        try:
            for line in open("/proc/%d/status" % pid):
                if line.startswith("VmHWM:"): total += int(line.split()[1])
        except OSError:
            pass
    return total

# --- upstreams -------------------------------------------------------------------------------
upstreams = {}
for tls in ("1.2", "1.3"):
    port = free_port()
    start([sys.executable, os.path.join(ROOT, "Benchmarks/bulk_server.py"), str(port), F + "/leaf-ec256.key.pem",
           F + "/leaf-ec256.chain.pem", tls, str(SIZE)])
    upstreams[tls] = port
for port in upstreams.values(): wait_port(port)

# --- proxies ---------------------------------------------------------------------------------
def pinproxy_config(relay, ports, extra=""):
    path = os.path.join(work, "pinproxy-%s-%d.yaml" % (relay, len(os.listdir(work))))
    with open(path, "w") as f:
        f.write("""version: 1
proxy:
  allowed_ports: [%s]
  deny_destinations: [link-local]
  dns: { nameservers: [], hosts_file: none }
  stats_interval: 0
  max_tunnels: 20000
  relay: %s
%sdefaults: { unpinned: allow, trust: "ca-file:%s/both-roots.pem" }
resolve:
  api.pinproxy.test: 127.0.0.1
  free.pinproxy.test: 127.0.0.1
rules:
  - host: api.pinproxy.test
    pins: ["spki-sha256:kBQGSGfznkVIdbhVncSBp6O/buiORHazf74OhcSQKZE=", "spki-sha256:KCDrug7ej6zlHN6aFwgek+aRk6ExpqGsKfgGdPF+qhM="]
""" % (", ".join(map(str, ports)), relay, extra, F))
    return path

def start_pinproxy(relay, ports):
    port = free_port()
    log = open(os.path.join(work, "pinproxy-%s.log" % relay), "a")
    p = start([BIN, "run", "--config", pinproxy_config(relay, ports), "--listen", "127.0.0.1:%d" % port], stderr=log)
    wait_port(port)
    return p, port

def start_squid():
    port = free_port()
    d = os.path.join(work, "squid-%d" % port); os.makedirs(d); os.chmod(d, 0o777)
    conf = os.path.join(d, "squid.conf")
    with open(conf, "w") as f:
        f.write("""http_port 127.0.0.1:%d
acl localnet src 127.0.0.0/8
acl CONNECT method CONNECT
http_access allow localnet
http_access deny all
cache deny all
cache_mem 0 MB
access_log none
cache_log %s/cache.log
pid_filename %s/squid.pid
coredump_dir %s
max_filedescriptors 20000
cache_effective_user proxy
shutdown_lifetime 1 seconds
dns_nameservers 127.0.0.1
hosts_file none
""" % (port, d, d, d))
    p = start(["squid", "-N", "-f", conf])
    wait_port(port)
    return p, port

def start_tinyproxy():
    port = free_port()
    d = os.path.join(work, "tinyproxy-%d" % port); os.makedirs(d)
    conf = os.path.join(d, "tinyproxy.conf")
    with open(conf, "w") as f:
        f.write("""Port %d
Listen 127.0.0.1
Timeout 600
MaxClients 20000
Allow 127.0.0.1
LogLevel Critical
User nobody
Group nogroup
""" % port)
    p = start(["tinyproxy", "-d", "-c", conf])
    wait_port(port)
    return p, port

# --- throughput ------------------------------------------------------------------------------
def curl(tls, proxy_port, pinproxy=False):
    port = upstreams[tls]
    args = ["curl", "-s", "-o", "/dev/null", "--cacert", F + "/both-roots.pem", "--max-time", "300", "-w", "%{speed_download} %{size_download}",
            "--resolve", "api.pinproxy.test:%d:127.0.0.1" % port, "https://api.pinproxy.test:%d/big" % port]
    if proxy_port: args += ["--proxy", "http://127.0.0.1:%d" % proxy_port]
    if proxy_port and not pinproxy:  # Squid and tinyproxy resolve names with the system: CONNECT to the address
        args += ["--connect-to", "api.pinproxy.test:%d:127.0.0.1:%d" % (port, port)]
    env = dict(os.environ, NO_PROXY="", no_proxy="")
    out = subprocess.run(args, capture_output=True, text=True, timeout=330, env=env).stdout.split()
    speed, size = float(out[0]), int(out[1])
    return speed / 1e6 if size == SIZE else None

def throughput():
    ports = list(upstreams.values())
    proxies = {"pinproxy copy": start_pinproxy("copy", ports), "pinproxy splice": start_pinproxy("splice", ports),
               "squid": start_squid(), "tinyproxy": start_tinyproxy()}
    paths = ["direct"] + list(proxies)
    results = {tls: {p: {"mb_s": [], "cpu_s": 0.0, "bytes": 0} for p in paths} for tls in upstreams}
    for _ in range(ROUNDS):
        for tls in upstreams:
            for path in paths:
                proc, port = proxies.get(path, (None, None))
                before = cpu_seconds(process_tree(proc.pid)) if proc else 0
                speed = curl(tls, port, pinproxy=path.startswith("pinproxy"))
                r = results[tls][path]
                if speed is None: r.setdefault("failures", 0); r["failures"] += 1; continue
                r["mb_s"].append(round(speed, 1))
                if proc:
                    r["cpu_s"] += cpu_seconds(process_tree(proc.pid)) - before
                r["bytes"] += SIZE
    for p, _ in proxies.values(): stop(p)
    for tls in results:
        for path, r in results[tls].items():
            r["median_mb_s"] = round(statistics.median(r["mb_s"]), 1) if r["mb_s"] else None
            r["cpu_s_per_gib"] = round(r["cpu_s"] / (r["bytes"] / (1 << 30)), 3) if path != "direct" and r["bytes"] else None
    return results

# --- idle tunnels ----------------------------------------------------------------------------
class Holder:
    """A TCP upstream that accepts everything and holds it (no thread per connection)."""
    def __init__(self):
        self.srv = socket.socket(); self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0)); self.srv.listen(4096); self.srv.setblocking(False)
        self.port = self.srv.getsockname()[1]; self.conns = []; self.running = True
        threading.Thread(target=self.loop, daemon=True).start()
    def loop(self):
        sel = selectors.DefaultSelector(); sel.register(self.srv, selectors.EVENT_READ)
        while self.running:
            for _ in sel.select(0.2):
                for _ in range(256):
                    try: c, _ = self.srv.accept()
                    except OSError: break
                    self.conns.append(c)
    def close(self):
        self.running = False
        for c in self.conns: c.close()
        self.conns = []

def idle_tunnels(proxy_port, target_port, count, host, seconds=60):
    """Opens `count` CONNECT tunnels at once and reads their answers with one deadline; returns the
    sockets and how many got 200."""
    request = b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), target_port, host.encode(), target_port)
    sel = selectors.DefaultSelector()
    socks, heads, ok = [], {}, 0
    deadline = time.time() + seconds
    for _ in range(count):
        if time.time() > deadline: break
        s = socket.socket(); s.setblocking(False)
        try: s.connect(("127.0.0.1", proxy_port))
        except BlockingIOError: pass
        except OSError: s.close(); continue
        socks.append(s); heads[s] = b""
        sel.register(s, selectors.EVENT_WRITE)
    pending = len(socks)
    while pending and time.time() < deadline:
        for key, events in sel.select(0.5):
            s = key.fileobj
            try:
                if events & selectors.EVENT_WRITE:
                    s.send(request); sel.modify(s, selectors.EVENT_READ); continue
                chunk = s.recv(4096)
            except OSError:
                chunk = b""
            heads[s] += chunk
            if not chunk or b"\r\n\r\n" in heads[s]:
                sel.unregister(s); pending -= 1
                if heads[s].startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")): ok += 1
    sel.close()
    return socks, ok

def idle():
    results = {}
    makers = {"pinproxy copy": lambda: start_pinproxy("copy", [holder.port]), "squid": start_squid, "tinyproxy": start_tinyproxy}
    for count in IDLE_COUNTS:
        for name, make in makers.items():
            # A fresh upstream port each round: the last round's closed connections wait in
            # TIME_WAIT towards the old one and would use up the ephemeral ports.
            holder = Holder()
            proc, port = make()
            time.sleep(0.5)
            socks, ok = idle_tunnels(port, holder.port, count, "free.pinproxy.test" if name.startswith("pinproxy") else "127.0.0.1")
            time.sleep(1)
            held = vmhwm_kib(process_tree(proc.pid))
            for s in socks: s.close()
            holder.close()
            time.sleep(2)
            peak = vmhwm_kib(process_tree(proc.pid))
            results.setdefault(str(count), {})[name] = {"ok": ok, "vmhwm_open_mib": round(held / 1024, 1), "vmhwm_after_teardown_mib": round(peak / 1024, 1)}
            stop(proc)
            holder.running = False
    return results

def main():
    resource.setrlimit(resource.RLIMIT_NOFILE, (20000, 20000))
    load_before = open("/proc/loadavg").read().split()[:3]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    tp = throughput() if ROUNDS else {}  # ROUNDS=0: the idle rounds alone
    os.makedirs(OUT, exist_ok=True)
    json.dump({"date": started, "throughput": tp}, open(os.path.join(OUT, "relay-throughput.json"), "w"), indent=2)  # kept if idle fails
    idl = idle()
    load_after = open("/proc/loadavg").read().split()[:3]
    report = {"date": started, "cores": os.cpu_count(), "kernel": platform.release(), "rounds": ROUNDS, "bytes": SIZE,
              "loadavg_before": load_before, "loadavg_after": load_after, "throughput": tp, "idle": idl}
    lines = ["%s, %d cores, Linux %s; %d interleaved rounds of %d MiB; load average %s before, %s after" %
             (started, os.cpu_count(), platform.release(), ROUNDS, SIZE >> 20, " ".join(load_before), " ".join(load_after)), "",
             "| path | TLS 1.2 MB/s | TLS 1.2 CPU s/GiB | TLS 1.3 MB/s | TLS 1.3 CPU s/GiB |", "|---|---|---|---|---|"]
    for path in tp.get("1.2", {}):
        row = [path]
        for tls in ("1.2", "1.3"):
            r = tp[tls][path]
            row += [str(r["median_mb_s"]) + (" (%d failed)" % r["failures"] if r.get("failures") else ""), "–" if r["cpu_s_per_gib"] is None else str(r["cpu_s_per_gib"])]
        lines.append("| " + " | ".join(row) + " |")
    lines += ["", "| idle tunnels | proxy | got 200 | VmHWM while open (MiB) | VmHWM through teardown (MiB) |", "|---|---|---|---|---|"]
    for count, by in idl.items():
        for name, r in by.items():
            lines.append("| %s | %s | %d | %s | %s |" % (count, name, r["ok"], r["vmhwm_open_mib"], r["vmhwm_after_teardown_mib"]))
    table = "\n".join(lines)
    os.makedirs(OUT, exist_ok=True)
    json.dump(report, open(os.path.join(OUT, "relay.json"), "w"), indent=2)
    open(os.path.join(OUT, "relay.md"), "w").write(table + "\n")
    print(table)

try:
    main()
finally:
    for p in children: stop(p)
    subprocess.run(["rm", "-rf", work])
