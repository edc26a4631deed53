#!/usr/bin/env python3
"""Clients, sampler and summary for Benchmarks/soak.sh. Loopback only; every loop stops at --until
(a Unix time) and every network call has a timeout, so nothing here runs much past the deadline.

  soak_clients.py run KIND --until T --proxy PORT --ports JSON --results DIR [--threads N]
      loops one kind of client until T; writes DIR/KIND.json ({"ok": n, "failed": n, "errors": {...}})
      when done and appends every failure to DIR/failures.log as it happens. Kinds:
        curl       good tunnel with curl --proxy (TLS 1.2 and 1.3 upstreams in turn); asserts the body
        urllib     good tunnel with Python urllib through a ProxyHandler; asserts the body
        rogue      CONNECT to a rogue-CA server under a pinned name: must be 502 Certificate Pin Mismatch
        replay     CONNECT to an attacker replaying the genuine chain: must be 502 TLS Handshake Failed
        resets     bursts of CONNECT 127.0.0.1:<flood>, send, half-close, reset without reading
        slow       the CONNECT head one byte every 200 ms, then TLS and a GET: must work
        stall      half a CONNECT head, then nothing: must get 408 at header_timeout
        garbage    random bytes ending in CRLFCRLF: must get 400, 405 or 431
        neverread  a good tunnel to a bulk server; read 1 KiB, stop reading for a few seconds, close
  soak_clients.py sample --until T --proxy PORT --ports JSON --pid PID --log FILE --csv FILE --results DIR
      every --every seconds: VmRSS, open fds, active tunnels (last `stats` line), and the setup latency
      of one pinned CONNECT (-> 200, then TLS + GET to assert the body)
  soak_clients.py summary --csv FILE --results DIR --log FILE ...   markdown summary and verdict (exit 1: fail)
"""
import argparse, json, os, random, socket, ssl, statistics, struct, subprocess, sys, threading, time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
CA = os.path.join(HERE, "..", "Tests", "TLSInspectionTests", "Fixtures", "both-roots.pem")
TIMEOUT = 15           # per socket operation
GOOD_HOST = "api.pinproxy.test"


class Tally:
    def __init__(self, kind, results):
        self.kind, self.results = kind, results
        self.ok = self.failed = 0
        self.errors = {}
        self.lock = threading.Lock()

    def good(self):
        with self.lock: self.ok += 1

    def bad(self, error):
        error = str(error).strip().replace("\n", " ")[:200]
        with self.lock:
            self.failed += 1
            self.errors[error] = self.errors.get(error, 0) + 1
            with open(os.path.join(self.results, "failures.log"), "a") as f:
                f.write("%s %s %s\n" % (time.strftime("%H:%M:%S"), self.kind, error))

    def save(self):
        with open(os.path.join(self.results, self.kind + ".json"), "w") as f:
            json.dump({"ok": self.ok, "failed": self.failed, "errors": self.errors}, f)


def connect_head(proxy, target, timeout=TIMEOUT):
    """Sends CONNECT target, returns (socket, status line)."""
    s = socket.create_connection(("127.0.0.1", proxy), timeout=timeout)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
    return s, read_head(s)


def read_head(s):
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk: break
        head += chunk
        if len(head) > 8192: break
    return head.split(b"\r\n")[0].decode("latin-1")


def tls_get(raw, name):
    tls = ssl.create_default_context(cafile=CA).wrap_socket(raw, server_hostname=GOOD_HOST)
    tls.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % GOOD_HOST.encode())
    data = b""
    while True:
        chunk = tls.recv(65536)
        if not chunk: break
        data += chunk
    tls.close()
    body = data.split(b"\r\n\r\n", 1)[-1].decode("latin-1")
    expected = "hello from %s\n" % name
    if body != expected: raise RuntimeError("body %r, expected %r" % (body[:80], expected))


def good_target(ports, i):
    name = ("good12", "good13")[i % 2]
    return name, ports[name]


# --- the kinds; each does one iteration and raises on an unexpected outcome -----------------------

def k_curl(a, ports, i):
    name, port = good_target(ports, i)
    r = subprocess.run(["curl", "-sS", "--max-time", "10", "--proxy", "http://127.0.0.1:%d" % a.proxy, "--cacert", CA,
                        "https://%s:%d/" % (GOOD_HOST, port)], capture_output=True, text=True, timeout=20)
    if r.returncode != 0 or r.stdout != "hello from %s\n" % name:
        raise RuntimeError("curl %s exit %d: %s %r" % (name, r.returncode, r.stderr.strip(), r.stdout[:80]))


def k_urllib(a, ports, i):
    name, port = good_target(ports, i)
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({"https": "http://127.0.0.1:%d" % a.proxy}),
                                         urllib.request.HTTPSHandler(context=ssl.create_default_context(cafile=CA)))
    with opener.open("https://%s:%d/" % (GOOD_HOST, port), timeout=TIMEOUT) as r:
        body = r.read().decode()
    if r.status != 200 or body != "hello from %s\n" % name:
        raise RuntimeError("urllib %s: %d %r" % (name, r.status, body[:80]))


def expect_status(a, target, wanted):
    s, line = connect_head(a.proxy, target)
    s.close()
    if line != wanted: raise RuntimeError("%s: %r, expected %r" % (target, line, wanted))


def k_rogue(a, ports, i):
    expect_status(a, "rogue.api.pinproxy.test:%d" % ports["rogue"], "HTTP/1.1 502 Certificate Pin Mismatch")


def k_replay(a, ports, i):
    port = ports[("replay12", "replay13")[i % 2]]
    expect_status(a, "replay.pinproxy.test:%d" % port, "HTTP/1.1 502 TLS Handshake Failed")


def k_resets(a, ports, i):
    for _ in range(10):
        s = socket.create_connection(("127.0.0.1", a.proxy), timeout=TIMEOUT)
        s.sendall(b"CONNECT 127.0.0.1:%d HTTP/1.1\r\n\r\nhello" % ports["flood"])
        s.shutdown(socket.SHUT_WR)
        time.sleep(0.002)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()


def k_slow(a, ports, i):
    name, port = good_target(ports, i)
    s = socket.create_connection(("127.0.0.1", a.proxy), timeout=TIMEOUT)
    for b in b"CONNECT %s:%d HTTP/1.1\r\n\r\n" % (GOOD_HOST.encode(), port):
        s.sendall(bytes([b]))
        time.sleep(0.2)
    line = read_head(s)
    if not line.startswith("HTTP/1.1 200"):
        s.close(); raise RuntimeError("slow head: %r" % line)
    tls_get(s, name)


def k_stall(a, ports, i):
    s = socket.create_connection(("127.0.0.1", a.proxy), timeout=a.header_timeout + 10)
    s.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: " % (GOOD_HOST.encode(), ports["good12"]))
    start = time.time()
    line = read_head(s)
    s.close()
    if not line.startswith("HTTP/1.1 408"): raise RuntimeError("stalled head: %r" % line)
    if time.time() - start < a.header_timeout - 1: raise RuntimeError("408 after %.1f s" % (time.time() - start))


def k_garbage(a, ports, i):
    variants = [lambda: bytes(random.getrandbits(8) for _ in range(random.randint(1, 300))).replace(b"\r\n\r\n", b"") + b"\r\n\r\n",
                lambda: b"GET http://%s/ HTTP/1.1\r\nHost: x\r\n\r\n" % GOOD_HOST.encode(),
                lambda: b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64) + b"\r\n\r\n",
                lambda: b"CONNECT " + b"a" * 9000 + b":443 HTTP/1.1\r\n\r\n"]
    s = socket.create_connection(("127.0.0.1", a.proxy), timeout=TIMEOUT)
    try:
        s.sendall(variants[i % len(variants)]())
    except OSError:
        pass  # the proxy may answer and close before it has read everything
    line = read_head(s)
    s.close()
    if line.split(" ")[1:2] not in (["400"], ["405"], ["431"]): raise RuntimeError("garbage: %r" % line)


def k_neverread(a, ports, i):
    s, line = connect_head(a.proxy, "%s:%d" % (GOOD_HOST, ports["bulk"]))
    if not line.startswith("HTTP/1.1 200"):
        s.close(); raise RuntimeError("neverread head: %r" % line)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    tls = ssl.create_default_context(cafile=CA).wrap_socket(s, server_hostname=GOOD_HOST)
    tls.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    got = len(tls.recv(1024))
    time.sleep(3)
    tls.close()
    if got == 0: raise RuntimeError("neverread: no bytes")


KINDS = {"curl": (k_curl, 0.2), "urllib": (k_urllib, 0.2), "rogue": (k_rogue, 0.5), "replay": (k_replay, 0.5),
         "resets": (k_resets, 0.5), "slow": (k_slow, 0.5), "stall": (k_stall, 0.5), "garbage": (k_garbage, 0.3),
         "neverread": (k_neverread, 1.0)}


def run(a):
    ports = json.loads(a.ports)
    fn, pause = KINDS[a.kind]
    tally = Tally(a.kind, a.results)
    counter = [0]
    lock = threading.Lock()

    def worker():
        while time.time() < a.until:
            with lock:
                i = counter[0]; counter[0] += 1
            try:
                fn(a, ports, i)
                tally.good()
            except Exception as e:
                tally.bad("%s: %s" % (type(e).__name__, e))
            time.sleep(pause)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(a.threads)]
    for t in threads: t.start()
    for t in threads: t.join(timeout=max(0, a.until - time.time()) + 60)
    tally.save()


# --- sampling -------------------------------------------------------------------------------------

def last_stats(log):
    try:
        with open(log, "rb") as f:
            f.seek(0, 2); size = f.tell()
            f.seek(max(0, size - 262144))
            lines = f.read().decode("latin-1").splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        if " event=stats " in line:
            return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)
    return {}


def sample(a):
    ports = json.loads(a.ports)
    tally = Tally("latency", a.results)
    with open(a.csv, "w") as out:
        out.write("t_s,rss_kib,fds,tunnels,active_sessions,setup_ms\n")
        start = time.time(); i = 0
        while time.time() < a.until:
            try:
                with open("/proc/%d/status" % a.pid) as f:
                    rss = next(int(l.split()[1]) for l in f if l.startswith("VmRSS:"))
                fds = len(os.listdir("/proc/%d/fd" % a.pid))
            except (OSError, StopIteration):
                with open(os.path.join(a.results, "failures.log"), "a") as f:
                    f.write("%s sampler proxy process %d is gone\n" % (time.strftime("%H:%M:%S"), a.pid))
                break
            stats = last_stats(a.log)
            name, port = good_target(ports, i); i += 1
            ms = ""
            try:
                t0 = time.perf_counter()
                s, line = connect_head(a.proxy, "%s:%d" % (GOOD_HOST, port))
                elapsed = (time.perf_counter() - t0) * 1000
                if not line.startswith("HTTP/1.1 200"):
                    s.close(); raise RuntimeError("latency probe: %r" % line)
                tls_get(s, name)
                ms = "%.2f" % elapsed
                tally.good()
            except Exception as e:
                tally.bad("%s: %s" % (type(e).__name__, e))
            out.write("%.1f,%d,%d,%s,%s,%s\n" % (time.time() - start, rss, fds, stats.get("tunnels", ""),
                                                 stats.get("active_sessions", ""), ms))
            out.flush()
            time.sleep(max(0.0, a.every - (time.time() - start) % a.every))
    tally.save()


# --- summary --------------------------------------------------------------------------------------

def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100 * len(v) + 0.5)) - 1))]


def summary(a):
    rows = []
    with open(a.csv) as f:
        next(f)
        for line in f:
            t, rss, fds, tun, act, ms = line.strip().split(",")
            rows.append((float(t), int(rss), int(fds), tun, act, float(ms) if ms else None))
    reasons = []
    counts = {}
    for kind in ["curl", "urllib", "latency", "slow", "neverread", "rogue", "replay", "resets", "stall", "garbage"]:
        path = os.path.join(a.results, kind + ".json")
        if not os.path.exists(path):
            reasons.append("%s clients left no result" % kind); continue
        with open(path) as f: counts[kind] = json.load(f)
    good_kinds = ["curl", "urllib", "latency", "slow", "neverread"]
    for kind, c in counts.items():
        if c["failed"]:
            what = "good tunnel" if kind in good_kinds else "expectation"
            first = ", ".join("%s (%d×)" % (e, n) for e, n in list(c["errors"].items())[:3])
            reasons.append("%d %s client %s failure(s): %s" % (c["failed"], kind, what, first))
        if c["ok"] == 0: reasons.append("no %s client ever succeeded" % kind)
    # Refusal reasons in the log must be the intended ones.
    refused = {}
    attacks_through = 0
    with open(a.log, "rb") as f:
        for raw in f:
            line = raw.decode("latin-1")
            if " event=tunnel_refused " in line or " event=tunnel_allowed " in line or " event=tunnel_bypassed " in line:
                host = line.split(" host=", 1)[-1].split(" ", 1)[0].strip('"')
                if " event=tunnel_refused " not in line:
                    attacks_through += host in ("rogue.api.pinproxy.test", "replay.pinproxy.test")
                    continue
                reason = line.split(" reason=", 1)[-1].split(" ", 1)[0]
                refused[(host, reason)] = refused.get((host, reason), 0) + 1
    if attacks_through: reasons.append("%d tunnel(s) to an attacker were let through" % attacks_through)
    want = {("rogue.api.pinproxy.test", "pin_mismatch"), ("replay.pinproxy.test", "tls_protocol_error")}
    for key, n in refused.items():
        if key not in want: reasons.append("unexpected refusal %s reason=%s (%d×)" % (key[0], key[1], n))
    if a.reloads_sent and a.reloads_seen < a.reloads_sent:
        reasons.append("%d SIGHUPs but %d policy_reloaded lines" % (a.reloads_sent, a.reloads_seen))
    if a.reload_failed: reasons.append("%d policy_reload_failed lines" % a.reload_failed)
    if not a.alive_at_end: reasons.append("the proxy died during the soak")
    if a.exit_code != 0: reasons.append("pinproxy exited %d on SIGTERM (expected 0)" % a.exit_code)
    if a.settled != "yes": reasons.append("tunnels did not return to 0 after the clients stopped (%s)" % a.settled)

    n = len(rows)
    verdict_rss = verdict_fds = "n/a"
    if n >= 6:
        third = n // 3
        middle, last = rows[third:2 * third], rows[n - third:]
        m_rss, l_rss = statistics.median(r[1] for r in middle), statistics.median(r[1] for r in last)
        m_fds, l_fds = statistics.median(r[2] for r in middle), statistics.median(r[2] for r in last)
        rss_allow = max(0.10 * m_rss, 4096)
        verdict_rss = "middle third %.1f MiB → last third %.1f MiB (allowed +%.1f MiB)" % (m_rss / 1024, l_rss / 1024, rss_allow / 1024)
        verdict_fds = "middle third %g → last third %g (allowed +8)" % (m_fds, l_fds)
        if l_rss - m_rss > rss_allow: reasons.append("RSS trends upward: " + verdict_rss)
        if l_fds - m_fds > 8: reasons.append("fds trend upward: " + verdict_fds)
    else:
        reasons.append("only %d samples (need 6 for a trend)" % n)

    rss = [r[1] / 1024 for r in rows]; fds = [r[2] for r in rows]
    tunnels = [int(r[3]) for r in rows if r[3]]
    lat = [r[5] for r in rows if r[5] is not None]
    print("### Soak: %d s, %d samples every %g s (release build, loopback, %d cores)\n" % (a.duration, n, a.every, os.cpu_count()))
    print("| client kind | expectation | ok | failed |")
    print("|---|---|---|---|")
    expect = {"curl": "good tunnel, body asserted (curl, TLS 1.2/1.3)", "urllib": "good tunnel, body asserted (urllib, TLS 1.2/1.3)",
              "latency": "sampler's pinned CONNECT → 200, then GET", "slow": "head 1 byte/200 ms, then GET works",
              "neverread": "good tunnel to a bulk server, 3 s not reading",
              "rogue": "rogue-CA server → 502 Certificate Pin Mismatch", "replay": "replayed chain, no key → 502 TLS Handshake Failed",
              "resets": "CONNECT to a flood server, send, reset", "stall": "half a head → 408 at header_timeout",
              "garbage": "random bytes / GET / 9 KB target → 400/405/431"}
    for kind in expect:
        c = counts.get(kind, {"ok": 0, "failed": 0})
        print("| %s | %s | %d | %d |" % (kind, expect[kind], c["ok"], c["failed"]))
    print()
    print("| measurement | value |")
    print("|---|---|")
    print("| reloads (SIGHUP every 30 s) | %d sent, %d `policy_reloaded`, %d failed |" % (a.reloads_sent, a.reloads_seen, a.reload_failed))
    print("| refusals in the log | %s |" % ", ".join("%s %s: %d" % (h, r, c) for (h, r), c in sorted(refused.items())))
    if rows:
        print("| RSS first / median / last / max | %.1f / %.1f / %.1f / %.1f MiB |" % (rss[0], statistics.median(rss), rss[-1], max(rss)))
        print("| RSS trend | %s |" % verdict_rss)
        print("| fds first / median / last / max | %d / %g / %d / %d |" % (fds[0], statistics.median(fds), fds[-1], max(fds)))
        print("| fds trend | %s |" % verdict_fds)
    if tunnels: print("| active tunnels (stats) median / max | %g / %d |" % (statistics.median(tunnels), max(tunnels)))
    if lat: print("| setup latency (CONNECT → 200, pinned) p50 / p99 / max | %.1f / %.1f / %.1f ms |" % (pct(lat, 50), pct(lat, 99), max(lat)))
    print("| after the clients stopped | tunnels back to 0: %s; SIGTERM exit %d |" % (a.settled, a.exit_code))
    print("| **verdict** | **%s** |" % ("PASS" if not reasons else "FAIL"))
    if reasons:
        print("\nFAIL:")
        for r in reasons: print("- " + r)
    return 1 if reasons else 0


p = argparse.ArgumentParser()
p.add_argument("command", choices=["run", "sample", "summary"])
p.add_argument("kind", nargs="?")
p.add_argument("--until", type=float); p.add_argument("--proxy", type=int); p.add_argument("--ports")
p.add_argument("--results"); p.add_argument("--threads", type=int, default=1)
p.add_argument("--header-timeout", type=float, default=15)
p.add_argument("--pid", type=int); p.add_argument("--log"); p.add_argument("--csv"); p.add_argument("--every", type=float, default=5)
p.add_argument("--duration", type=int, default=0)
p.add_argument("--reloads-sent", type=int, default=0); p.add_argument("--reloads-seen", type=int, default=0)
p.add_argument("--reload-failed", type=int, default=0)
p.add_argument("--alive-at-end", type=int, default=1); p.add_argument("--exit-code", type=int, default=0)
p.add_argument("--settled", default="yes")
a = p.parse_args()
if a.command == "run": run(a)
elif a.command == "sample": sample(a)
else: sys.exit(summary(a))
