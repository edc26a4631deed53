#!/usr/bin/env python3
"""A relay on 127.0.0.1 that refuses TLS 1.3 resumptions, the way pinproxy would refuse an unverified
one (issue 18 item 5): it forwards the client's ClientHello to the server, reads the server's
ServerHello, and when that ServerHello accepts a PSK (carries the pre_shared_key extension) it cuts
the client's connection before the client has a byte of it; every other connection is relayed.

  resumption_cut.py --server PORT|HOST:PORT --log FILE [--cut rst|close|none] [--port 0] [--until-stdin-closes]

  rst    closes the client's connection with a reset (SO_LINGER 0)
  close  closes it with a FIN, as a proxy that closes a refused tunnel does
  none   cuts nothing: to see whether and when a client resumes

Prints 'PORT <n>' once listening. One JSON line per connection in --log:
  {"index", "psk_offered", "psk_accepted", "action": "relayed"|"cut"|"dropped", "reason"}
"""
import argparse, json, os, signal, socket, struct, sys, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from interceptor import Dropped, Hello, Reader, address, read_hello, relay  # noqa: E402

HRR_RANDOM = bytes.fromhex("cf21ad74e59a6111be1d8c021e65b891c2a211167abb8c5e079e09e2c8a8339c")


def read_server_hello(sock, deadline):
    """The server's bytes up to the end of its first handshake message, and that message's body."""
    raw = b""
    while True:
        if len(raw) >= 5:
            length = int.from_bytes(raw[3:5], "big")
            if raw[0] != 22: raise Dropped("server sent no handshake")
            if len(raw) >= 5 + length:
                message = raw[5:5 + length]
                if len(message) < 4 or message[0] != 2: raise Dropped("no ServerHello")
                size = int.from_bytes(message[1:4], "big")
                if 4 + size > len(message): raise Dropped("ServerHello across records")
                return raw, message[4:4 + size]
        left = deadline - time.monotonic()
        if left <= 0: raise Dropped("server timeout")
        sock.settimeout(left)
        chunk = sock.recv(65536)
        if not chunk: raise Dropped("server closed")
        raw += chunk


def accepts_psk(body):
    r = Reader(body)
    r.take(2)
    random = r.take(32)
    r.vector(1); r.take(3)
    if random == HRR_RANDOM or r.left() == 0: return False
    extensions = Reader(r.vector(2))
    while extensions.left() > 0:
        kind = struct.unpack("!H", extensions.take(2))[0]
        extensions.vector(2)
        if kind == 41: return True
    return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True); p.add_argument("--log", required=True)
    p.add_argument("--cut", choices=["rst", "close", "none"], default="rst")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--until-stdin-closes", action="store_true")
    a = p.parse_args()
    for sig in (signal.SIGTERM, signal.SIGINT): signal.signal(sig, lambda *_: os._exit(0))
    if a.until_stdin_closes:
        threading.Thread(target=lambda: (sys.stdin.read(), os._exit(0)), daemon=True).start()
    log, lock = open(a.log, "a", buffering=1), threading.Lock()
    count = [0]

    def handle(client, entry):
        server = None
        try:
            try:
                raw, body = read_hello(client, time.monotonic() + 10)
                entry["psk_offered"] = Hello(body).psk
                server = socket.create_connection(address(a.server), timeout=10)
                server.sendall(raw)
                answer, server_hello = read_server_hello(server, time.monotonic() + 10)
                entry["psk_accepted"] = accepts_psk(server_hello)
            except (Dropped, OSError, ValueError) as e:
                entry.update(action="dropped", reason=str(e))
                return
            if entry["psk_accepted"] and a.cut != "none":
                if a.cut == "rst": client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                entry["action"] = "cut"
                return
            entry["action"] = "relayed"
            client.settimeout(10)
            client.sendall(answer)
            with lock: log.write(json.dumps(entry) + "\n")
            entry = None
            relay(client, server)
        finally:
            if entry is not None:
                with lock: log.write(json.dumps(entry) + "\n")
            for s in (client, server):
                if s is not None:
                    try: s.close()
                    except OSError: pass

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", a.port)); listener.listen(128)
    print("PORT", listener.getsockname()[1], flush=True)
    while True:
        client, _ = listener.accept()
        count[0] += 1
        threading.Thread(target=handle, args=(client, {"index": count[0]}), daemon=True).start()


if __name__ == "__main__":
    main()
