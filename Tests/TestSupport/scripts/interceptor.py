#!/usr/bin/env python3
"""A selective TLS interceptor on 127.0.0.1 for the mirror check's tests (issue 18): for each
connection it reads the client's first ClientHello (bounded), decides by one strategy whether to
intercept, then connects to the ROGUE upstream (intercept) or the GENUINE one, writes the hello
bytes it read and relays both ways until either side closes. It plays an on-path interceptor that
tries to tell pinproxy's check from the client's own connection before it must show a certificate.

  interceptor.py --genuine PORT|HOST:PORT --rogue PORT|HOST:PORT --strategy S --log FILE
                 [--port 0] [--window-ms 100] [--invert] [--seed N] [--shape HASH]... [--learn FILE]
                 [--hello-timeout 5] [--until-stdin-closes]

Prints 'PORT <n>' once listening. Strategies (one per run):
  order:first|last|N  connections accepted within --window-ms of the previous one form a group;
                      intercept only the first, the last (decided once the window has passed with
                      no newcomer, so the last one's hello waits up to a window) or the N-th (1-based)
  fingerprint         intercept hellos whose shape (see `shape`) is in the set given by --shape
                      and --learn; with --invert, those whose shape is NOT in it (learn the
                      probe's shape, intercept everything that does not look like the probe)
  alpn                intercept hellos that carry ALPN (with --invert: those without)
  delay:MS            intercept when the hello arrived more than MS ms after the TCP accept (with
                      --invert: less than MS); MS may be a fraction
  random:P            intercept with probability P (--seed for a repeatable run)
  every:N             intercept every N-th connection accepted (the N-th, 2N-th, ...), whatever
                      its hello: with N=2 the look-alike connections of one tunnel are answered
                      differently from each other
  all | none          controls

pinproxy's probe today (ProbeTLS: OpenSSL defaults, ALPN h2,http/1.1, groups X25519:P-256:P-384,
TLS 1.2-1.3) has the shape of `openssl s_client -alpn h2,http/1.1 -groups X25519:P-256:P-384
-min_protocol TLSv1.2` (OpenSSL 3.0: 78916c3b13fbab2d); curl 7.88's differs (63cdab516e81980f), and
Go's net/http (no ALPN with a custom TLSClientConfig) again. To intercept all but the probe: learn
the probe (or that s_client) through a `none` run and use `fingerprint --invert --learn`.

--learn FILE reads shape hashes from FILE: an interceptor log (JSON lines, every `shape` in it) or
plain lines of hashes. Every connection appends one JSON line to --log when it is decided:
  {"index", "accept", "hello_delay_ms", "shape", "alpn", "sni", "psk", "group", "position",
   "decision": "genuine"|"rogue"|"dropped", "reason"}
('dropped': no complete ClientHello within --hello-timeout, garbage, or a reset; 'reason' says
which; an upstream that refuses the connection keeps the decision and says reason=upstream).
Exits on SIGTERM, SIGINT, or (with --until-stdin-closes) when stdin closes.
"""
import argparse, hashlib, json, os, random, selectors, signal, socket, struct, sys, threading, time

MAX_HELLO = 64 * 1024        # a ClientHello bigger than this is garbage here
MAX_CONNECTIONS = 512        # connections handled at once; more are closed at accept
IDLE_SECONDS = 60            # a relay that moves no byte for this long is closed
RELAY_SECONDS = 300          # and none lives longer than this
GREASE = {0x0a0a + 0x1010 * i for i in range(16)}


def address(text):
    host, _, port = text.rpartition(":")
    return (host or "127.0.0.1", int(port))


class Hello:
    """What the interceptor can see in a ClientHello before it must answer it."""

    def __init__(self, body):
        # body: the handshake message's body (after type and 24-bit length).
        self.ciphers, self.extensions, self.groups, self.alpn, self.sigalgs = [], [], [], [], []
        self.versions, self.sni, self.psk = [], None, False
        r = Reader(body)
        r.take(2 + 32)
        r.vector(1)
        self.ciphers = [self.norm(c) for c in u16s(r.vector(2))]
        r.vector(1)
        if r.left() == 0: return
        ext = Reader(r.vector(2))
        while ext.left() > 0:
            kind, data = struct.unpack("!H", ext.take(2))[0], ext.vector(2)
            self.extensions.append(self.norm(kind))
            d = Reader(data)
            if kind == 0 and d.left() >= 5:
                names = Reader(d.vector(2))
                if names.take(1) == b"\x00": self.sni = names.vector(2).decode("ascii", "replace")
            elif kind == 10:
                self.groups = [self.norm(x) for x in u16s(d.vector(2))]
            elif kind == 13:
                self.sigalgs = u16s(d.vector(2))
            elif kind == 16:
                protocols = Reader(d.vector(2))
                while protocols.left() > 0: self.alpn.append(protocols.vector(1).decode("ascii", "replace"))
            elif kind == 43:
                self.versions = [self.norm(x) for x in u16s(d.vector(1))]
            elif kind == 41:
                self.psk = True

    @staticmethod
    def norm(value):
        return 0x0a0a if value in GREASE else value

    def shape(self):
        """A hash of what stays the same from one hello of a client to the next: not the random,
        session id, SNI, key shares or PSK identities; the extension list does include a PSK's type."""
        text = json.dumps([self.ciphers, self.extensions, self.groups, self.alpn, self.sigalgs, self.versions])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def u16s(data):
    return [int.from_bytes(data[i:i + 2], "big") for i in range(0, len(data) - 1, 2)]


class Reader:
    def __init__(self, data): self.data, self.at = data, 0
    def left(self): return len(self.data) - self.at
    def take(self, n):
        if n > self.left(): raise ValueError("short")
        self.at += n
        return self.data[self.at - n:self.at]
    def vector(self, width):
        return self.take(int.from_bytes(self.take(width), "big"))


class Dropped(Exception):
    pass


def read_hello(sock, deadline):
    """Reads TLS records until one whole ClientHello message is in; returns (all bytes read, body)."""
    raw, handshake = b"", b""
    def need(n):
        nonlocal raw
        while len(raw) < n:
            left = deadline - time.monotonic()
            if left <= 0: raise Dropped("timeout")
            sock.settimeout(left)
            try:
                chunk = sock.recv(min(65536, n - len(raw)))
            except socket.timeout:
                raise Dropped("timeout")
            except OSError:
                raise Dropped("reset")
            if not chunk: raise Dropped("closed" if raw else "empty")
            raw += chunk
    at = 0
    for _ in range(8):  # a hello spans at most a few records
        need(at + 5)
        kind, major, length = raw[at], raw[at + 1], int.from_bytes(raw[at + 3:at + 5], "big")
        if kind != 22 or major != 3 or length == 0 or length > 16384 + 256: raise Dropped("garbage")
        need(at + 5 + length)
        handshake += raw[at + 5:at + 5 + length]
        at += 5 + length
        if len(handshake) >= 4:
            if handshake[0] != 1: raise Dropped("garbage")
            size = int.from_bytes(handshake[1:4], "big")
            if size > MAX_HELLO: raise Dropped("garbage")
            if len(handshake) >= 4 + size:
                return raw, handshake[4:4 + size]
    raise Dropped("garbage")


class Groups:
    """Connections accepted within the window of the previous one, numbered in accept order."""

    def __init__(self, window):
        self.window, self.changed = window, threading.Condition()
        self.number, self.size, self.last_accept = 0, 0, -1e9
        self.final = {}  # a closed group's size, for its members still deciding whether they were last

    def join(self, accepted):
        with self.changed:
            if accepted - self.last_accept > self.window:
                if self.number: self.final[self.number] = self.size
                self.number, self.size = self.number + 1, 0
            self.size += 1
            self.last_accept = accepted
            self.changed.notify_all()
            return self.number, self.size



class Interceptor:
    def __init__(self, a):
        self.a = a
        self.strategy, _, self.argument = a.strategy.partition(":")
        if self.strategy not in ("order", "fingerprint", "alpn", "delay", "random", "every", "all", "none"):
            raise SystemExit("unknown strategy " + a.strategy)
        self.random = random.Random(a.seed)
        self.groups = Groups(a.window_ms / 1000)
        self.shapes = set(a.shape or [])
        if a.learn: self.shapes |= learn(a.learn)
        self.log_lock = threading.Lock()
        self.log = open(a.log, "a", buffering=1)
        self.index = 0
        self.slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def decide(self, hello, delay_ms, group, position, index):
        s, arg = self.strategy, self.argument
        if s == "every": return (index % int(arg) == 0) != self.a.invert
        if s == "all": return True
        if s == "none": return False
        if s == "random":
            with self.log_lock: return self.random.random() < float(arg)
        if s == "order":
            if arg == "first": hit = position == 1
            elif arg == "last": hit = self.is_last(group, position)
            else: hit = position == int(arg)
        elif s == "fingerprint": hit = hello.shape() in self.shapes
        elif s == "alpn": hit = bool(hello.alpn)
        else: hit = delay_ms > float(arg)
        return hit != self.a.invert

    def is_last(self, group, position):
        g = self.groups
        deadline = time.monotonic() + 10 * g.window + 1
        with g.changed:
            while g.number == group and time.monotonic() - g.last_accept <= g.window and time.monotonic() < deadline:
                g.changed.wait(g.window)
            if g.number == group: return g.size == position
            return g.final.get(group) == position

    def accepted(self, sock):
        accepted = time.monotonic()
        group, position = self.groups.join(accepted)
        self.index += 1
        entry = {"index": self.index, "accept": round(time.time(), 6), "group": group, "position": position}
        threading.Thread(target=self.handle, args=(sock, accepted, entry), daemon=True).start()

    def write(self, entry):
        with self.log_lock:
            self.log.write(json.dumps(entry) + "\n")

    def handle(self, client, accepted, entry):
        upstream = None
        try:
            try:
                raw, body = read_hello(client, accepted + self.a.hello_timeout)
                entry["hello_delay_ms"] = round((time.monotonic() - accepted) * 1000, 3)
                hello = Hello(body)
            except (Dropped, ValueError, struct.error) as e:
                entry.update(decision="dropped", reason=str(e) if isinstance(e, Dropped) else "garbage")
                self.write(entry)
                return
            entry.update(shape=hello.shape(), alpn=hello.alpn, sni=hello.sni, psk=hello.psk)
            rogue = self.decide(hello, entry["hello_delay_ms"], entry["group"], entry["position"], entry["index"])
            if rogue and self.a.limit is not None:
                # A guesser that takes only its first chosen connection: of a tunnel and its
                # mirror, whichever comes first; every later one goes through.
                with self.log_lock:
                    rogue = self.a.limit > 0
                    self.a.limit -= 1
            entry["decision"] = "rogue" if rogue else "genuine"
            try:
                upstream = socket.create_connection(address(self.a.rogue if rogue else self.a.genuine), timeout=10)
                upstream.sendall(raw)
            except OSError:
                entry["reason"] = "upstream"
                self.write(entry)
                return
            self.write(entry)
            relay(client, upstream)
        finally:
            for s in (client, upstream):
                if s is not None:
                    try: s.close()
                    except OSError: pass
            self.slots.release()

    def serve(self):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.a.port))
        listener.listen(512)
        print("PORT", listener.getsockname()[1], flush=True)
        while True:
            sock, _ = listener.accept()
            if not self.slots.acquire(blocking=False):
                sock.close()
                continue
            self.accepted(sock)


def relay(a, b):
    a.setblocking(False); b.setblocking(False)
    selector = selectors.DefaultSelector()
    selector.register(a, selectors.EVENT_READ, b)
    selector.register(b, selectors.EVENT_READ, a)
    end = time.monotonic() + RELAY_SECONDS
    try:
        while time.monotonic() < end:
            ready = selector.select(IDLE_SECONDS)
            if not ready: return
            for key, _ in ready:
                try:
                    data = key.fileobj.recv(65536)
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError:
                    return
                if not data: return
                key.data.setblocking(True)
                key.data.settimeout(IDLE_SECONDS)
                try:
                    key.data.sendall(data)
                except OSError:
                    return
                key.data.setblocking(False)
    finally:
        selector.close()


def learn(path):
    shapes = set()
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line: continue
            if line.startswith("{"):
                shape = json.loads(line).get("shape")
                if shape: shapes.add(shape)
            else:
                shapes.add(line)
    return shapes


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--genuine", required=True); p.add_argument("--rogue", required=True)
    p.add_argument("--strategy", required=True); p.add_argument("--log", required=True)
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--window-ms", type=float, default=100)
    p.add_argument("--invert", action="store_true")
    p.add_argument("--seed", type=int)
    p.add_argument("--shape", action="append")
    p.add_argument("--learn")
    p.add_argument("--limit", type=int, help="intercept at most this many connections")
    p.add_argument("--hello-timeout", type=float, default=5)
    p.add_argument("--until-stdin-closes", action="store_true")
    a = p.parse_args()
    for sig in (signal.SIGTERM, signal.SIGINT): signal.signal(sig, lambda *_: os._exit(0))
    if a.until_stdin_closes:
        def watch():
            sys.stdin.read()
            os._exit(0)
        threading.Thread(target=watch, daemon=True).start()
    Interceptor(a).serve()


if __name__ == "__main__":
    main()
