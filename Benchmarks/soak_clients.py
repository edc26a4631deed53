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
        garbage    random bytes → 400/405/431; plain GET to a pinned host → 403; a ClientHello to the
                   proxy → a TLS alert; a 9 KB CONNECT target → 431
        neverread  a good tunnel to a bulk server; read 1 KiB, stop reading for a few seconds, close
      and local abuse:
        silentflood     connections from 127.0.0.2 that never speak, --flood-rate a second, --flood-hold held
        plaincut        plain-HTTP exchanges to soak_plain.py cut by a reset or a close at each stage in turn
        plainabandon    a plain GET to soak_plain.py's silent path; the client leaves after 1 s
        http10          GET … HTTP/1.0 to plainhttp.py's chunked answer: must come de-chunked
        sniscope        CONNECT to a report-mode host with the SNI of an enforced one: must be closed
        metricstrickle  a /metrics head one byte every 1.5 s: must be closed at 5 s
        scrape          GET /metrics: must be 200
        keylogflood     CLIENT_RANDOM lines appended to --keylog at --keylog-rate bytes a second
  soak_clients.py sample --until T --proxy PORT --ports JSON --pid PID --log FILE --csv FILE --results DIR
      every --every seconds: VmRSS, open fds, active tunnels and silent_reaped (last `stats` line), the
      key-log file's memory (allocated blocks) and size, and the setup latency of one pinned CONNECT (-> 200, then TLS + GET)
  soak_clients.py summary --csv FILE --results DIR --log FILE ...   markdown summary and verdict (exit 1: fail)
"""
import argparse, collections, errno, json, os, random, resource, socket, ssl, statistics, struct, subprocess, sys, threading, time
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
    """Four kinds of request pinproxy does not serve, each with its own answer: random bytes after a
    letter (0x04, 0x05 and 0x16 would read as SOCKS or TLS) → 400/405/431; plain HTTP to a pinned
    host → 403 (a downgrade); a TLS ClientHello sent to the proxy itself → a fatal handshake_failure
    alert; a 9 KB CONNECT target → 431."""
    variants = [(lambda: bytes([random.randint(0x41, 0x5a)]) + bytes(random.getrandbits(8) for _ in range(random.randint(0, 300))).replace(b"\r\n\r\n", b"") + b"\r\n\r\n",
                 lambda got: got.split(b" ")[1:2] in ([b"400"], [b"405"], [b"431"])),
                (lambda: b"GET http://%s/ HTTP/1.1\r\nHost: x\r\n\r\n" % GOOD_HOST.encode(),
                 lambda got: got.startswith(b"HTTP/1.1 403 Pinned Host Requires HTTPS\r\n")),
                (lambda: b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + os.urandom(64) + b"\r\n\r\n",
                 lambda got: got[:1] == b"\x15" and got[5:7] == b"\x02\x28"),
                (lambda: b"CONNECT " + b"a" * 9000 + b":443 HTTP/1.1\r\n\r\n",
                 lambda got: got.startswith(b"HTTP/1.1 431 "))]
    request, expected = variants[i % len(variants)]
    s = socket.create_connection(("127.0.0.1", a.proxy), timeout=TIMEOUT)
    try:
        s.sendall(request())
    except OSError:
        pass  # the proxy may answer and close before it has read everything
    got = b""
    try:
        while b"\r\n\r\n" not in got and len(got) < 8192:
            chunk = s.recv(4096)
            if not chunk: break
            got += chunk
    except OSError:
        pass  # answered, then reset: what arrived is judged
    s.close()
    if not expected(got): raise RuntimeError("garbage variant %d: %r" % (i % len(variants), got[:60]))


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


# --- local abuse ----------------------------------------------------------------------------------

def cut(s, reset):
    """The client leaves: a reset (RST, SO_LINGER 0) or an ordinary close (FIN)."""
    if reset: s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()


def nothing_back(s, seconds, what):
    """The proxy must not answer yet (it is forwarding, or waiting for the server)."""
    s.settimeout(seconds)
    try:
        data = s.recv(4096)
    except socket.timeout:
        return
    finally:
        s.settimeout(TIMEOUT)
    raise RuntimeError("%s: %r before the cut, expected nothing" % (what, data[:80]))


def k_silentflood(a, ports, i):
    """One second of the flood: connections from 127.0.0.2 that never speak, opened at --flood-rate a
    second and held rolling (at most --flood-hold at once, the oldest closed first). The proxy's
    limit is a quarter of its RLIMIT_NOFILE (soak.sh lowers it), so it must reap. Every loopback
    address is one client to the proxy, so the source address changes nothing: the slow heads of
    127.0.0.1 survive because they have sent part of their head, and the flood has sent nothing."""
    held = FLOOD_HELD
    step = 1.0 / a.flood_rate
    end = time.time() + 1.0
    failed = 0
    while time.time() < min(end, a.until):
        while len(held) >= a.flood_hold:
            held.popleft().close()
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setblocking(False)
        s.bind(("127.0.0.2", 0))
        code = s.connect_ex(("127.0.0.1", a.proxy))
        if code in (0, errno.EINPROGRESS): held.append(s)
        else: s.close(); failed += 1
        time.sleep(step)
    if time.time() >= a.until:
        while held: held.popleft().close()
    if failed: raise RuntimeError("silentflood: %d connects failed in a second" % failed)


def plain_head(port, method, path, extra=b""):
    return b"%s http://127.0.0.1:%d%s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n%s\r\n" % (method, port, path.encode(), port, extra)


PLAIN_STAGES = ["head", "after-head", "body", "waiting", "answer"]


def k_plaincut(a, ports, i):
    """A plain-HTTP exchange the client cuts at one stage (in turn), by a reset or a close (in turn).
    The server (soak_plain.py) times how long the proxy holds its side after the cut."""
    stage, reset = PLAIN_STAGES[i % 5], (i // 5) % 2 == 0
    port, tag = ports["plaincut"], "c%d" % i
    s = socket.create_connection(("127.0.0.1", a.proxy), timeout=TIMEOUT)
    what = "plaincut %s (%s)" % (stage, "reset" if reset else "close")
    try:
        if stage == "head":
            s.sendall(plain_head(port, b"POST", "/upload/" + tag)[:-20])
            time.sleep(0.05)
        elif stage == "after-head":
            s.sendall(plain_head(port, b"POST", "/upload/" + tag, b"Content-Length: 1000000\r\n"))
            nothing_back(s, 0.1, what)
        elif stage == "body":
            s.sendall(plain_head(port, b"POST", "/upload/" + tag, b"Content-Length: 1000000\r\n") + bytes(100000))
            nothing_back(s, 0.1, what)
        elif stage == "waiting":
            s.sendall(plain_head(port, b"GET", "/silent/" + tag))
            nothing_back(s, 0.3, what)
        else:
            s.sendall(plain_head(port, b"GET", "/trickle/" + tag))
            data = b""
            while len(data) < 20000:
                chunk = s.recv(65536)
                if not chunk: break
                data += chunk
            if not data.startswith(b"HTTP/1.1 200 ") or len(data) < 20000:
                raise RuntimeError("%s: %r (%d bytes), expected a 200 and a body under way" % (what, data[:60], len(data)))
    finally:
        cut(s, reset)


def k_plainabandon(a, ports, i):
    """A plain request to a server that never answers; the client gives up after a second and leaves."""
    s = socket.create_connection(("127.0.0.1", a.proxy), timeout=TIMEOUT)
    try:
        s.sendall(plain_head(ports["plaincut"], b"GET", "/silent/a%d" % i))
        nothing_back(s, 1.0, "plainabandon")
    finally:
        s.close()


CHUNKED_BODY = "".join("chunk %d\n" % n for n in range(100)).encode()


def k_http10(a, ports, i):
    """HTTP/1.0 client, chunked server (plainhttp.py /chunked): the answer must come de-chunked —
    no Transfer-Encoding, the body as sent, delimited by the proxy's close."""
    s = socket.create_connection(("127.0.0.1", a.proxy), timeout=TIMEOUT)
    port = ports["plain"]
    s.sendall(b"GET http://127.0.0.1:%d/chunked HTTP/1.0\r\nHost: 127.0.0.1:%d\r\n\r\n" % (port, port))
    data = b""
    try:
        while len(data) < 1 << 20:
            chunk = s.recv(65536)
            if not chunk: break
            data += chunk
    except socket.timeout:
        raise RuntimeError("http10: no close within %d s (%d bytes: %r)" % (TIMEOUT, len(data), data[:80]))
    finally:
        s.close()
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    fields = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    if not lines[0].startswith("HTTP/1.") or lines[0].split(" ")[1:2] != ["200"]: raise RuntimeError("http10: %r" % lines[0])
    if "transfer-encoding" in fields: raise RuntimeError("http10: Transfer-Encoding %r reached an HTTP/1.0 client" % fields["transfer-encoding"])
    if "content-length" in fields and fields["content-length"] != str(len(CHUNKED_BODY)):
        raise RuntimeError("http10: Content-Length %s for a %d-byte body" % (fields["content-length"], len(CHUNKED_BODY)))
    if body != CHUNKED_BODY: raise RuntimeError("http10: body %r…, expected the de-chunked lines" % body[:60])


def k_sniscope(a, ports, i):
    """CONNECT to report.api.pinproxy.test (mode: report) at the rogue server, with a ClientHello
    naming api.pinproxy.test, which an enforced rule pins: the CONNECT gets its 200 (report mode),
    the ClientHello must be closed — the rogue server's body never arrives (TLS 1.2 and 1.3 in turn)."""
    s, line = connect_head(a.proxy, "report.api.pinproxy.test:%d" % ports["rogue"])
    if not line.startswith("HTTP/1.1 200"):
        s.close(); raise RuntimeError("sniscope CONNECT: %r" % line)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname, ctx.verify_mode = False, ssl.CERT_NONE   # an attacker's client: only the proxy may stop it
    ctx.minimum_version = ctx.maximum_version = (ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3)[i % 2]
    try:
        tls = ctx.wrap_socket(s, server_hostname=GOOD_HOST)
    except (ssl.SSLError, OSError):
        s.close(); return   # closed at the ClientHello
    try:
        tls.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % GOOD_HOST.encode())
        data = tls.recv(4096)
    except (ssl.SSLError, OSError):
        data = b""
    tls.close()
    raise RuntimeError("sniscope: the TLS handshake with the rogue server completed (%s), got %r" % (ctx.maximum_version.name, data[:60]))


def k_metricstrickle(a, ports, i):
    """A metrics client sending its head one byte every 1.5 s: closed 5 s after its accept."""
    s = socket.create_connection(("127.0.0.1", a.metrics), timeout=TIMEOUT)
    start, answer, closed = time.monotonic(), b"", None
    try:
        for b in b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n":
            try:
                s.sendall(bytes([b]))
            except OSError:
                closed = time.monotonic(); break
            s.settimeout(1.5)
            try:
                chunk = s.recv(4096)
                answer += chunk
                if not chunk: closed = time.monotonic(); break
            except socket.timeout:
                continue
            except OSError:
                closed = time.monotonic(); break
            if time.monotonic() - start > 20: break
    finally:
        s.close()
    if closed is None: raise RuntimeError("metricstrickle: still open after %.1f s" % (time.monotonic() - start))
    held = closed - start
    if not 4.0 <= held <= 8.0: raise RuntimeError("metricstrickle: closed after %.1f s (expected 5 s), answer %r" % (held, answer[:60]))


def k_scrape(a, ports, i):
    """An ordinary scrape while the tricklers hold their connections: 200 with the counters."""
    s = socket.create_connection(("127.0.0.1", a.metrics), timeout=TIMEOUT)
    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    data = b""
    while len(data) < 1 << 20:
        chunk = s.recv(65536)
        if not chunk: break
        data += chunk
    s.close()
    if not data.startswith(b"HTTP/1.1 200 ") or b"\npinproxy_connections_accepted_total " not in data:
        raise RuntimeError("scrape: %r" % data[:80])


def keylog_block():
    line = lambda: "CLIENT_RANDOM %s %s\n" % (os.urandom(32).hex(), os.urandom(48).hex())
    return "".join(line() for _ in range(1000)).encode()


def keylog_footprint(path):
    """(bytes the key-log file holds in memory — its allocated blocks, what tmpfs costs —, its size).
    They differ once pinproxy punches out what it has read: the size keeps growing, the memory not."""
    try:
        st = os.stat(path)
    except OSError:
        return 0, 0
    return st.st_blocks * 512, st.st_size


def k_keylogflood(a, ports, i):
    """One second of appending CLIENT_RANDOM lines to the key log at --keylog-rate bytes a second
    (in 10 ms slices; the file opened anew each second, as clients open it per connection). Stops
    writing for good once the file passes KEYLOG_CAP: the proxy is not bounding it."""
    global KEYLOG_STOPPED
    if KEYLOG_STOPPED: time.sleep(1); return
    held, _ = keylog_footprint(a.keylog)
    if held > KEYLOG_CAP:
        KEYLOG_STOPPED = True
        raise RuntimeError("keylogflood: the key-log file holds %d MiB; writer stopped" % (held >> 20))
    # whole lines per write: an O_APPEND write is not split, so a client's own line lands between
    # two flood lines and never inside one
    block, line = KEYLOG_BLOCK, KEYLOG_BLOCK.index(b"\n") + 1
    piece = max(1, int(a.keylog_rate / 100) // line) * line
    with open(a.keylog, "ab", buffering=0) as f:
        end = time.time() + 1.0
        offset = 0
        while time.time() < min(end, a.until):
            if offset + piece > len(block): offset = 0
            f.write(block[offset:offset + piece])
            offset += piece
            time.sleep(0.01)


FLOOD_HELD = collections.deque()
KEYLOG_BLOCK = b""
KEYLOG_STOPPED = False
KEYLOG_CAP = 256 << 20   # a safety valve for /dev/shm (RAM); the verdict's bound (--keylog-bound) is far lower

KINDS = {"curl": (k_curl, 0.2), "urllib": (k_urllib, 0.2), "rogue": (k_rogue, 0.5), "replay": (k_replay, 0.5),
         "resets": (k_resets, 0.5), "slow": (k_slow, 0.5), "stall": (k_stall, 0.5), "garbage": (k_garbage, 0.3),
         "neverread": (k_neverread, 1.0), "silentflood": (k_silentflood, 0), "plaincut": (k_plaincut, 0.1),
         "plainabandon": (k_plainabandon, 0.2), "http10": (k_http10, 0.3), "sniscope": (k_sniscope, 0.5),
         "metricstrickle": (k_metricstrickle, 0.5), "scrape": (k_scrape, 1.0), "keylogflood": (k_keylogflood, 0)}


def run(a):
    ports = json.loads(a.ports)
    fn, pause = KINDS[a.kind]
    tally = Tally(a.kind, a.results)
    if a.kind == "keylogflood":
        global KEYLOG_BLOCK
        KEYLOG_BLOCK = keylog_block()
    if a.kind == "silentflood":
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, a.flood_hold + 64)), hard))
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
        out.write("t_s,rss_kib,fds,tunnels,active_sessions,setup_ms,keylog_held,silent_reaped,keylog_size\n")
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
            keylog_held, keylog_size = keylog_footprint(a.keylog)
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
            out.write("%.1f,%d,%d,%s,%s,%s,%d,%s,%d\n" % (time.time() - start, rss, fds, stats.get("tunnels", ""), stats.get("active_sessions", ""),
                                                          ms, keylog_held, stats.get("silent_reaped", ""), keylog_size))
            out.flush()
            time.sleep(max(0.0, a.every - (time.time() - start) % a.every))
    tally.save()


# --- summary --------------------------------------------------------------------------------------

def pct(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(p / 100 * len(v) + 0.5)) - 1))]


EXPECT = {"curl": "good tunnel, body asserted (curl, TLS 1.2/1.3)", "urllib": "good tunnel, body asserted (urllib, TLS 1.2/1.3)",
          "latency": "sampler's pinned CONNECT → 200, then GET", "slow": "head 1 byte/200 ms, then GET works",
          "neverread": "good tunnel to a bulk server, 3 s not reading",
          "rogue": "rogue-CA server → 502 Certificate Pin Mismatch", "replay": "replayed chain, no key → 502 TLS Handshake Failed",
          "resets": "CONNECT to a flood server, send, reset", "stall": "half a head → 408 at header_timeout",
          "garbage": "random bytes → 400/405/431, plain GET to a pinned host → 403, TLS to the proxy → alert, 9 KB target → 431",
          "silentflood": "seconds of silent connections from 127.0.0.2, held rolling; the proxy reaps them",
          "plaincut": "plain exchange cut (reset/close) in the head, after it, in the body, waiting, in the answer",
          "plainabandon": "plain GET to a silent server, the client leaves after 1 s",
          "http10": "HTTP/1.0 GET, chunked server → de-chunked, close-delimited",
          "sniscope": "CONNECT report-mode host, SNI of an enforced host, rogue server → closed (TLS 1.2/1.3)",
          "metricstrickle": "metrics head 1 byte/1.5 s → closed at 5 s", "scrape": "GET /metrics → 200 meanwhile",
          "keylogflood": "seconds of CLIENT_RANDOM lines appended to the key log"}
GOOD_KINDS = ["curl", "urllib", "latency", "slow", "neverread"]
REPORT_HOST = "report.api.pinproxy.test"


def fields(line):
    """key=value pairs of a logfmt line (values here have no spaces, or are quoted without them)."""
    return dict(kv.split("=", 1) for kv in line.split() if "=" in kv)


def summary(a):
    kinds = a.kinds.split(",")
    ports = json.loads(a.ports)
    rows = []
    with open(a.csv) as f:
        next(f)
        for line in f:
            t, rss, fds, tun, act, ms, held, reaped, size = line.strip().split(",")
            rows.append((float(t), int(rss), int(fds), tun, act, float(ms) if ms else None, int(held), reaped, int(size)))
    reasons = []
    counts = {}
    for kind in kinds + ["latency"]:
        path = os.path.join(a.results, kind + ".json")
        if not os.path.exists(path):
            reasons.append("%s clients left no result" % kind); continue
        with open(path) as f: counts[kind] = json.load(f)
    for kind, c in counts.items():
        if c["failed"]:
            what = "good tunnel" if kind in GOOD_KINDS else "expectation"
            first = ", ".join("%s (%d×)" % (e, n) for e, n in list(c["errors"].items())[:3])
            reasons.append("%d %s client %s failure(s): %s" % (c["failed"], kind, what, first))
        if c["ok"] == 0: reasons.append("no %s client ever succeeded" % kind)
    # Refusals and plain exchanges in the log must be the intended ones.
    refused, forwarded, events = {}, {}, {}
    attacks_through, reaped_in_lines, stopped = 0, 0, {}
    plain_ports = {str(ports.get("plaincut")): "plaincut/plainabandon", str(ports.get("plain")): "http10"}
    with open(a.log, "rb") as f:
        for raw in f:
            line = raw.decode("latin-1")
            event = line.split(" event=", 1)[-1].split(" ", 1)[0]
            if event in ("tunnel_refused", "tunnel_allowed", "tunnel_bypassed", "tunnel_unpinned"):
                host = line.split(" host=", 1)[-1].split(" ", 1)[0].strip('"')
                if event != "tunnel_refused":
                    attacks_through += host in ("rogue.api.pinproxy.test", "replay.pinproxy.test")
                    continue
                reason = line.split(" reason=", 1)[-1].split(" ", 1)[0]
                refused[(host, reason)] = refused.get((host, reason), 0) + 1
            elif event == "http_forwarded":
                kv = fields(line)
                kind = plain_ports.get(kv.get("port"), "port " + kv.get("port", "?"))
                late = kind == "plaincut/plainabandon" and int(kv.get("duration_ms", "0")) > a.release_within * 1000
                key = (kind, kv.get("outcome", "?") + (" after > %g s" % a.release_within if late else ""))
                forwarded[key] = forwarded.get(key, 0) + 1
            elif event == "stopped":
                stopped = fields(line)
            if event in ("silent_connections_reaped", "keylog_flooded", "keylog_replaced", "accept_failed",
                         "log_lines_dropped", "restart_required", "worker_stuck"):
                events[event] = events.get(event, 0) + 1
                if event == "silent_connections_reaped": reaped_in_lines += int(fields(line).get("reaped", "0"))
    if attacks_through: reasons.append("%d tunnel(s) to an attacker were let through" % attacks_through)
    want = {("rogue.api.pinproxy.test", "pin_mismatch"), ("replay.pinproxy.test", "tls_protocol_error"), (REPORT_HOST, "sni_mismatch")}
    for key, n in refused.items():
        if key not in want: reasons.append("unexpected refusal %s reason=%s (%d×)" % (key[0], key[1], n))
    if "sniscope" in counts and refused.get((REPORT_HOST, "sni_mismatch"), 0) < counts["sniscope"]["ok"]:
        reasons.append("%d sniscope tunnels closed but only %d refused sni_mismatch" % (counts["sniscope"]["ok"], refused.get((REPORT_HOST, "sni_mismatch"), 0)))
    # Cut and abandoned exchanges end because the client left (client_*), within release_within.
    for (kind, outcome), n in forwarded.items():
        if kind == "plaincut/plainabandon" and not (outcome.startswith("client_") and "after" not in outcome) or kind == "http10" and outcome != "complete":
            reasons.append("unexpected http_forwarded for %s: outcome=%s (%d×)" % (kind, outcome, n))
    server = {}
    if {"plaincut", "plainabandon"} & set(kinds):
        try:
            with open(os.path.join(a.results, "plainserver.json")) as f: server = json.load(f)
        except OSError:
            reasons.append("the plain server recorded no connection")
        if server.get("late") or server.get("held") or server.get("open"):
            reasons.append("the proxy held cut or abandoned plain exchanges' server connections: %d closed later than %g s after "
                           "the request, %d held 60 s, %d still open at the end" % (server.get("late", 0), a.release_within,
                                                                                    server.get("held", 0), server.get("open", 0)))
    silent_reaped = int(stopped.get("silent_reaped", "0") or 0)
    if "silentflood" in kinds and silent_reaped == 0: reasons.append("the silent flood never made the proxy reap (silent_reaped=0)")
    keylog = [r[6] for r in rows]
    if "keylogflood" in kinds and keylog and max(keylog) > a.keylog_bound:
        reasons.append("the key-log file held %.1f MiB of memory (bound %.1f MiB)" % (max(keylog) / 2**20, a.keylog_bound / 2**20))
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
    if "keylogflood" in kinds and lat and pct(lat, 50) > a.latency_bound:
        reasons.append("setup latency p50 %.1f ms under the key-log flood (bound %g ms)" % (pct(lat, 50), a.latency_bound))
    print("### Soak: %d s, %d samples every %g s (release build, loopback, %d cores)\n" % (a.duration, n, a.every, os.cpu_count()))
    print("| client kind | expectation | ok | failed |")
    print("|---|---|---|---|")
    for kind in [k for k in EXPECT if k in kinds or k == "latency"]:
        c = counts.get(kind, {"ok": 0, "failed": 0})
        print("| %s | %s | %d | %d |" % (kind, EXPECT[kind], c["ok"], c["failed"]))
    print()
    print("| measurement | value |")
    print("|---|---|")
    print("| reloads (SIGHUP every 30 s) | %d sent, %d `policy_reloaded`, %d failed |" % (a.reloads_sent, a.reloads_seen, a.reload_failed))
    print("| refusals in the log | %s |" % ", ".join("%s %s: %d" % (h, r, c) for (h, r), c in sorted(refused.items())))
    if forwarded: print("| `http_forwarded` outcomes | %s |" % ", ".join("%s %s: %d" % (k, o, c) for (k, o), c in sorted(forwarded.items())))
    if server: print("| plain server: connections the proxy released ≤ %g s / later / held 60 s / open at the end; slowest | %d / %d / %d / %d; %.1f s |"
                     % (a.release_within, server.get("released", 0), server.get("late", 0), server.get("held", 0), server.get("open", 0), server.get("slowest_s", 0)))
    print("| silent connections reaped (`silent_reaped` at stop; sum of `silent_connections_reaped` lines) | %d; %d |" % (silent_reaped, reaped_in_lines))
    if events: print("| events of note | %s |" % ", ".join("`%s` %d" % kv for kv in sorted(events.items())))
    if rows:
        print("| RSS first / median / last / max | %.1f / %.1f / %.1f / %.1f MiB |" % (rss[0], statistics.median(rss), rss[-1], max(rss)))
        print("| RSS trend | %s |" % verdict_rss)
        print("| fds first / median / last / max | %d / %g / %d / %d |" % (fds[0], statistics.median(fds), fds[-1], max(fds)))
        print("| fds trend | %s |" % verdict_fds)
        print("| key-log file in memory (allocated) median / max (bound %.0f MiB); its size at the end | %.2f / %.2f MiB; %.1f MiB |"
              % (a.keylog_bound / 2**20, statistics.median(keylog) / 2**20, max(keylog) / 2**20, rows[-1][8] / 2**20))
    if tunnels: print("| active tunnels (stats) median / max | %g / %d |" % (statistics.median(tunnels), max(tunnels)))
    if lat: print("| setup latency (CONNECT → 200, pinned) p50 / p99 / max | %.1f / %.1f / %.1f ms |" % (pct(lat, 50), pct(lat, 99), max(lat)))
    counters = {k: v for k, v in stopped.items() if k.startswith(("silent_", "keylog_", "plain_", "metrics_", "http_")) or
                k in ("accepted", "rejected", "refused", "bypassed", "live_session_objects", "active_sessions")}
    if counters: print("| counters at stop | %s |" % ", ".join("%s=%s" % kv for kv in sorted(counters.items())))
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
p.add_argument("--kinds", default=",".join(k for k in EXPECT if k != "latency"))
p.add_argument("--metrics", type=int, default=0); p.add_argument("--keylog", default="")
p.add_argument("--flood-rate", type=float, default=100); p.add_argument("--flood-hold", type=int, default=400)
p.add_argument("--keylog-rate", type=float, default=4 << 20); p.add_argument("--keylog-bound", type=int, default=32 << 20)
p.add_argument("--release-within", type=float, default=5); p.add_argument("--latency-bound", type=float, default=100)
a = p.parse_args()
if a.command == "run": run(a)
elif a.command == "sample": sample(a)
else: sys.exit(summary(a))
