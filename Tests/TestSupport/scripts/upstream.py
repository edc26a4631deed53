#!/usr/bin/env python3
"""A test upstream on 127.0.0.1 for pinproxy's end-to-end tests. Prints 'PORT <n>' once listening,
then serves until stdin closes (so it never outlives the test that started it).

modes:
  https       TLS with the given chain; answers any HTTP request with 'hello from <name>'
  clientcert  as https, but requires a client certificate (pinproxy's probe has none)
  silent      accepts TCP and never says anything
  plain       speaks plain HTTP, not TLS
  bulk        TLS; after a request, sends up to --bulk-bytes as fast as the peer reads
  keepalive   as https, but keeps the connection and answers each request on it until the peer closes
  flood       plain TCP; after the first bytes from the peer, sends up to --bulk-bytes until it is gone
  echo        plain TCP; sends back everything it reads, and half-closes after the peer's EOF
  talkfirst   plain TCP; after the peer's first byte, sends --bulk-bytes of relay.py's pattern and
              half-closes, then reads until the peer's EOF
  greetfirst  as talkfirst, but sends at once, before the peer says anything
"""
import argparse, os, socket, ssl, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("--cert"); p.add_argument("--key"); p.add_argument("--name", default="upstream")
p.add_argument("--tls", choices=["1.2", "1.3", "any"], default="any")
p.add_argument("--mode", default="https"); p.add_argument("--ca")
p.add_argument("--bulk-bytes", type=int, default=1 << 30)
p.add_argument("--port", type=int, default=0)
p.add_argument("--bind", default="127.0.0.1")
p.add_argument("--groups", help="the one key-exchange group (e.g. secp384r1): clients that send X25519 first get a HelloRetryRequest")
p.add_argument("--rogue-cert", help="with --rogue-key: a second listener whose connections get this chain, "
               "from a context that shares the first one's session-ticket keys (reported as rogue_port=N)")
p.add_argument("--rogue-key")
p.add_argument("--serverinfo", help="a PEM SERVERINFO file (openssl s_server -serverinfo): extensions the server sends, "
               "here SCTs by TLS extension to clients that ask for them")
a = p.parse_args()

def use_serverinfo(context, path):
    """Python's ssl has no SSL_CTX_use_serverinfo_file: call it on the context's SSL_CTX, which CPython
    keeps right after the object header (PySSLContext), through the libssl the ssl module loaded."""
    import ctypes
    libssl = ctypes.CDLL("libssl.so.3")
    libssl.SSL_CTX_use_serverinfo_file.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    ssl_ctx = ctypes.c_void_p.from_address(id(context) + 2 * ctypes.sizeof(ctypes.c_void_p)).value
    if libssl.SSL_CTX_use_serverinfo_file(ssl_ctx, path.encode()) != 1:
        sys.exit("SSL_CTX_use_serverinfo_file failed for %s" % path)

ctx = None
if a.mode in ("https", "clientcert", "bulk", "slow", "keepalive"):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    if a.tls == "1.2": ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if a.tls == "1.3": ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if a.groups: ctx.set_ecdh_curve(a.groups)
    if a.serverinfo: use_serverinfo(ctx, a.serverinfo)
    if a.mode == "clientcert":
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(a.ca)

def listener(port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind((a.bind, port)); s.listen(512)
    return s

srv = listener(a.port)
listeners = [srv]
rogue_port = None
if a.rogue_cert:
    # OpenSSL encrypts tickets with the keys of the context a connection started in; switching the
    # certificate in the SNI callback keeps those keys, so the two listeners' tickets are interchangeable.
    rogue_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    rogue_ctx.load_cert_chain(a.rogue_cert, a.rogue_key)
    if a.tls == "1.3": rogue_ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    rogue_srv = listener(0)
    rogue_port = rogue_srv.getsockname()[1]
    listeners.append(rogue_srv)
    def choose(sslsock, name, initial):
        if sslsock.getsockname()[1] == rogue_port: sslsock.context = rogue_ctx
    ctx.sni_callback = choose
print("PORT", srv.getsockname()[1], *(["rogue_port=%d" % rogue_port] if rogue_port else []), flush=True)

def read_request(conn):
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = conn.recv(4096)
        if not chunk: return None
        data += chunk
    return data

def handle(raw):
    raw.settimeout(30)
    try:
        if a.mode == "silent":  # accept TCP, never answer, hold the connection
            time.sleep(30); return
        if a.mode == "plain":  # a plain HTTP server answers a ClientHello with 400, as nginx does
            raw.recv(4096)
            raw.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"); return
        if a.mode == "flood":
            if not raw.recv(4096): return
            chunk = b"f" * 65536; sent = 0
            while sent < a.bulk_bytes:
                raw.sendall(chunk); sent += len(chunk)
            return
        if a.mode == "echo":
            while True:
                chunk = raw.recv(262144)
                if not chunk: break
                raw.sendall(chunk)
            raw.shutdown(socket.SHUT_WR)
            raw.recv(1)  # until the peer closes (or the timeout)
            return
        if a.mode in ("talkfirst", "greetfirst"):
            if a.mode == "talkfirst" and not raw.recv(1): return
            import random
            raw.sendall(random.Random(2).randbytes(a.bulk_bytes))
            raw.shutdown(socket.SHUT_WR)
            while raw.recv(262144): pass
            return
        if a.mode == "slow":  # TLS, but the handshake starts only after a second
            time.sleep(1)
        conn = ctx.wrap_socket(raw, server_side=True) if ctx else raw
        if read_request(conn) is None: return
        if a.mode == "bulk":
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % a.bulk_bytes)
            chunk = b"x" * 65536; sent = 0
            while sent < a.bulk_bytes:
                conn.sendall(chunk); sent += len(chunk)
            return
        body = ("hello from %s\n" % a.name).encode()
        if a.mode == "keepalive":  # answer every request and keep the connection until the client closes it
            conn.settimeout(None)
            while True:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
                if read_request(conn) is None: return
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        try:
            conn.shutdown(socket.SHUT_WR) if ctx is None else conn.unwrap()
        except Exception:
            pass
    except Exception:
        pass
    finally:
        try: raw.close()
        except Exception: pass

def serve(listening):
    while True:
        try: c, _ = listening.accept()
        except OSError: return
        threading.Thread(target=handle, args=(c,), daemon=True).start()

for listening in listeners: threading.Thread(target=serve, args=(listening,), daemon=True).start()
sys.stdin.read()  # the test closes stdin (or dies) to stop us
os._exit(0)
