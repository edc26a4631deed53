#!/usr/bin/env python3
"""Real clients through the proxy with Python's urllib and HTTPS_PROXY.

  clients.py get URL CAFILE            one request; prints 'OK <status> <body>' or 'ERROR <reason>'
  clients.py many N URL CAFILE         N requests at once; prints 'OK <n ok> <n failed>'
  clients.py resets N PROXYPORT TARGET  N times: CONNECT TARGET, send a few bytes, half-close, then
                                       reset without reading (SO_LINGER 0); prints 'DONE <n>'
  clients.py stalls N URL CAFILE SECONDS
                                       N stalled tunnels at once (threads); prints 'STALLED <n>'
  clients.py sni PROXYPORT TARGET SNI CAFILE [SEND]
                                       CONNECT TARGET, then TLS with server_hostname=SNI (or, with
                                       SEND=plain, a cleartext GET); prints 'OK <status line>',
                                       'CLOSED' or 'ERROR <reason>'
  clients.py streams PROXYPORT CAFILE SECONDS TARGET...
                                       one tunnel per TARGET (host:port) at once, each a GET whose
                                       body (a 'bulk' upstream's x…x) is read at a pace spread over
                                       SECONDS; prints per tunnel 'TARGET <body bytes> complete' or
                                       'TARGET <body bytes> cut'
  clients.py holds N PROXYPORT TARGET CAFILE [bare]
                                       N tunnels to TARGET (host:port, a 'keepalive' upstream), one
                                       after another: CONNECT, TLS, a GET and its whole response
                                       (with 'bare', the CONNECT's 200 only: no byte in the tunnel);
                                       then prints 'PORT 0 held=<n>' (TestSupport's Helper reads
                                       that line) and holds them open until stdin closes
  clients.py stall URL CAFILE SECONDS  opens the tunnel, sends a GET, reads 1 KiB, then stops
                                       reading for SECONDS; prints 'STALLED <bytes read>'
"""
import socket, time
import ssl, sys, urllib.request, urllib.error
from concurrent.futures import ThreadPoolExecutor

def get(url, cafile):
    ctx = ssl.create_default_context(cafile=cafile)
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=30) as r:
            return "OK %d %s" % (r.status, r.read().decode().strip())
    except urllib.error.URLError as e:
        return "ERROR %s" % (e.reason,)
    except Exception as e:
        return "ERROR %s" % (e,)

def read_head(raw):
    """The proxy's answer to a CONNECT, read one byte at a time so that nothing of the tunnel after
    it is taken; None if the proxy closed before the head was complete."""
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = raw.recv(1)
        if not chunk: return None
        head += chunk
    return head

def stall(url, cafile, seconds):
    import os, urllib.parse
    proxy = urllib.parse.urlparse(os.environ["HTTPS_PROXY"])
    target = urllib.parse.urlparse(url)
    raw = socket.create_connection((proxy.hostname, proxy.port), timeout=30)
    raw.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (target.hostname.encode(), target.port, target.hostname.encode(), target.port))
    head = read_head(raw)
    if head is None:
        return "REFUSED proxy closed"
    if not head.startswith(b"HTTP/1.1 200"):
        return "REFUSED " + head.split(b"\r\n")[0].decode()
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    tls = ssl.create_default_context(cafile=cafile).wrap_socket(raw, server_hostname=target.hostname)
    tls.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    got = len(tls.recv(1024))
    time.sleep(seconds)
    return "STALLED %d" % got

def resets(n, proxy_port, target):
    import struct
    done = 0
    deadline = time.time() + 120
    for _ in range(n):
        if time.time() > deadline: break
        s = socket.create_connection(("127.0.0.1", proxy_port), timeout=10)
        s.sendall(b"CONNECT %s HTTP/1.1\r\n\r\nhello" % target.encode())
        s.shutdown(socket.SHUT_WR)
        time.sleep(0.002)  # long enough for the tunnel to open and the flood to start
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
        done += 1
    print("DONE", done)

def sni(proxy_port, target, name, cafile, send):
    raw = socket.create_connection(("127.0.0.1", proxy_port), timeout=10)
    raw.sendall(b"CONNECT %s HTTP/1.1\r\n\r\n" % target.encode())
    head = read_head(raw)
    if head is None: return "ERROR proxy closed"
    if not head.startswith(b"HTTP/1.1 200"):
        return "ERROR " + head.split(b"\r\n")[0].decode()
    try:
        if send == "plain":
            raw.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % name.encode())
            data = raw.recv(4096)
            return ("OK " + data.split(b"\r\n")[0].decode()) if data else "CLOSED"
        ctx = ssl.create_default_context(cafile=cafile)
        ctx.check_hostname = False   # the point is to send another name; pinproxy must refuse it
        tls = ctx.wrap_socket(raw, server_hostname=name)
        tls.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % name.encode())
        data = b""
        while True:
            chunk = tls.recv(4096)
            if not chunk: break
            data += chunk
        return "OK " + data.decode(errors="replace").split("\r\n\r\n", 1)[-1].strip()
    except (ssl.SSLError, OSError) as e:
        return "CLOSED" if isinstance(e, (ssl.SSLEOFError, ConnectionResetError)) or "EOF" in str(e) else "ERROR %s" % e

def stream(proxy_port, cafile, seconds, target):
    host, port = target.rsplit(":", 1)
    deadline = time.monotonic() + seconds + 20
    # A small receive buffer: the kernel must not take the whole body ahead of the paced reads.
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    raw.settimeout(20)
    raw.connect(("127.0.0.1", proxy_port))
    raw.sendall(b"CONNECT %s HTTP/1.1\r\n\r\n" % target.encode())
    if read_head(raw) is None: return "%s 0 refused" % target
    # A tunnel closed under it (a reload) may end it anywhere, even in the handshake: a cut, not a crash.
    try:
        tls = ssl.create_default_context(cafile=cafile).wrap_socket(raw, server_hostname=host)
        tls.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode())
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = tls.recv(65536)
            if not chunk: return "%s 0 cut" % target
            data += chunk
    except (ssl.SSLError, OSError):
        return "%s 0 cut" % target
    headers, body = data.split(b"\r\n\r\n", 1)
    length = int([l for l in headers.split(b"\r\n") if l.lower().startswith(b"content-length:")][0].split(b":")[1])
    received, intact = len(body), body.count(b"x") == len(body)
    step = max(1, length // 64)  # 64 paced reads over SECONDS
    start = time.monotonic()
    try:
        while received < length and time.monotonic() < deadline:
            due = start + seconds * received / length
            if due > time.monotonic(): time.sleep(due - time.monotonic())
            chunk = tls.recv(min(step, length - received))
            if not chunk: break
            intact = intact and chunk.count(b"x") == len(chunk)
            received += len(chunk)
    except (ssl.SSLError, OSError):
        pass
    return "%s %d %s" % (target, received, "complete" if received == length and intact else "cut")

def hold(proxy_port, target, cafile, bare):
    host, port = target.rsplit(":", 1)
    raw = socket.create_connection(("127.0.0.1", proxy_port), timeout=30)
    raw.sendall(b"CONNECT %s HTTP/1.1\r\n\r\n" % target.encode())
    head = read_head(raw)
    if head is None: raise OSError("closed before the CONNECT's answer")
    if not head.startswith(b"HTTP/1.1 200"): raise OSError(head.split(b"\r\n")[0].decode())
    if bare: return raw
    tls = ssl.create_default_context(cafile=cafile).wrap_socket(raw, server_hostname=host)
    tls.sendall(b"GET / HTTP/1.1\r\nHost: %s\r\n\r\n" % host.encode())
    data = b""
    while not data.partition(b"\r\n\r\n")[2].endswith(b"\n"):  # the body is one line
        chunk = tls.recv(4096)
        if not chunk: raise OSError("closed before the response")
        data += chunk
    return tls

if sys.argv[1] == "holds":
    held, problems = [], []
    deadline = time.monotonic() + 120
    for _ in range(int(sys.argv[2])):
        if time.monotonic() > deadline: break
        try: held.append(hold(int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6:7] == ["bare"]))
        except Exception as e: problems.append(str(e).replace(" ", "_"))
    print("PORT 0 held=%d" % len(held), *(["problem=" + problems[0]] if problems else []), flush=True)
    sys.stdin.read()
    for tls in held: tls.close()
elif sys.argv[1] == "streams":
    targets = sys.argv[5:]
    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        for line in pool.map(lambda t: stream(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), t), targets):
            print(line)
elif sys.argv[1] == "sni":
    print(sni(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6] if len(sys.argv) > 6 else "tls"))
elif sys.argv[1] == "stalls":
    def one(_):
        try: return stall(sys.argv[3], sys.argv[4], float(sys.argv[5]))
        except Exception as e: return "ERROR %s" % e
    n = int(sys.argv[2])
    with ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(one, range(n)))
    print("STALLED", sum(1 for r in results if r.startswith("STALLED")))
    for r in results:
        if not r.startswith("STALLED"): print(r.strip())
elif sys.argv[1] == "resets":
    resets(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4])
elif sys.argv[1] == "get":
    print(get(sys.argv[2], sys.argv[3]))
elif sys.argv[1] == "stall":
    print(stall(sys.argv[2], sys.argv[3], float(sys.argv[4])))
else:
    n = int(sys.argv[2])
    with ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(lambda _: get(sys.argv[3], sys.argv[4]), range(n)))
    ok = sum(1 for r in results if r.startswith("OK 200"))
    print("OK", ok, n - ok)
    for r in results:
        if not r.startswith("OK 200"): print(r)
