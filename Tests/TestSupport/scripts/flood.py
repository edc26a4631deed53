#!/usr/bin/env python3
"""Abuse from one local process, bounded in time and count: connections that never speak.

    flood.py silent PORT SECONDS HOLD RATE [FIRST [SOURCE]]

    flood.py keepalive PORT TARGET_PORT COUNT SECONDS

    flood.py fill PORT SECONDS CAP [SOURCE]

Plain HTTP through the proxy at PORT: COUNT connections, each a `GET http://127.0.0.1:TARGET_PORT/hello`
answered in full and then kept open and idle for SECONDS. Prints `KEPT <n>`.

`fill`: opens connections to 127.0.0.1:PORT (from SOURCE, a loopback address, when given; `127.0.2.*`
takes 127.0.2.1 to 127.0.2.254 in turn, so the kernel never runs short of ports) as fast
as it can, never sending or reading a byte and never closing one, until it holds CAP or SECONDS
have passed; then holds them until SECONDS have passed. A connect the kernel refuses (out of ports
or descriptors) is counted and tried again 1 ms later. Prints `HOLDING <CAP>` when it holds CAP,
and `OPENED <n> FAILED <n> SECONDS_TO_FILL <s>` at the end.

`silent`: opens connections to 127.0.0.1:PORT for SECONDS or until SIGTERM, RATE a second (0: as fast as it
can), never reading and never sending a byte — or only FIRST (hex, e.g. 16 for a TLS record's first
byte) — holding at most HOLD at once (past that the oldest is closed, so the pressure goes on),
from SOURCE when given (as for `fill`).
Prints `HOLDING <HOLD>` once it first holds HOLD, and `OPENED <n> FAILED <n>` at the end (with
` STOPPED` when SIGTERM ended it).
Loopback only.
"""
import collections, errno, resource, signal, socket, sys, time

stopped = False
def stop(signum, frame):
    global stopped
    stopped = True

def silent(port, seconds, hold, rate, first=b"", source=None):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, hold + 64)), hard))
    held = collections.deque()
    opened = failed = 0
    start = time.monotonic()
    deadline = start + seconds
    signal.signal(signal.SIGTERM, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # the test runner's threads block it, and we inherit that
    said_holding = False
    sources = sources_of(source)
    while not stopped and time.monotonic() < deadline and opened < 2_000_000:
        if rate and opened > rate * (time.monotonic() - start):
            time.sleep(0.002)
            continue
        if len(held) >= hold:
            if not said_holding:
                print("HOLDING %d" % hold, flush=True)
                said_holding = True
            held.popleft().close()
        s = connecting(port, sources[opened % len(sources)])
        if s is not None:
            if first:
                try: s.send(first)
                except OSError: pass  # not connected yet: it stays silent
            held.append(s)
            opened += 1
        else:  # out of descriptors or ports of its own: counted, tried again when some are closed
            failed += 1
            time.sleep(0.001)
    for s in held:
        s.close()
    print("OPENED %d FAILED %d%s" % (opened, failed, " STOPPED" if stopped else ""), flush=True)

def sources_of(source):
    """`127.0.2.*`: 127.0.2.1 to 127.0.2.254 in turn; an address: that one; None: the kernel's choice."""
    if source and source.endswith("*"):
        return ["%s%d" % (source[:-1], n) for n in range(1, 255)]
    return [source]

def connecting(port, source):
    """A non-blocking connection to 127.0.0.1:PORT under way (from SOURCE when given), or None when
    the kernel refused one (out of descriptors or ports)."""
    try:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    except OSError:
        return None
    try:
        if source:
            # IP_BIND_ADDRESS_NO_PORT: the port is chosen at connect, by the whole 4-tuple; a bind
            # to port 0 would search the range for a port no socket holds, slower as the flood grows.
            s.setsockopt(socket.SOL_IP, 24, 1)
            s.bind((source, 0))
        s.setblocking(False)
        if s.connect_ex(("127.0.0.1", port)) in (0, errno.EINPROGRESS):
            return s
    except OSError:
        pass
    s.close()
    return None

def fill(port, seconds, cap, source=None):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, cap + 64)), hard))
    signal.signal(signal.SIGTERM, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    held = []
    failed = 0
    start = time.monotonic()
    deadline = start + seconds
    filled = None
    sources = sources_of(source)
    turn = 0
    while not stopped and time.monotonic() < deadline:
        if len(held) >= cap:
            if filled is None:
                filled = time.monotonic() - start
                print("HOLDING %d" % cap, flush=True)
            time.sleep(0.05)
            continue
        s = connecting(port, sources[turn % len(sources)])
        turn += 1
        if s is not None:
            held.append(s)
        else:
            failed += 1
            time.sleep(0.001)
    opened = len(held)
    for s in held:
        s.close()
    print("OPENED %d FAILED %d SECONDS_TO_FILL %s" % (opened, failed, "%.2f" % filled if filled is not None else "-"), flush=True)

def keepalive(port, target, count, seconds):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, count + 64)), hard))
    kept = []
    request = b"GET http://127.0.0.1:%d/hello HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n" % (target, target)
    deadline = time.monotonic() + seconds + 60
    for _ in range(count):
        if time.monotonic() > deadline: break
        try:
            s = socket.create_connection(("127.0.0.1", port), timeout=5)
            s.sendall(request)
            data = b""
            while b"hello plain" not in data:
                chunk = s.recv(4096)
                if not chunk: raise OSError("closed")
                data += chunk
            kept.append(s)
        except OSError:
            pass
    print("KEPT %d" % len(kept), flush=True)
    time.sleep(seconds)
    for s in kept: s.close()

if __name__ == "__main__":
    if sys.argv[1] == "keepalive":
        keepalive(int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]))
    elif sys.argv[1] == "fill":
        fill(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else None)
    elif sys.argv[1] == "silent":
        silent(int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), bytes.fromhex(sys.argv[6]) if len(sys.argv) > 6 else b"",
               sys.argv[7] if len(sys.argv) > 7 else None)
