#!/usr/bin/env python3
"""A tiny DNS server on 127.0.0.1 for tests: answers A queries for one name with a sequence of
addresses (the first query gets the first, every later one the last) and NXDOMAIN for anything
else. Prints 'PORT <n>'; stops when stdin closes. Reports each query on stdout as 'QUERY <name>'."""
import socket, struct, sys, threading, os

name = sys.argv[1].lower().rstrip(".")
answers = sys.argv[2:]
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("127.0.0.1", 0))
print("PORT", s.getsockname()[1], flush=True)
count = [0]

def qname(data, off):
    labels = []
    while data[off]:
        n = data[off]; labels.append(data[off + 1:off + 1 + n].decode()); off += n + 1
    return ".".join(labels).lower(), off + 1

def serve():
    while True:
        data, peer = s.recvfrom(512)
        tid, flags, qd = struct.unpack(">HHH", data[:6])
        q, end = qname(data, 12)
        qtype = struct.unpack(">H", data[end:end + 2])[0]
        question = data[12:end + 4]
        print("QUERY", q, qtype, flush=True)
        if q != name:
            s.sendto(struct.pack(">HHHHHH", tid, 0x8183, 1, 0, 0, 0) + question, peer); continue
        if qtype != 1:
            s.sendto(struct.pack(">HHHHHH", tid, 0x8180, 1, 0, 0, 0) + question, peer); continue
        addr = answers[min(count[0], len(answers) - 1)]; count[0] += 1
        rr = b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 0, 4) + socket.inet_aton(addr)
        s.sendto(struct.pack(">HHHHHH", tid, 0x8180, 1, 1, 0, 0) + question + rr, peer)

threading.Thread(target=serve, daemon=True).start()
sys.stdin.read()
os._exit(0)
