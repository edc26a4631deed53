#!/usr/bin/env python3
"""An interceptor that tells pinproxy's mirror from the client's connection AFTER the server's
flight (review of issue 18): connections whose ClientHellos arrive within --pair-ms of each other
form a pair. One of them, chosen at random, is relayed to the GENUINE server at once; the other's
hello is held. pinproxy closes a mirror as soon as it verified the flight (it never sends its
Finished), while it holds the client's tunnel until the mirror decides: so if the first one is
closed by pinproxy within --watch-ms, the held one is the client's and goes to the ROGUE server;
otherwise both go to the genuine one (nothing rogue was ever shown: no catch). A lone hello (the
probe) goes to the genuine server.

  close_watcher.py --genuine PORT --rogue PORT --log FILE [--pair-ms 50] [--watch-ms 1000]

Prints 'PORT <n>'; one JSON line per connection to --log:
  {"index", "decision": "genuine"|"rogue", "role": "alone"|"first"|"held", "first_closed_ms"}
Exits when stdin closes. Loopback only; every wait is bounded.
"""
import argparse, json, socket, sys, threading, time

lock = threading.Lock()
waiting = []  # (arrival, conn, hello, event, slot) of hellos not yet paired
counter = [0]


def read_exact(sock, n, deadline):
    data = b""
    while len(data) < n:
        sock.settimeout(max(0.01, deadline - time.time()))
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise EOFError
        data += chunk
    return data


def read_hello(sock):
    deadline = time.time() + 5
    header = read_exact(sock, 5, deadline)
    length = header[3] << 8 | header[4]
    return header + read_exact(sock, length, deadline)


def pump(src, dst):
    try:
        src.settimeout(30)
        while True:
            data = src.recv(65536)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    for s in (dst,):
        try:
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass


def relay(conn, hello, port, on_client_eof=None):
    up = socket.create_connection(("127.0.0.1", port), timeout=5)
    up.sendall(hello)
    threading.Thread(target=pump, args=(up, conn), daemon=True).start()

    def client_side():
        pump(conn, up)
        if on_client_eof:
            on_client_eof()
    threading.Thread(target=client_side, daemon=True).start()


def log(args, **entry):
    with lock:
        counter[0] += 1
        entry["index"] = counter[0]
        with open(args.log, "a") as f:
            f.write(json.dumps(entry) + "\n")


def handle(conn, args):
    try:
        hello = read_hello(conn)
    except (OSError, EOFError):
        conn.close()
        return
    now = time.time()
    with lock:
        partner = next((w for w in waiting if now - w[0] <= args.pair_ms / 1000), None)
        if partner:
            waiting.remove(partner)
        else:
            mine = [now, conn, hello, threading.Event(), {}]
            waiting.append(mine)
    if partner is None:
        # Wait for a partner; alone after the window: the probe (or a lone connection).
        mine[3].wait(args.pair_ms / 1000 * 2)
        with lock:
            if mine in waiting:
                waiting.remove(mine)
                alone = True
            else:
                alone = False
        if alone:
            log(args, decision="genuine", role="alone")
            relay(conn, hello, args.genuine)
        return
    partner[3].set()
    # Two look-alike connections: the first goes to the genuine server, the other is held.
    pair = [(partner[1], partner[2]), (conn, hello)]
    import random
    random.shuffle(pair)
    (first, first_hello), (held, held_hello) = pair
    closed = threading.Event()
    start = time.time()
    relay(first, first_hello, args.genuine, on_client_eof=closed.set)
    log(args, decision="genuine", role="first")
    if closed.wait(args.watch_ms / 1000):
        log(args, decision="rogue", role="held", first_closed_ms=round((time.time() - start) * 1000, 2))
        relay(held, held_hello, args.rogue)
    else:
        log(args, decision="genuine", role="held", first_closed_ms=None)
        relay(held, held_hello, args.genuine)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--genuine", type=int, required=True)
    p.add_argument("--rogue", type=int, required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--pair-ms", type=float, default=50)
    p.add_argument("--watch-ms", type=float, default=1000)
    args = p.parse_args()
    server = socket.socket()
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind(("127.0.0.1", 0))
    server.listen(64)
    print("PORT %d" % server.getsockname()[1], flush=True)

    def accept():
        while True:
            conn, _ = server.accept()
            threading.Thread(target=handle, args=(conn, args), daemon=True).start()
    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()


if __name__ == "__main__":
    main()
