#!/usr/bin/env python3
"""A TLS 1.3 client through pinproxy that writes its key log, and can write a wrong line first.

  keylog_client.py PROXYPORT HOST PORT CAFILE KEYLOG [wrong]

CONNECTs through the proxy, makes the ClientHello in memory, and — with `wrong` — once the
server's first bytes (its ServerHello) arrive, appends a SERVER_HANDSHAKE_TRAFFIC_SECRET line with a
random secret for that ClientHello's random to KEYLOG and waits 0.3 s before reading them, so
that line comes before its own (Python writes its lines to KEYLOG as the handshake goes).
Prints 'OK <first response line>' or 'ERROR <reason>'. Bounded: 20 s in all.
"""
import os, socket, ssl, sys, time

proxy_port, host, port, cafile, keylog = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
wrong = len(sys.argv) > 6 and sys.argv[6] == "wrong"
deadline = time.monotonic() + 20

raw = socket.create_connection(("127.0.0.1", proxy_port), timeout=20)
raw.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port, host.encode(), port))
head = b""
while b"\r\n\r\n" not in head and len(head) < 8192:
    chunk = raw.recv(1)
    if not chunk: print("ERROR proxy closed"); sys.exit()
    head += chunk
if not head.startswith(b"HTTP/1.1 200"):
    print("ERROR", head.split(b"\r\n")[0].decode()); sys.exit()

ctx = ssl.create_default_context(cafile=cafile)
ctx.minimum_version = ssl.TLSVersion.TLSv1_3
ctx.keylog_filename = keylog
incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
tls = ctx.wrap_bio(incoming, outgoing, server_hostname=host)

def pump():
    """Runs the handshake until done; returns None or an error text."""
    random, answered = None, False
    while time.monotonic() < deadline:
        try:
            tls.do_handshake()
            done = True
        except ssl.SSLWantReadError:
            done = False
        except ssl.SSLError as e:
            return "%s" % (e.reason or e,)
        out = outgoing.read()
        if out:
            # The ClientHello's random: record header 5, handshake header 4, version 2.
            if random is None: random = out[11:43].hex()
            raw.sendall(out)
        if done: return None
        data = raw.recv(65536)
        if not data: return "closed during the handshake"
        if wrong and not answered:
            with open(keylog, "a") as f:
                f.write("SERVER_HANDSHAKE_TRAFFIC_SECRET %s %s\n" % (random, os.urandom(32).hex()))
            time.sleep(0.3)
        answered = True
        incoming.write(data)
    return "timeout"

error = pump()
if error: print("ERROR", error); sys.exit()
tls.write(b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host.encode())
raw.sendall(outgoing.read())
response = b""
while b"\r\n" not in response and time.monotonic() < deadline:
    data = raw.recv(65536)
    if not data: break
    incoming.write(data)
    try:
        response += tls.read(65536)
    except ssl.SSLWantReadError:
        pass
    except ssl.SSLError as e:
        print("ERROR", e.reason or e); sys.exit()
print("OK", response.split(b"\r\n")[0].decode() if response else "(no response)")
