#!/usr/bin/env python3
"""The soak's plain-HTTP server for exchanges that clients cut or abandon (Benchmarks/soak.sh).
Loopback only; prints 'PORT <n>' once listening and serves until stdin closes.

  soak_plain.py --results DIR [--release-within S]

  GET  /silent/<tag>     reads the head and never answers: waits for the proxy to close the connection
  GET  /trickle/<tag>    200 with Content-Length 64 MiB, 16 KiB every 20 ms, until the proxy closes
  POST /upload/<tag>     reads a Content-Length body; answers 'received N' if it all arrives

The clients always leave within about a second of their request head, so the proxy must close
its connection to this server soon after: each connection is timed from its request head to the
proxy's close (EOF, reset or a failed write). One held longer than --release-within seconds is
counted late; none is held past 60 s (this server gives up then, and counts it as held). The tally
goes to DIR/plainserver.json after every connection: {"released": n, "late": n, "held": n,
"slowest_s": x, "open": n}.
"""
import argparse, json, os, socket, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("--results", required=True)
p.add_argument("--release-within", type=float, default=5.0)
a = p.parse_args()
HOLD = 60.0
tally = {"released": 0, "late": 0, "held": 0, "slowest_s": 0.0, "open": 0}
lock = threading.Lock()


def record(outcome, seconds):
    with lock:
        tally["open"] -= 1
        tally[outcome] += 1
        tally["slowest_s"] = round(max(tally["slowest_s"], seconds), 2)
        path = os.path.join(a.results, "plainserver.json")
        with open(path + ".new", "w") as f:
            json.dump(tally, f)
        os.replace(path + ".new", path)


def read_head(conn):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(4096)
        if not chunk or len(data) > 65536: return None, b""
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


def until_closed(conn, deadline):
    """Reads (and discards) until the proxy closes; False if the deadline came first."""
    while time.monotonic() < deadline:
        conn.settimeout(max(0.01, min(1.0, deadline - time.monotonic())))
        try:
            if not conn.recv(65536): return True
        except socket.timeout:
            continue
        except OSError:
            return True
    return False


def handle(conn):
    with lock: tally["open"] += 1
    outcome, start = "released", None
    try:
        conn.settimeout(HOLD)
        head, rest = read_head(conn)
        if head is None:
            start = time.monotonic()
            return
        start = time.monotonic()
        deadline = start + HOLD
        line = head.split("\r\n", 1)[0].split(" ")
        path = line[1] if len(line) > 1 else ""
        if path.startswith("/silent/"):
            closed = until_closed(conn, deadline)
        elif path.startswith("/trickle/"):
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (64 << 20))
            block, closed = b"t" * 16384, False
            conn.settimeout(1.0)
            while time.monotonic() < deadline:
                try:
                    conn.sendall(block)
                except socket.timeout:
                    continue   # the proxy has stopped reading: wait for its close
                except OSError:
                    closed = True; break
                time.sleep(0.02)
        elif path.startswith("/upload/"):
            length = next((int(h.split(":", 1)[1]) for h in head.split("\r\n")[1:] if h.lower().startswith("content-length:")), 0)
            got = len(rest)
            conn.settimeout(1.0)
            closed = False
            while time.monotonic() < deadline and got < length:
                try:
                    chunk = conn.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    closed = True; break
                if not chunk: closed = True; break
                got += len(chunk)
            if got >= length:
                body = b"received %d\n" % got
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
                closed = until_closed(conn, deadline)
        else:
            conn.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
            closed = until_closed(conn, deadline)
        if not closed: outcome = "held"
    except OSError:
        pass
    finally:
        conn.close()
        seconds = time.monotonic() - start if start is not None else 0.0
        if outcome == "released" and seconds > a.release_within: outcome = "late"
        record(outcome, seconds)


srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0))
srv.listen(512)
print("PORT", srv.getsockname()[1], flush=True)


def serve():
    while True:
        try: c, _ = srv.accept()
        except OSError: return
        threading.Thread(target=handle, args=(c,), daemon=True).start()


threading.Thread(target=serve, daemon=True).start()
sys.stdin.read()
os._exit(0)
