#!/usr/bin/env python3
"""Throughput, setup and memory of pinproxy's relay next to Squid, tinyproxy, the C relay and no
proxy (issue 8, item 5), with every check's cost (issue 21). Run through Benchmarks/relay.sh, which
builds release first. Loopback only; every loop is bounded.

  throughput  1 GiB over HTTPS (curl → Benchmarks/bulk_sender.c, C and OpenSSL, a process per connection, 1 MiB per
              SSL_write: an upstream that outruns every relay), TLS 1.2 and 1.3, through: nothing, the ceiling
              (Benchmarks/ceiling_relay.c: a minimal C CONNECT relay, read/write 256 KiB and splice through a
              pipe), pinproxy (relay: copy and relay: splice, a pinned rule), Squid, tinyproxy; ROUNDS
              interleaved rounds (each round runs every path once), medians; each proxy's CPU seconds
              per GiB from /proc/PID/stat (utime + stime) over its transfers.
  parallel    PARALLEL (16) tunnels at once, TLS 1.3, sharing SIZE bytes, through each path,
              ROUNDS interleaved rounds, median aggregate MB/s (first start to last end).
  setup       LATENCY (500) sequential tunnels per path, interleaved (each round opens one tunnel
              through every path): CONNECT → "200" and → the first byte of an HTTPS response (TLS
              1.3 to Benchmarks/tls13_upstream.js, a 6-byte answer), both timed from the client's TCP
              connect to the proxy (direct: to the server), p50 and p99: pinproxy pinned cold
              (verify_cache_ttl: 0s, a probe per CONNECT), pinned warm (the cache on), unpinned, the C
              relay (copy: the least a relay costs at setup), Squid, tinyproxy, and direct (first byte
              only). Once per upstream of SETUP_UPSTREAMS (node,node-cluster,nginx), each with fresh
              proxies: one Node process; a Node cluster of one process per online core
              (UPSTREAM_WORKERS: the primary hands each connection to the next worker, ~1 ms on every
              connection, direct ones too); nginx (Debian's, a worker per online core, reuseport, its
              own config in the work directory), after a logged trial of 100 pinned tunnels that counts
              how many had their connection and their mirror's served by two workers. One process
              serves a tunnel's handshake and its mirror's one after the other and the first byte pays
              for both; several serve them at the same time, as a server with a process per core does.
  checks      Benchmarks/checks.sh with the same binary: CHECKS (300) tunnels per row through no check
              (TLS 1.3, TLS 1.2), the probe, the stream check, the key-log check, the mirror check and
              CT, first byte p50/p99, CPU per tunnel, server flights per tunnel, and instructions per
              CONNECT under callgrind over CHECK_INSTRUCTIONS (40) tunnels per row (0: none); then each
              check against its baseline. CHECKS=0: none. It fails unless every tunnel succeeded.
  idle        1,000 and 9,000 simultaneous idle CONNECT tunnels (plain TCP to a holding upstream):
              how many got 200, the proxy's RSS before the first (idle) and while they are held, and its VmHWM (peak RSS) after
              they were opened and after they were closed, each count in a fresh proxy.

Writes JSON and the markdown tables to OUTDIR (relay.json, relay.md) and prints the tables; exits 1
after writing them when the checks failed.
"""
import json, os, platform, resource, selectors, signal, socket, ssl, statistics, subprocess, sys, tempfile, threading, time
from benchproc import cpu_seconds, free_port, run, start, stop, wait_port, write_report

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
F = os.path.join(ROOT, "Tests/TLSInspectionTests/Fixtures")
BIN = os.environ.get("PINPROXY_BIN", os.path.join(ROOT, ".build/release/pinproxy"))
ROUNDS = int(os.environ.get("ROUNDS", "5"))
SIZE = int(os.environ.get("SIZE", str(1 << 30)))
IDLE_COUNTS = [int(x) for x in os.environ.get("IDLE", "1000,9000").split(",") if x]
LATENCY = int(os.environ.get("LATENCY", "500"))
PARALLEL = int(os.environ.get("PARALLEL", "16"))  # tunnels at once in the aggregate rounds; 0: none
CHECKS = int(os.environ.get("CHECKS", "300"))  # tunnels per row of checks.sh; 0: no checks
CHECK_INSTRUCTIONS = int(os.environ.get("CHECK_INSTRUCTIONS", "40"))  # callgrind tunnels per row; 0: none
CORES = os.sysconf("SC_NPROCESSORS_ONLN")  # the setup round's cluster: one upstream process per online core
SETUP_KINDS = [x for x in os.environ.get("SETUP_UPSTREAMS", "node,node-cluster,nginx").split(",") if x]  # the setup rounds, in this order
if set(SETUP_KINDS) - {"node", "node-cluster", "nginx"}: raise SystemExit("SETUP_UPSTREAMS: node, node-cluster or nginx, comma-separated")
if CORES == 1 and "node" in SETUP_KINDS and "node-cluster" in SETUP_KINDS: SETUP_KINDS.remove("node-cluster")  # a cluster of one is the one process
OUT = sys.argv[1] if len(sys.argv) > 1 else ROOT
work = tempfile.mkdtemp(prefix="pinproxy-bench-")

def process_tree(pid):
    """pid and its descendants (Squid forks a worker)."""
    out, todo = [], [pid]
    while todo and len(out) < 64:
        p = todo.pop(); out.append(p)
        try: todo += [int(c) for c in open("/proc/%d/task/%d/children" % (p, p)).read().split()]
        except OSError: pass
    return out

def status_kib(pids, key):
    total = 0
    for pid in pids:
        try:
            for line in open("/proc/%d/status" % pid):
                if line.startswith(key + ":"): total += int(line.split()[1])
        except OSError:
            pass
    return total

def vmhwm_kib(pids): return status_kib(pids, "VmHWM")

# --- the C peers, built in the work directory (removed at exit) -------------------------------
CFLAGS = ["-O2", "-Wall"]
def build_c(name, libraries=()):
    binary = os.path.join(work, name)
    subprocess.run(["cc", *CFLAGS, "-pthread", "-o", binary, os.path.join(ROOT, "Benchmarks", name + ".c"), *libraries], check=True, timeout=120)
    return binary
BULK_SENDER = build_c("bulk_sender", ["-lssl", "-lcrypto"])
CEILING_RELAY = build_c("ceiling_relay")

# --- upstreams -------------------------------------------------------------------------------
upstreams = {}
for tls in ("1.2", "1.3"):
    port = free_port()
    start([BULK_SENDER, str(port), F + "/leaf-ec256.key.pem", F + "/leaf-ec256.chain.pem", tls, str(SIZE)])
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

def start_pinproxy(relay, ports, extra=""):
    port = free_port()
    log = open(os.path.join(work, "pinproxy-%s.log" % relay), "a")
    p = start([BIN, "run", "--config", pinproxy_config(relay, ports, extra), "--listen", "127.0.0.1:%d" % port], stderr=log)
    wait_port(port)
    return p, port

def start_ceiling(mode):
    port = free_port()
    p = start([CEILING_RELAY, mode, str(port)])
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
def curl_args(tls, proxy_port, pinproxy, target="/big"):
    port = upstreams[tls]
    args = ["curl", "-s", "-o", "/dev/null", "--cacert", F + "/both-roots.pem", "--max-time", "300", "-w", "%{speed_download} %{size_download}",
            "--resolve", "api.pinproxy.test:%d:127.0.0.1" % port, "https://api.pinproxy.test:%d%s" % (port, target)]
    if proxy_port: args += ["--proxy", "http://127.0.0.1:%d" % proxy_port]
    if proxy_port and not pinproxy:  # Squid and tinyproxy resolve names with the system: CONNECT to the address
        args += ["--connect-to", "api.pinproxy.test:%d:127.0.0.1:%d" % (port, port)]
    return args

def parallel(tls, proxy_port, pinproxy, tunnels):
    """`tunnels` downloads at once sharing SIZE bytes; aggregate MB/s from the first start to the last
    end, or None when one failed."""
    each = SIZE // tunnels
    env = dict(os.environ, NO_PROXY="", no_proxy="")
    started = time.perf_counter()
    procs = [subprocess.Popen(curl_args(tls, proxy_port, pinproxy, "/bytes/%d" % each), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True, env=env) for _ in range(tunnels)]
    sizes = []
    for p in procs:
        try: out = p.communicate(timeout=330)[0].split()
        except subprocess.TimeoutExpired: p.kill(); p.wait(); out = []
        sizes.append(int(out[1]) if len(out) == 2 else -1)
    elapsed = time.perf_counter() - started
    return round(each * tunnels / elapsed / 1e6, 1) if all(n == each for n in sizes) else None

def curl(tls, proxy_port, pinproxy=False):
    port = upstreams[tls]
    args = curl_args(tls, proxy_port, pinproxy)
    env = dict(os.environ, NO_PROXY="", no_proxy="")
    out = subprocess.run(args, capture_output=True, text=True, timeout=330, env=env).stdout.split()
    speed, size = float(out[0]), int(out[1])
    return speed / 1e6 if size == SIZE else None

def throughput():
    ports = list(upstreams.values())
    proxies = {"C relay copy (ceiling)": start_ceiling("copy"), "C relay splice (ceiling)": start_ceiling("splice"),
               "pinproxy copy": start_pinproxy("copy", ports), "pinproxy splice": start_pinproxy("splice", ports),
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
    # Many tunnels at once (TLS 1.3): what one event loop (or, with proxy.workers, several) carries in all.
    together = {p: {"tunnels": PARALLEL, "mb_s": [], "failures": 0} for p in paths}
    for _ in range(ROUNDS if PARALLEL else 0):
        for path in paths:
            _, port = proxies.get(path, (None, None))
            rate = parallel("1.3", port, path.startswith("pinproxy"), PARALLEL)
            if rate is None: together[path]["failures"] += 1
            else: together[path]["mb_s"].append(rate)
    for r in together.values(): r["median_mb_s"] = round(statistics.median(r["mb_s"]), 1) if r["mb_s"] else None
    results["parallel"] = together if PARALLEL else {}
    for p, _ in proxies.values(): stop(p)
    for tls in upstreams:
        for path, r in results[tls].items():
            r["median_mb_s"] = round(statistics.median(r["mb_s"]), 1) if r["mb_s"] else None
            r["cpu_s_per_gib"] = round(r["cpu_s"] / (r["bytes"] / (1 << 30)), 3) if path != "direct" and r["bytes"] else None
    return results

# --- setup latency ---------------------------------------------------------------------------
def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p))]

def one_tunnel(proxy_port, connect_host, target_port, sni, client_tls):
    """(ms to "200" or None when direct, ms to the first response byte); raises on any failure."""
    start_t = time.perf_counter()
    s = socket.create_connection(("127.0.0.1", proxy_port or target_port), timeout=10)
    try:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        established = None
        if proxy_port:
            s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (connect_host.encode(), target_port, connect_host.encode(), target_port))
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 8192:
                chunk = s.recv(8192)
                if not chunk: raise OSError("proxy closed")
                head += chunk
            if not head.startswith((b"HTTP/1.1 200", b"HTTP/1.0 200")): raise OSError(head.split(b"\r\n")[0].decode("latin-1"))
            established = (time.perf_counter() - start_t) * 1000
        t = client_tls.wrap_socket(s, server_hostname=sni)
        t.sendall(b"GET /small HTTP/1.0\r\nHost: %s\r\n\r\n" % sni.encode())
        if not t.recv(1): raise OSError("no response byte")
        first = (time.perf_counter() - start_t) * 1000
        t.close()
        return established, first
    finally:
        s.close()

# --- the setup rounds' upstreams: each returns (its processes' parent, port, the table's name for it, figures for the JSON)
def start_node(workers):
    """Benchmarks/tls13_upstream.js, one process or a cluster of `workers` (Node hands each connection
    to the next worker)."""
    port = free_port()
    p = start(["node", os.path.join(ROOT, "Benchmarks/tls13_upstream.js"), str(port), F + "/leaf-ec256.key.pem", F + "/leaf-ec256.chain.pem"],
              env=dict(os.environ, UPSTREAM_WORKERS=str(workers)))
    wait_port(port)
    name = "Node, 1 process" if workers == 1 else "Node cluster, %d processes" % workers
    return p, port, name, {"upstream_processes": workers}

def nginx_version():
    try: return subprocess.run(["nginx", "-v"], capture_output=True, text=True, timeout=10).stderr.strip().rsplit("/", 1)[1]  # "nginx version: nginx/1.22.1"
    except (OSError, IndexError, subprocess.TimeoutExpired): return "?"

def start_nginx(logged):
    """nginx with a worker per online core (`worker_processes auto`), TLS 1.3 only, the Node upstream's
    chain and key, "hello\\n" to every request, each connection closed after its answer (the clients
    send one HTTP/1.0 GET). `reuseport`: every worker has its own listening socket and the kernel
    spreads connections over them by their addresses, so a tunnel's connection and its mirror's, made
    together, went to two workers in 53 of 100 pinned tunnels in a trial on 2 cores; one shared
    socket (no reuseport) gave 8 of 100 (the worker woken first takes both; multi_accept on: 1 of 60,
    accept_mutex on: 0 of 60). `logged`: an access log line per request and info lines in the error
    log (a mirror's close), for nginx_worker_split; off for a measured round. As root, nginx runs its
    workers as nobody."""
    port = free_port()
    d = os.path.join(work, "nginx-%d" % port); os.makedirs(d)
    conf = os.path.join(d, "nginx.conf")
    with open(conf, "w") as f:
        f.write("""daemon off;
master_process on;
worker_processes auto;
pid %(d)s/nginx.pid;
lock_file %(d)s/nginx.lock;
error_log %(d)s/error.log %(level)s;
events { worker_connections 4096; }
http {
  log_format worker "$pid";
  access_log %(access)s;
  client_body_temp_path %(d)s/client_body;
  proxy_temp_path %(d)s/proxy;
  fastcgi_temp_path %(d)s/fastcgi;
  uwsgi_temp_path %(d)s/uwsgi;
  scgi_temp_path %(d)s/scgi;
  keepalive_timeout 0;
  server {
    listen 127.0.0.1:%(port)d ssl reuseport;
    ssl_protocols TLSv1.3;
    ssl_certificate %(F)s/leaf-ec256.chain.pem;
    ssl_certificate_key %(F)s/leaf-ec256.key.pem;
    location / { return 200 "hello\\n"; }
  }
}
""" % {"d": d, "port": port, "F": F, "level": "info" if logged else "error", "access": d + "/access.log worker" if logged else "off"})
    p = start(["nginx", "-p", d, "-c", conf, "-e", os.path.join(d, "error.log")])
    wait_port(port)
    deadline = time.time() + 10  # the master forks its workers after it listens
    while len(process_tree(p.pid)) < CORES + 1 and time.time() < deadline: time.sleep(0.05)
    workers = len(process_tree(p.pid)) - 1
    name = "nginx %s, %d workers" % (".".join(nginx_version().split(".")[:2]), workers)
    return p, port, name, {"upstream_processes": workers, "log_dir": d}

def new_lines(path, offset):
    """The complete lines of `path` after byte `offset`, and the offset after them."""
    with open(path, "rb") as f:
        f.seek(offset); data = f.read()
    data = data[:data.rfind(b"\n") + 1]
    return data.decode("latin-1").splitlines(), offset + len(data)

def nginx_worker_split(tunnels=100):
    """How often a pinned tunnel's connection and its mirror's are served by two nginx workers: a
    logged nginx and a pinproxy (the cache on, so no probe after the first), `tunnels` sequential
    tunnels; after each, the worker pid of its request (access log) and of the connection closed
    while handshaking (error log: the mirror, which never sends its Finished). Returns (split, paired)."""
    nginx, port, _, extra = start_nginx(logged=True)
    proxy, proxy_port = start_pinproxy("copy", [port])
    access, errors = os.path.join(extra["log_dir"], "access.log"), os.path.join(extra["log_dir"], "error.log")
    client_tls = ssl.create_default_context(cafile=F + "/both-roots.pem")
    split = paired = 0
    try:
        for _ in range(3): one_tunnel(proxy_port, "api.pinproxy.test", port, "api.pinproxy.test", client_tls)  # the first one's probe
        time.sleep(0.5)
        a_at, e_at = os.path.getsize(access), os.path.getsize(errors)
        for _ in range(tunnels):
            one_tunnel(proxy_port, "api.pinproxy.test", port, "api.pinproxy.test", client_tls)
            requests, mirrors = [], []
            deadline = time.time() + 5  # the mirror is closed once the tunnel's ServerHello came: its line comes soon after
            while (not requests or not mirrors) and time.time() < deadline:
                lines, a_at = new_lines(access, a_at); requests += lines
                lines, e_at = new_lines(errors, e_at); mirrors += [l for l in lines if "while SSL handshaking" in l]
                time.sleep(0.005)
            if len(requests) == 1 and len(mirrors) == 1:  # "2026/11/26 07:04:37 [info] 18916#18916: *120 peer closed ..."
                paired += 1
                split += requests[0].strip() != mirrors[0].split("] ", 1)[1].split("#", 1)[0]
    except (OSError, ssl.SSLError) as e:  # the trial ends; the round's own table shows failing tunnels
        print("relay.py: the nginx worker trial stopped after %d tunnels: %s" % (paired, e), file=sys.stderr)
    finally:
        stop(proxy); stop(nginx)
    return split, paired

SETUP_UPSTREAMS = {"node": lambda: start_node(1), "node-cluster": lambda: start_node(CORES), "nginx": lambda: start_nginx(logged=False)}

def setup_latency(upstream_kind):
    """Sequential tunnels, one per path per round, against one TLS 1.3 upstream that serves its
    handshakes concurrently (`upstream_kind`, a key of SETUP_UPSTREAMS): a pinned tunnel's mirror
    connection is made with the tunnel's, and `openssl s_server` would serve only one of the two
    (mirror_lost)."""
    split = nginx_worker_split() if upstream_kind == "nginx" else None  # before the measured upstream starts
    upstream, port, upstream_name, extra = SETUP_UPSTREAMS[upstream_kind]()
    client_tls = ssl.create_default_context(cafile=F + "/both-roots.pem")
    client_tls.check_hostname = False  # the unpinned path names another host; every path pays the same client
    cold, cold_port = start_pinproxy("copy", [port], "  verify_cache_ttl: 0s\n")
    warm, warm_port = start_pinproxy("copy", [port])
    ceiling, ceiling_port = start_ceiling("copy")
    squid, squid_port = start_squid()
    tiny, tiny_port = start_tinyproxy()
    paths = {  # name: (proxy port, CONNECT host, SNI)
        "direct": (None, None, "api.pinproxy.test"),
        "pinproxy pinned cold": (cold_port, "api.pinproxy.test", "api.pinproxy.test"),
        "pinproxy pinned warm": (warm_port, "api.pinproxy.test", "api.pinproxy.test"),
        "pinproxy unpinned": (warm_port, "free.pinproxy.test", "free.pinproxy.test"),
        "C relay copy (ceiling)": (ceiling_port, "127.0.0.1", "api.pinproxy.test"),
        "squid": (squid_port, "127.0.0.1", "api.pinproxy.test"),
        "tinyproxy": (tiny_port, "127.0.0.1", "api.pinproxy.test"),
    }
    samples = {name: {"connect_ms": [], "first_byte_ms": [], "failures": 0, "failure": None} for name in paths}
    warmup = 5
    for n in range(LATENCY + warmup):
        for name, (proxy_port, host, sni) in paths.items():
            try:
                established, first = one_tunnel(proxy_port, host, port, sni, client_tls)
            except (OSError, ssl.SSLError) as e:
                samples[name]["failures"] += 1; samples[name]["failure"] = str(e); continue
            if n < warmup: continue
            if established is not None: samples[name]["connect_ms"].append(established)
            samples[name]["first_byte_ms"].append(first)
    for p in (cold, warm, ceiling, squid, tiny, upstream): stop(p)
    out = {}
    for name, r in samples.items():
        out[name] = {"tunnels": len(r["first_byte_ms"]), "failures": r["failures"], "last_failure": r["failure"]}
        for key in ("connect_ms", "first_byte_ms"):
            out[name][key + "_p50"] = round(percentile(r[key], 0.5), 3) if r[key] else None
            out[name][key + "_p99"] = round(percentile(r[key], 0.99), 3) if r[key] else None
    result = {"upstream": upstream_name, "upstream_processes": extra["upstream_processes"], "paths": out}
    if split: result["worker_split"] = {"two_workers": split[0], "tunnels": split[1]}
    return result

# --- what each check costs -------------------------------------------------------------------
def checks():
    """Benchmarks/checks.sh with this run's binary: rows.py's figures (its JSON), or {"failed": ...}
    with the end of its output when it failed (a tunnel without its 200 or its verify=)."""
    result, output = os.path.join(work, "checks.json"), os.path.join(work, "checks.out")
    env = dict(os.environ, PINPROXY_BIN=BIN, ROWS_JSON=result)
    env.pop("UPSTREAM_WORKERS", None)  # checks.sh's upstream: one process, as when it runs alone
    with open(output, "w") as out:
        p = start([os.path.join(ROOT, "Benchmarks/checks.sh"), str(CHECKS), str(CHECK_INSTRUCTIONS)], cwd=ROOT, env=env,
                  stdout=out, stderr=subprocess.STDOUT)
        try: code = p.wait(timeout=1800 + 30 * CHECKS + 60 * CHECK_INSTRUCTIONS)  # bounded; a normal run takes a small part of it
        except subprocess.TimeoutExpired: stop(p); code = "timeout"
    if code == 0 and os.path.exists(result): return json.load(open(result))
    tail = open(output).read().strip().splitlines()[-8:]
    print("relay.py: Benchmarks/checks.sh failed (%s):\n%s" % (code, "\n".join(tail)), file=sys.stderr)
    return {"failed": "exit %s" % code, "output": tail}

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
    """Opens `count` CONNECT tunnels, each sending its request as soon as it is connected (without
    waiting for the answers), and reads their answers with one deadline; returns the sockets and how
    many got 200. (Thousands of connections opened first and written later are silent meanwhile,
    and pinproxy's silent-connection bound closes the oldest of them.)"""
    request = b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), target_port, host.encode(), target_port)
    sel = selectors.DefaultSelector()
    socks, heads, ok = [], {}, 0
    deadline = time.time() + seconds
    for _ in range(count):
        if time.time() > deadline: break
        s = socket.socket(); s.settimeout(10)
        try: s.connect(("127.0.0.1", proxy_port)); s.sendall(request)
        except OSError: s.close(); continue
        s.setblocking(False)
        socks.append(s); heads[s] = b""
        sel.register(s, selectors.EVENT_READ)
    pending = len(socks)
    while pending and time.time() < deadline:
        for key, events in sel.select(0.5):
            s = key.fileobj
            try:
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
    only = [x for x in os.environ.get("IDLE_PROXIES", "").split(",") if x]  # e.g. IDLE_PROXIES=pinproxy for a memory study
    makers = {name: make for name, make in makers.items() if not only or any(name.startswith(o) for o in only)}
    for count in IDLE_COUNTS:
        for name, make in makers.items():
            # A fresh upstream port each round: the last round's closed connections wait in
            # TIME_WAIT towards the old one and would use up the ephemeral ports.
            holder = Holder()
            proc, port = make()
            time.sleep(0.5)
            idle_rss = status_kib(process_tree(proc.pid), "VmRSS")  # before the first tunnel
            socks, ok = idle_tunnels(port, holder.port, count, "free.pinproxy.test" if name.startswith("pinproxy") else "127.0.0.1")
            time.sleep(1)
            held = vmhwm_kib(process_tree(proc.pid))
            rss = status_kib(process_tree(proc.pid), "VmRSS")
            for s in socks: s.close()
            holder.close()
            time.sleep(2)
            peak = vmhwm_kib(process_tree(proc.pid))
            after = status_kib(process_tree(proc.pid), "VmRSS")
            results.setdefault(str(count), {})[name] = {"ok": ok, "rss_idle_mib": round(idle_rss / 1024, 1), "rss_held_mib": round(rss / 1024, 1), "vmhwm_open_mib": round(held / 1024, 1),
                                                        "vmhwm_after_teardown_mib": round(peak / 1024, 1), "rss_after_teardown_mib": round(after / 1024, 1)}
            stop(proc)
            holder.running = False
    return results

def machine():
    """The CPU's model name, for the table's first line."""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"): return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.machine()

def versions():
    """Every peer's version, for the table's first line: pinproxy's commit (and whether its sources had
    changes when the run began), Squid, tinyproxy, the compiler that built the C relay and sender,
    OpenSSL, curl (the throughput and checks client), Python (the setup client), Node (the setup and
    checks upstream, with its own OpenSSL), nginx (a setup upstream, when its round runs) and valgrind
    (the checks' instruction counts)."""
    def first_line(args):
        try: return subprocess.run(args, capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
        except (OSError, IndexError, subprocess.TimeoutExpired): return "?"
    commit = first_line(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"])
    if first_line(["git", "-C", ROOT, "status", "--porcelain", "--", "Sources", "Package.swift", "Package.resolved"]) != "?":
        commit += " (with local changes)"  # in what the binary is built from; docs and benchmarks do not count
    if "PINPROXY_BIN" in os.environ: commit = "binary " + BIN
    squid = first_line(["squid", "-v"]).replace("Squid Cache: Version ", "")
    tiny = first_line(["tinyproxy", "-v"]).replace("tinyproxy ", "")
    cc = first_line(["cc", "--version"])
    openssl = first_line(["openssl", "version"])
    curl = first_line(["curl", "--version"]).split(" (")[0]
    python = "Python %s (%s)" % (platform.python_version(), ssl.OPENSSL_VERSION)
    node = first_line(["node", "-p", "'Node ' + process.version + ' (OpenSSL ' + process.versions.openssl + ')'"])
    peers = "pinproxy %s, Squid %s, tinyproxy %s, C relay and sender: %s %s, %s, %s, %s, %s" % (
        commit, squid, tiny, cc, " ".join(CFLAGS), openssl, curl, python, node)
    if LATENCY and "nginx" in SETUP_KINDS: peers += ", nginx " + nginx_version()
    if CHECKS and CHECK_INSTRUCTIONS: peers += ", " + first_line(["valgrind", "--version"])
    return peers

def against(by_path, path):
    """pinproxy's MB/s as a share of the faster C relay's, and its MB/s and CPU per GiB over Squid's."""
    def ratio(a, b, fmt): return fmt % (a / b) if a is not None and b else "–"
    r, squid = by_path[path], by_path["squid"]
    ceilings = [by_path[p]["median_mb_s"] for p in by_path if p.startswith("C relay") and by_path[p]["median_mb_s"]]
    return [ratio(r["median_mb_s"], max(ceilings) if ceilings else None, "%.2f"), ratio(r["median_mb_s"], squid["median_mb_s"], "%.2f×"),
            ratio(r["cpu_s_per_gib"], squid["cpu_s_per_gib"], "%.2f×")]

def main():
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    limit = 20000 if hard == resource.RLIM_INFINITY else min(20000, hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (limit, hard))
    load_before = open("/proc/loadavg").read().split()[:3]
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    peers = versions()  # before the run: the tree may change while it runs
    tp = throughput() if ROUNDS else {}  # ROUNDS=0: the idle rounds alone
    os.makedirs(OUT, exist_ok=True)
    json.dump({"date": started, "throughput": tp}, open(os.path.join(OUT, "relay-throughput.json"), "w"), indent=2)  # kept if idle fails
    # The setup rounds: each upstream of SETUP_UPSTREAMS in turn, with fresh proxies.
    lat = [setup_latency(kind) for kind in SETUP_KINDS] if LATENCY else []
    json.dump({"date": started, "throughput": tp, "setup": lat}, open(os.path.join(OUT, "relay-throughput.json"), "w"), indent=2)
    chk = checks() if CHECKS else {}
    json.dump({"date": started, "throughput": tp, "setup": lat, "checks": chk}, open(os.path.join(OUT, "relay-throughput.json"), "w"), indent=2)
    idl = idle()
    load_after = open("/proc/loadavg").read().split()[:3]
    report = {"date": started, "cores": os.cpu_count(), "kernel": platform.release(), "rounds": ROUNDS, "bytes": SIZE,
              "loadavg_before": load_before, "loadavg_after": load_after, "latency_tunnels": LATENCY, "throughput": tp, "setup": lat,
              "check_tunnels": CHECKS, "check_instruction_tunnels": CHECK_INSTRUCTIONS, "checks": chk, "idle": idl}
    report["machine"], report["versions"] = machine(), peers
    lines = ["%s, %s, %d cores, Linux %s; %s; %d interleaved round(s) of %d MiB; load average %s before, %s after" %
             (started, report["machine"], os.cpu_count(), platform.release(), report["versions"], ROUNDS, SIZE >> 20, " ".join(load_before), " ".join(load_after))]
    if tp: lines += ["", "| path | TLS 1.2 MB/s | TLS 1.2 CPU s/GiB | TLS 1.3 MB/s | TLS 1.3 CPU s/GiB |", "|---|---|---|---|---|"]
    for path in tp.get("1.2", {}):  # the single-tunnel rows
        row = [path]
        for tls in ("1.2", "1.3"):
            r = tp[tls][path]
            row += [str(r["median_mb_s"]) + (" (%d failed)" % r["failures"] if r.get("failures") else ""), "–" if r["cpu_s_per_gib"] is None else str(r["cpu_s_per_gib"])]
        lines.append("| " + " | ".join(row) + " |")
    if tp.get("1.2"):
        lines += ["", "| relay | TLS 1.2: of the ceiling | × Squid MB/s | × Squid CPU/GiB | TLS 1.3: of the ceiling | × Squid MB/s | × Squid CPU/GiB |",
                  "|---|---|---|---|---|---|---|"]
        for path in ("pinproxy copy", "pinproxy splice"):
            lines.append("| " + " | ".join([path] + [cell for tls in ("1.2", "1.3") for cell in against(tp[tls], path)]) + " |")
    if tp.get("parallel"):
        lines += ["", "| %d tunnels at once, TLS 1.3, %d MiB in all | aggregate MB/s (median) |" % (PARALLEL, SIZE >> 20), "|---|---|"]
        for path, r in tp["parallel"].items():
            lines.append("| %s | %s%s |" % (path, r["median_mb_s"], " (%d failed)" % r["failures"] if r["failures"] else ""))
    fmt = lambda v: "–" if v is None else "%.2f" % v
    for round_ in lat:
        lines += ["", "| setup, %d sequential tunnels each (TLS 1.3, upstream: %s) | tunnels | CONNECT → 200 p50 ms | p99 ms | → first byte p50 ms | p99 ms |"
                  % (LATENCY, round_["upstream"]), "|---|---|---|---|---|---|"]
        for name, r in round_["paths"].items():
            failed = " (%d failed: %s)" % (r["failures"], r["last_failure"]) if r["failures"] else ""
            lines.append("| %s | %d%s | %s | %s | %s | %s |" % (name, r["tunnels"], failed, fmt(r["connect_ms_p50"]), fmt(r["connect_ms_p99"]),
                                                          fmt(r["first_byte_ms_p50"]), fmt(r["first_byte_ms_p99"])))
        if "worker_split" in round_:
            lines += ["", "Served by two nginx workers: the connection and the mirror connection of %d of %d pinned tunnels (a logged trial "
                      "before the round)." % (round_["worker_split"]["two_workers"], round_["worker_split"]["tunnels"])]
    if chk.get("failed"):
        lines += ["", "What each check costs: **Benchmarks/checks.sh failed** (%s); the end of its output:" % chk["failed"], ""]
        lines += ["    " + line for line in chk["output"]]
    elif chk:
        lines += ["", "What each check costs (Benchmarks/checks.sh, the same binary; curl through one pinproxy per row to one Node upstream "
                  "process): %d tunnels per row in interleaved rounds of 20%s; load average %s before, %s after the timed rows" % (
                      chk["tunnels_per_row"], ", instructions under callgrind over %d tunnels per row" % CHECK_INSTRUCTIONS if CHECK_INSTRUCTIONS else "",
                      " ".join(chk["loadavg_before"]), " ".join(chk["loadavg_after"])), "", chk["markdown"]]
    if idl: lines += ["", "| idle tunnels | proxy | got 200 | RSS idle (MiB) | RSS held (MiB) | VmHWM while open (MiB) | VmHWM through teardown (MiB) | RSS after (MiB) |",
                      "|---|---|---|---|---|---|---|---|"]
    for count, by in idl.items():
        for name, r in by.items():
            lines.append("| %s | %s | %d | %s | %s | %s | %s | %s |" % (count, name, r["ok"], r["rss_idle_mib"], r["rss_held_mib"], r["vmhwm_open_mib"],
                                                                  r["vmhwm_after_teardown_mib"], r["rss_after_teardown_mib"]))
    write_report(OUT, "relay", report, "\n".join(lines))
    if chk.get("failed"): sys.exit(1)

run(main, work)
