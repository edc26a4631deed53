#!/usr/bin/env python3
"""A parent HTTP proxy for pinproxy's upstream_proxy tests, on 127.0.0.1. Prints 'PORT <n>' once
listening and serves until stdin closes. Each CONNECT it receives is appended to --log as
'CONNECT <target> auth=<the Proxy-Authorization value or ->'.

  parent.py --mode tunnel    [--map NAME=IP]...  resolves names with the map (the parent's own DNS);
                                                 an absolute-form http:// request is forwarded too
  parent.py --mode refuse                        answers every CONNECT 403 Forbidden
  parent.py --mode intercept --to PORT           tunnels every CONNECT to 127.0.0.1:PORT instead
                                                 (an interception proxy, e.g. with a rogue CA)
  --auth USER:PASS                               answers 407 unless Basic USER:PASS is sent
  --split-answer SECONDS                         sends a CONNECT's 200 head but its blank line, and
                                                 the blank line SECONDS later
  --trickle-answer SECONDS                       sends a CONNECT's 200 status line, then a header
                                                 line every SECONDS, 40 in all, then the blank line
"""
import argparse, base64, socket, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("--mode", choices=["tunnel", "refuse", "intercept"], default="tunnel")
p.add_argument("--map", action="append", default=[]); p.add_argument("--to", type=int)
p.add_argument("--auth"); p.add_argument("--log", required=True)
p.add_argument("--split-answer", type=float, default=0)
p.add_argument("--trickle-answer", type=float, default=0)
a = p.parse_args()
names = dict(m.split("=", 1) for m in a.map)
lock = threading.Lock()

def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data: break
            dst.sendall(data)
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass

def forward_plain(conn, head, method, target):
    """One absolute-form plain-HTTP request: sent on in origin-form, the answer pumped back until close."""
    authority, _, path = target[len("http://"):].partition("/")
    host, _, port = authority.rpartition(":") if ":" in authority else (authority, "", "80")
    upstream = socket.create_connection((names.get(host, host), int(port)), timeout=10)
    first, _, rest = head.partition(b"\r\n")
    upstream.sendall(("%s /%s HTTP/1.1\r\n" % (method, path)).encode() + rest)
    t = threading.Thread(target=pump, args=(upstream, conn), daemon=True); t.start()
    pump(conn, upstream)
    t.join(30)
    upstream.close()

def handle(conn):
    conn.settimeout(30)
    try:
        head = b""
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = conn.recv(4096)
            if not chunk: return
            head += chunk
        lines = head.split(b"\r\n\r\n")[0].decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
        auth = headers.get("proxy-authorization", "-")
        with lock, open(a.log, "a") as f:
            f.write("%s %s auth=%s\n" % (method, target, auth))
        if a.auth and auth != "Basic " + base64.b64encode(a.auth.encode()).decode():
            conn.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic realm=\"parent\"\r\nContent-Length: 0\r\n\r\n"); return
        if a.mode == "tunnel" and method != "CONNECT" and target.startswith("http://"):
            return forward_plain(conn, head, method, target)
        if a.mode == "refuse" or method != "CONNECT":
            conn.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n"); return
        host, port = target.rsplit(":", 1)
        host = host.strip("[]")
        if a.mode == "intercept":
            host, port = "127.0.0.1", a.to
        upstream = socket.create_connection((names.get(host, host), int(port)), timeout=10)
        if a.split_answer:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n")
            time.sleep(a.split_answer)
        if a.trickle_answer:
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n")
            for n in range(40):
                time.sleep(a.trickle_answer)
                conn.sendall(b"X-Still-Coming: %d\r\n" % n)
        conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n"[-2 if a.split_answer or a.trickle_answer else 0:])
        conn.settimeout(None); upstream.settimeout(None)
        t = threading.Thread(target=pump, args=(upstream, conn), daemon=True); t.start()
        pump(conn, upstream)
        t.join(30)
        upstream.close()
    except OSError:
        try: conn.sendall(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\n\r\n")
        except OSError: pass
    finally:
        conn.close()

srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0)); srv.listen(64)
print("PORT", srv.getsockname()[1], flush=True)
def serve():
    while True:
        c, _ = srv.accept()
        threading.Thread(target=handle, args=(c,), daemon=True).start()
threading.Thread(target=serve, daemon=True).start()
sys.stdin.read()
