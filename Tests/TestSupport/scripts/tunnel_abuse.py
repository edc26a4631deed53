#!/usr/bin/env python3
"""Abuse of pinned tunnels by one local client, bounded in count and time (loopback only).

    tunnel_abuse.py idle PROXY TARGET COUNT SECONDS
        COUNT CONNECTs to TARGET (host:port), each read up to its answer's head and then left idle:
        never a byte of TLS. Prints `ANSWERED <n> STATUS <status>:<n>,...` once every CONNECT has its
        answer, then waits (at most SECONDS) until the proxy has closed every tunnel that got a 200
        and prints `CLOSED <n> OF <n> LAST_MS <ms since the last 200>`.

    tunnel_abuse.py flood PROXY TARGET SECONDS HOLD
        CONNECTs to TARGET as fast as one process makes them, each left idle after its answer, holding
        at most HOLD (past that the oldest is closed), for SECONDS or until SIGTERM. Prints `FLOODING`
        once it has made 100, and `CONNECTS <n> STATUS <status>:<n>,...` at the end.

    tunnel_abuse.py replay PROXY TARGET SNI
        Makes one TLS 1.3 ClientHello for SNI (Python's ssl, no handshake completed), sends it in a
        first tunnel and reads until the server's first bytes come through (10 s at most), then sends
        the very same bytes in a second tunnel. Prints `FIRST <bytes>` and `SECOND <bytes> <end>`,
        where end is `closed` (the proxy closed it), `reset` or `open` (still open after 10 s).

    tunnel_abuse.py replayflood PROXY TARGET SNI SECONDS
        One ClientHello made once, sent in one tunnel after another for SECONDS, each read until the
        first bytes come back or the proxy closes it (2 s at most). Prints `REPLAYS <tunnels>` (a benchmark's load).

    tunnel_abuse.py silent-after-hello PROXY TARGET SNI SECONDS
        Sends one ClientHello in a tunnel, then nothing more (not the second hello a
        HelloRetryRequest asks for), reading what comes for at most SECONDS. Prints
        `READ <bytes> <end>`.

    tunnel_abuse.py hangup PROXY TARGET SNI after-hello|mid-hello
        A tunnel whose client leaves: after sending its whole ClientHello (a shutdown of its write
        half, then it reads what comes until the close), or halfway through it (a close). Prints
        `LEFT <bytes read after leaving>`.

PROXY is the proxy's port on 127.0.0.1.
"""
import collections, signal, socket, ssl, sys, time

stopped = False


def stop(signum, frame):
    global stopped
    stopped = True


def connect(proxy, target, timeout=10):
    """A CONNECT to target; returns (socket, status) with the answer's head read."""
    s = socket.create_connection(("127.0.0.1", proxy), timeout=timeout)
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (target.encode(), target.encode()))
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 8192:
        chunk = s.recv(1)  # one byte at a time: nothing after the head is taken from the tunnel
        if not chunk:
            break
        head += chunk
    parts = head.split(b" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    return s, status


def hello_for(sni):
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.minimum_version = ssl.TLSVersion.TLSv1_3
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname=sni)
    try:
        tls.do_handshake()
    except ssl.SSLWantReadError:
        pass
    return outgoing.read()


def read_until_end(s, seconds):
    """Bytes read until the peer closes (`closed`), resets (`reset`), or `seconds` pass (`open`)."""
    got = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        s.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return got, "reset"
        if not chunk:
            return got, "closed"
        got += len(chunk)
    return got, "open"


def statuses(counter):
    return ",".join("%d:%d" % item for item in sorted(counter.items()))


def idle(proxy, target, count, seconds):
    held, answers = [], collections.Counter()
    for _ in range(count):
        s, status = connect(proxy, target)
        answers[status] += 1
        if status == 200:
            held.append(s)
        else:
            s.close()
    last = time.monotonic()
    print("ANSWERED %d STATUS %s" % (count, statuses(answers)), flush=True)
    closed = 0
    deadline = last + seconds
    for s in held:
        _, end = read_until_end(s, max(0.0, deadline - time.monotonic()))
        if end != "open":
            closed += 1
        s.close()
    print("CLOSED %d OF %d LAST_MS %d" % (closed, len(held), (time.monotonic() - last) * 1000), flush=True)


def flood(proxy, target, seconds, hold):
    signal.signal(signal.SIGTERM, stop)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})  # the test runner's threads block it
    held, answers = collections.deque(), collections.Counter()
    made = 0
    deadline = time.monotonic() + seconds
    while not stopped and time.monotonic() < deadline and made < 1_000_000:
        try:
            s, status = connect(proxy, target, timeout=5)
        except OSError:
            answers[0] += 1
            time.sleep(0.001)
            continue
        made += 1
        answers[status] += 1
        if made == 100:
            print("FLOODING", flush=True)
        held.append(s)
        if len(held) > hold:
            held.popleft().close()
    for s in held:
        s.close()
    print("CONNECTS %d STATUS %s" % (made, statuses(answers)), flush=True)


def replay(proxy, target, sni):
    hello = hello_for(sni)
    first, status = connect(proxy, target)
    assert status == 200, status
    first.sendall(hello)
    first.settimeout(10)
    got = first.recv(65536)
    print("FIRST %d" % len(got), flush=True)
    first.close()
    second, status = connect(proxy, target)
    assert status == 200, status
    second.sendall(hello)
    got, end = read_until_end(second, 10)
    print("SECOND %d %s" % (got, end), flush=True)
    second.close()


def replayflood(proxy, target, sni, seconds):
    hello = hello_for(sni)
    made = 0
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and made < 1_000_000:
        try:
            s, status = connect(proxy, target, timeout=5)
        except OSError:
            continue
        made += 1
        if status == 200:
            try:
                s.sendall(hello)
                s.settimeout(2)
                s.recv(65536)  # the server's first bytes (or the proxy's close): then the next
            except OSError:
                pass
        s.close()
    print("REPLAYS %d" % made, flush=True)


def silent_after_hello(proxy, target, sni, seconds):
    hello = hello_for(sni)
    s, status = connect(proxy, target)
    assert status == 200, status
    s.sendall(hello)
    got, end = read_until_end(s, seconds)
    s.close()
    print("READ %d %s" % (got, end), flush=True)


def hangup(proxy, target, sni, mode):
    hello = hello_for(sni)
    s, status = connect(proxy, target)
    assert status == 200, status
    if mode == "mid-hello":
        s.sendall(hello[: len(hello) // 2])
        time.sleep(0.2)  # the half is read before the close
        s.close()
        print("LEFT 0", flush=True)
        return
    s.sendall(hello)
    s.shutdown(socket.SHUT_WR)
    got, _ = read_until_end(s, 10)
    s.close()
    print("LEFT %d" % got, flush=True)


command = sys.argv[1]
if command == "idle":
    idle(int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5]))
elif command == "flood":
    flood(int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
elif command == "replay":
    replay(int(sys.argv[2]), sys.argv[3], sys.argv[4])
elif command == "replayflood":
    replayflood(int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]))
elif command == "silent-after-hello":
    silent_after_hello(int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5]))
elif command == "hangup":
    hangup(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5])
else:
    sys.exit("usage: see the docstring")
