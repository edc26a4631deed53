#!/usr/bin/env python3
"""Clients for the fast relay's end-to-end tests: plain TCP through a CONNECT tunnel (unpinned), so
the stream check is done with both sides after the first bytes and the fast relay carries the rest.

  relay.py echo PROXYPORT TARGET BYTES       sends BYTES of random data to an `echo` upstream while
                                             reading the echo, half-closes, reads to EOF; prints
                                             'OK <bytes back>' when the echo is byte-exact
  relay.py talkfirst PROXYPORT TARGET BYTES  sends one byte; reads the `talkfirst` upstream's BYTES and
                                             its EOF, checks them, then sends BYTES and half-closes;
                                             prints 'OK <bytes read>'
  relay.py listenfirst PROXYPORT TARGET BYTES as talkfirst with a `greetfirst` upstream, without the
                                             byte: its first bytes come after the upstream's EOF, and
                                             it starts reading only after a pause (the upstream's
                                             bytes meet a full socket and backpressure in the proxy)
  relay.py resetmid PROXYPORT TARGET BYTES   sends a few bytes to a `flood` upstream, reads BYTES of
                                             the flood, then resets (SO_LINGER 0); prints 'RESET <bytes read>'
"""
import hashlib, random, socket, struct, sys, threading, time

def tunnel(proxy_port, target):
    s = socket.create_connection(("127.0.0.1", proxy_port), timeout=30)
    s.sendall(b"CONNECT %s HTTP/1.1\r\n\r\n" % target.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = s.recv(1)
        if not chunk: raise SystemExit("ERROR proxy closed")
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"): raise SystemExit("ERROR " + head.split(b"\r\n")[0].decode())
    return s

def read_all(s, limit):
    got, digest = 0, hashlib.sha256()
    while got < limit:
        chunk = s.recv(262144)
        if not chunk: break
        got += len(chunk); digest.update(chunk)
    return got, digest.hexdigest()

def echo(proxy_port, target, n):
    s = tunnel(proxy_port, target)
    data = random.Random(1).randbytes(n)
    def send():
        view = memoryview(data)
        for i in range(0, n, 262144): s.sendall(view[i:i + 262144])
        s.shutdown(socket.SHUT_WR)
    writer = threading.Thread(target=send); writer.start()
    got, digest = read_all(s, n + 1)
    writer.join(60)
    if got == n and digest == hashlib.sha256(data).hexdigest(): return "OK %d" % got
    return "MISMATCH %d of %d" % (got, n)

def talkfirst(proxy_port, target, n, greeting=b"h"):
    s = tunnel(proxy_port, target)
    if greeting: s.sendall(greeting)
    else: time.sleep(0.5)  # a load, not a wait: the checks below hold however the bytes arrive
    got, digest = read_all(s, n + 1)  # to the upstream's EOF
    if got != n or digest != hashlib.sha256(random.Random(2).randbytes(n)).hexdigest(): return "MISMATCH %d of %d" % (got, n)
    s.sendall(random.Random(3).randbytes(n))  # the other direction still carries bytes
    s.shutdown(socket.SHUT_WR)
    s.settimeout(30)
    if s.recv(1) != b"": return "ERROR more bytes after EOF"
    return "OK %d" % got

def resetmid(proxy_port, target, n):
    s = tunnel(proxy_port, target)
    s.sendall(b"go")
    got = 0
    deadline = time.time() + 30
    while got < n and time.time() < deadline:
        chunk = s.recv(min(262144, n - got))
        if not chunk: break
        got += len(chunk)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    s.close()
    return "RESET %d" % got

def listenfirst(proxy_port, target, n): return talkfirst(proxy_port, target, n, greeting=None)

print({"echo": echo, "talkfirst": talkfirst, "listenfirst": listenfirst, "resetmid": resetmid}[sys.argv[1]](int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
