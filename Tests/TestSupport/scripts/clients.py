#!/usr/bin/env python3
"""Real clients through the proxy with Python's urllib and HTTPS_PROXY.

  clients.py get URL CAFILE            one request; prints 'OK <status> <body>' or 'ERROR <reason>'
  clients.py many N URL CAFILE         N requests at once; prints 'OK <n ok> <n failed>'
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

def stall(url, cafile, seconds):
    import os, urllib.parse
    proxy = urllib.parse.urlparse(os.environ["HTTPS_PROXY"])
    target = urllib.parse.urlparse(url)
    raw = socket.create_connection((proxy.hostname, proxy.port), timeout=30)
    raw.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (target.hostname.encode(), target.port, target.hostname.encode(), target.port))
    head = b""
    while b"\r\n\r\n" not in head:
        head += raw.recv(1)
    if not head.startswith(b"HTTP/1.1 200"):
        print("REFUSED", head.split(b"\r\n")[0].decode()); return
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
    tls = ssl.create_default_context(cafile=cafile).wrap_socket(raw, server_hostname=target.hostname)
    tls.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    got = len(tls.recv(1024))
    time.sleep(seconds)
    print("STALLED", got)

if sys.argv[1] == "get":
    print(get(sys.argv[2], sys.argv[3]))
elif sys.argv[1] == "stall":
    stall(sys.argv[2], sys.argv[3], float(sys.argv[4]))
else:
    n = int(sys.argv[2])
    with ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(lambda _: get(sys.argv[3], sys.argv[4]), range(n)))
    ok = sum(1 for r in results if r.startswith("OK 200"))
    print("OK", ok, n - ok)
    for r in results:
        if not r.startswith("OK 200"): print(r)
