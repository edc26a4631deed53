#!/usr/bin/env python3
"""A TLS upstream for Benchmarks/relay.py that outruns the proxies: answers any GET with SIZE zero
bytes, written 1 MiB per SSL_write (openssl s_server -WWW writes 16 KiB at a time and is slower than
a relay). Usage: bulk_server.py PORT KEY CHAIN TLS(1.2|1.3) SIZE (CHAIN: the leaf and its intermediate, PEM); serves until killed.
`GET /bytes/N` answers N bytes instead of SIZE (the parallel rounds split SIZE between tunnels)."""
import socket, ssl, sys, threading

port, key, chain, tls, size = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(chain, key)
version = ssl.TLSVersion.TLSv1_2 if tls == "1.2" else ssl.TLSVersion.TLSv1_3
ctx.minimum_version = ctx.maximum_version = version
block = memoryview(bytes(1 << 20))

def serve(raw):
    try:
        conn = ctx.wrap_socket(raw, server_side=True)
        while True:
            head = b""
            while b"\r\n\r\n" not in head and len(head) < 65536:
                chunk = conn.recv(4096)
                if not chunk: return
                head += chunk
            target = head.split(b" ", 2)[1] if head.count(b" ") >= 2 else b"/"
            length = int(target[7:]) if target.startswith(b"/bytes/") and target[7:].isdigit() else size
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length)
            left = length
            while left > 0:
                n = min(left, len(block)); conn.sendall(block[:n]); left -= n
    except (OSError, ssl.SSLError):
        pass
    finally:
        raw.close()

srv = socket.socket(); srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", int(port))); srv.listen(128)
while True:
    c, _ = srv.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
