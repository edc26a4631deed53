#!/usr/bin/env python3
"""A parent HTTP proxy that tells pinproxy's mirror from the client's tunnel by WHEN each connect
completes (review of issue 18). pinproxy starts the tunnel's and the mirror's connects together,
but writes its `200` to the client only once the tunnel's connect completed, and the mirror's hello
waits for the client's. So: of two CONNECTs that arrive within --pair-ms, answer one (at random)
at once and hold the other. A ClientHello on the answered one within --watch-ms means it is the
client's tunnel (its 200 reached the client): it goes to the ROGUE server, then the held one is
answered and goes to the GENUINE server (the mirror sees the genuine chain: nothing to catch).
Silence means the answered one is the mirror (it waits for the client, which waits for the held
tunnel): it goes to the GENUINE server, and the held one, answered now, to the ROGUE one. A lone CONNECT (the probe)
goes to the genuine server. An on-path attacker gets the same oracle by delaying a SYN-ACK.

  connect_oracle.py --genuine PORT --rogue PORT --log FILE [--pair-ms 50] [--watch-ms 500]

Prints 'PORT <n>'; one JSON line per CONNECT: {"index", "role": "alone"|"answered"|"held", "to"}.
Exits when stdin closes. Loopback only; every wait is bounded.
"""
import argparse, json, random, socket, sys, threading, time

lock = threading.Lock()
waiting = []
counter = [0]


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
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def relay(conn, port, first=b""):
    up = socket.create_connection(("127.0.0.1", port), timeout=5)
    if first:
        up.sendall(first)
    threading.Thread(target=pump, args=(up, conn), daemon=True).start()
    threading.Thread(target=pump, args=(conn, up), daemon=True).start()


def log(args, **entry):
    with lock:
        counter[0] += 1
        entry["index"] = counter[0]
        with open(args.log, "a") as f:
            f.write(json.dumps(entry) + "\n")


def established(conn):
    conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")


def handle(conn, args):
    conn.settimeout(10)
    head = b""
    try:
        while b"\r\n\r\n" not in head and len(head) < 65536:
            chunk = conn.recv(4096)
            if not chunk:
                return conn.close()
            head += chunk
    except OSError:
        return conn.close()
    now = time.time()
    with lock:
        partner = next((w for w in waiting if now - w[0] <= args.pair_ms / 1000), None)
        if partner:
            waiting.remove(partner)
        else:
            mine = [now, conn, threading.Event()]
            waiting.append(mine)
    if partner is None:
        mine[2].wait(args.pair_ms / 1000 * 2)
        with lock:
            alone = mine in waiting
            if alone:
                waiting.remove(mine)
        if alone:
            log(args, role="alone", to="genuine")
            established(conn)
            relay(conn, args.genuine)
        return
    partner[2].set()
    pair = [partner[1], conn]
    random.shuffle(pair)
    answered, held = pair
    established(answered)
    answered.settimeout(args.watch_ms / 1000)
    try:
        hello = answered.recv(65536)
    except socket.timeout:
        hello = None
    except OSError:
        hello = b""
    if hello:  # the client's hello: this is the tunnel
        log(args, role="answered", to="rogue")
        relay(answered, args.rogue, hello)
        established(held)
        log(args, role="held", to="genuine")
        relay(held, args.genuine)
    else:  # silence: the mirror, waiting for the client's hello; the held one is the tunnel
        log(args, role="answered", to="genuine")
        relay(answered, args.genuine)
        established(held)
        log(args, role="held", to="rogue")
        relay(held, args.rogue)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--genuine", type=int, required=True)
    p.add_argument("--rogue", type=int, required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--pair-ms", type=float, default=50)
    p.add_argument("--watch-ms", type=float, default=500)
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
