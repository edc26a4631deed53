#!/usr/bin/env python3
"""A load-balanced TLS server on 127.0.0.1 (issue 18): each handshake is answered, at random, with
one of several certificate chains (each with its own key, all meant to be pinned), as a pool of
backends behind one address would. TLS 1.2 and 1.3 (or one of them with --tls). Answers any HTTP/1.1
request with 200 and the body 'key=<name>' naming the chain it used, then closes.

  lb_server.py --backend NAME:CHAIN:KEY --backend NAME:CHAIN:KEY [--tls any|1.2|1.3] [--seed N] [--port 0]

Prints 'PORT <n>' once listening; serves until stdin closes (or SIGTERM).
"""
import argparse, os, random, signal, socket, ssl, sys, threading

p = argparse.ArgumentParser()
p.add_argument("--backend", action="append", required=True)
p.add_argument("--tls", choices=["1.2", "1.3", "any"], default="any")
p.add_argument("--seed", type=int)
p.add_argument("--port", type=int, default=0)
a = p.parse_args()

backends = []
for spec in a.backend:
    name, chain, key = spec.split(":", 2)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(chain, key)
    if a.tls == "1.2": ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if a.tls == "1.3": ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    backends.append((name, ctx))
choice = random.Random(a.seed)
choice_lock = threading.Lock()


def handle(raw):
    raw.settimeout(30)
    with choice_lock: name, ctx = choice.choice(backends)
    try:
        conn = ctx.wrap_socket(raw, server_side=True)
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = conn.recv(4096)
            if not chunk: return
            data += chunk
        body = ("key=%s\n" % name).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        try: conn.unwrap()
        except (ssl.SSLError, OSError): pass
    except (ssl.SSLError, OSError):
        pass  # a client (or a check) that hangs up during the handshake
    finally:
        try: raw.close()
        except OSError: pass


srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", a.port))
srv.listen(512)
print("PORT", srv.getsockname()[1], flush=True)


def serve():
    while True:
        try: c, _ = srv.accept()
        except OSError: return
        threading.Thread(target=handle, args=(c,), daemon=True).start()


signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
threading.Thread(target=serve, daemon=True).start()
sys.stdin.read()
os._exit(0)
