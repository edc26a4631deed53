#!/usr/bin/env python3
"""A transparent TCP relay to --genuine that notes, per connection, when the client's SECOND
ClientHello (the answer to a HelloRetryRequest) arrived and whether the client later sent an
encrypted record (the tunnel does, its Finished; pinproxy's mirror never does). One thread, one
selector, so arrival order is the order the kernel had the bytes ready (review of issue 18).

  retry_order.py --genuine PORT --log FILE

Prints 'PORT <n>'. Each line on stdin starts a round (the line is its name): a connection belongs to
the round in force when it was accepted. Each connection that ends appends one JSON line:
  {"round", "second_hello_ns", "encrypted": bool}
Exits when stdin closes (checked every 0.1 s). Loopback only.
"""
import argparse, json, os, selectors, socket, sys, time

p = argparse.ArgumentParser()
p.add_argument("--genuine", type=int, required=True); p.add_argument("--log", required=True)
a = p.parse_args()
server = socket.socket(); server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", 0)); server.listen(64); server.setblocking(False)
print("PORT %d" % server.getsockname()[1], flush=True)
sel = selectors.DefaultSelector()
sel.register(server, selectors.EVENT_READ, ("accept", None))
sel.register(sys.stdin, selectors.EVENT_READ, ("stdin", None))
current_round, pending = None, b""


class Conn:
    def __init__(self, client):
        self.round = current_round
        self.client, self.up = client, socket.create_connection(("127.0.0.1", a.genuine), timeout=5)
        self.client.setblocking(False); self.up.setblocking(False)
        self.buffer, self.handshakes, self.second, self.encrypted, self.closed = b"", 0, None, False, False

    def client_bytes(self, data):
        self.buffer += data
        while len(self.buffer) >= 5:
            length = self.buffer[3] << 8 | self.buffer[4]
            if len(self.buffer) < 5 + length:
                break
            kind = self.buffer[0]
            self.buffer = self.buffer[5 + length:]
            if kind == 22:
                self.handshakes += 1
                if self.handshakes == 2 and self.second is None:
                    self.second = time.monotonic_ns()
            elif kind == 23:
                self.encrypted = True

    def end(self):
        if self.closed:
            return
        self.closed = True
        for s in (self.client, self.up):
            try: sel.unregister(s)
            except (KeyError, ValueError): pass
            s.close()
        with open(a.log, "a") as f:
            f.write(json.dumps({"round": self.round, "second_hello_ns": self.second, "encrypted": self.encrypted}) + "\n")


deadline = time.time() + 600
while time.time() < deadline:
    # stdin first: the test writes a round's line before its client connects, so a connection
    # accepted in this turn is never counted in the round before.
    for key, _ in sorted(sel.select(0.1), key=lambda ready: ready[0].data[0] != "stdin"):
        role, conn = key.data
        if role == "stdin":
            data = sys.stdin.buffer.raw.read(4096)
            if not data:
                sys.exit(0)
            pending += data
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                current_round = line.decode()
            continue
        if role == "accept":
            client, _ = server.accept()
            c = Conn(client)
            sel.register(c.client, selectors.EVENT_READ, ("client", c))
            sel.register(c.up, selectors.EVENT_READ, ("up", c))
            continue
        source = conn.client if role == "client" else conn.up
        try:
            data = source.recv(65536)
        except OSError:
            data = b""
        if not data:
            conn.end(); continue
        if role == "client":
            conn.client_bytes(data)
            target = conn.up
        else:
            target = conn.client
        try:
            target.setblocking(True); target.sendall(data); target.setblocking(False)
        except OSError:
            conn.end()
