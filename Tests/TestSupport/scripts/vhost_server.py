#!/usr/bin/env python3
"""A GENUINE HTTPS server on 127.0.0.1 with the behaviours of ordinary virtual-host setups that a
client's own hello can select (ManufacturedIncidentTests): several certificates on one context,
certificates chosen by SNI (compared exactly, case and all, as some servers do), a challenge
certificate for ALPN `acme-tls/1` (RFC 8737), and a fatal `no_application_protocol` alert for a
hello whose ALPN offers none of the server's protocols. Threaded; answers any HTTP request with
'hello from <name>'. Prints 'PORT <n>' once listening and serves until stdin closes.

  vhost_server.py --cert CHAIN:KEY [--cert CHAIN:KEY]...   the default context's certificates (two of
                                                           different key types: a dual-certificate server,
                                                           OpenSSL picks by the client's signature algorithms)
                  [--vhost NAME=CHAIN:KEY]...              a hello whose SNI is exactly NAME (bytes) gets this one
                  [--acme CHAIN:KEY]                       a hello offering ALPN acme-tls/1 gets this one
                  [--alpn P1,P2]                           the protocols spoken; a hello offering ALPN with none
                                                           of them gets the alert (as OpenSSL's s_server -alpn,
                                                           nginx, Go's crypto/tls and node do)
                  [--tls 1.2|1.3|any] [--name NAME] [--log FILE]

--log: one JSON line per connection: {"sni", "alpn", "served": "default"|"vhost:NAME"|"acme"|"alert"|"dropped"}.
The hello is read with MSG_PEEK (bounded in size and time) before the TLS library sees it.
"""
import argparse, json, signal, socket, ssl, struct, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("--cert", action="append", required=True)
p.add_argument("--vhost", action="append", default=[])
p.add_argument("--acme")
p.add_argument("--alpn", default="")
p.add_argument("--tls", choices=["1.2", "1.3", "any"], default="any")
p.add_argument("--name", default="vhost")
p.add_argument("--log")
a = p.parse_args()

MAX_HELLO = 16384 + 5
HELLO_SECONDS = 10
spoken = [x for x in a.alpn.split(",") if x]


def context(pairs, alpn):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    for pair in pairs:
        chain, key = pair.split(":", 1)
        ctx.load_cert_chain(chain, key)
    if a.tls == "1.2": ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    if a.tls == "1.3": ctx.minimum_version = ssl.TLSVersion.TLSv1_3
    if alpn: ctx.set_alpn_protocols(alpn)
    return ctx


default = context(a.cert, spoken)
vhosts = {}
for entry in a.vhost:
    name, pair = entry.split("=", 1)
    vhosts[name.encode("ascii")] = context([pair], spoken)
acme = context([a.acme], ["acme-tls/1"]) if a.acme else None
log_lock = threading.Lock()


def log(entry):
    if not a.log: return
    with log_lock, open(a.log, "a") as f:
        f.write(json.dumps(entry) + "\n")


def peek_hello(raw):
    """The first record's ClientHello body (peeked, not consumed), or None."""
    deadline = time.monotonic() + HELLO_SECONDS
    data = b""
    while time.monotonic() < deadline:
        raw.settimeout(max(0.01, deadline - time.monotonic()))
        data = raw.recv(MAX_HELLO, socket.MSG_PEEK)
        if not data: return None
        if len(data) >= 5:
            if data[0] != 22: return None
            need = 5 + int.from_bytes(data[3:5], "big")
            if len(data) >= need or len(data) >= MAX_HELLO: break
        time.sleep(0.005)
    record = data[5:5 + int.from_bytes(data[3:5], "big")] if len(data) >= 5 else b""
    if len(record) < 4 or record[0] != 1: return None
    return record[4:4 + int.from_bytes(record[1:4], "big")]


def parse(body):
    """(SNI bytes or None, ALPN names or None) of a ClientHello body; raises on a short one."""
    at = 2 + 32
    at += 1 + body[at]
    at += 2 + int.from_bytes(body[at:at + 2], "big")
    at += 1 + body[at]
    sni, alpn = None, None
    if at + 2 > len(body): return sni, alpn
    end = at + 2 + int.from_bytes(body[at:at + 2], "big")
    at += 2
    while at + 4 <= end:
        kind, size = struct.unpack("!HH", body[at:at + 4])
        data = body[at + 4:at + 4 + size]
        at += 4 + size
        if kind == 0 and len(data) >= 5 and data[2] == 0:
            sni = data[5:5 + int.from_bytes(data[3:5], "big")]
        elif kind == 16:
            alpn, i = [], 2
            while i < len(data):
                alpn.append(data[i + 1:i + 1 + data[i]].decode("ascii", "replace"))
                i += 1 + data[i]
    return sni, alpn


def handle(raw):
    entry = {}
    try:
        body = peek_hello(raw)
        if body is None:
            entry["served"] = "dropped"
            return
        sni, alpn = parse(body)
        entry.update(sni=sni.decode("ascii", "replace") if sni is not None else None, alpn=alpn)
        if acme is not None and alpn and "acme-tls/1" in alpn:
            ctx, entry["served"] = acme, "acme"
        elif spoken and alpn is not None and not set(alpn) & set(spoken):
            # Fatal alert no_application_protocol (120), in a plaintext record, as OpenSSL sends it.
            entry["served"] = "alert"
            raw.recv(MAX_HELLO)
            raw.sendall(bytes([21, 3, 3, 0, 2, 2, 120]))
            return
        elif sni is not None and sni in vhosts:
            ctx, entry["served"] = vhosts[sni], "vhost:" + sni.decode("ascii")
        else:
            ctx, entry["served"] = default, "default"
        raw.settimeout(30)
        conn = ctx.wrap_socket(raw, server_side=True)
        data = b""
        while b"\r\n\r\n" not in data and len(data) < 65536:
            chunk = conn.recv(4096)
            if not chunk: return
            data += chunk
        reply = ("hello from %s\n" % a.name).encode()
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(reply) + reply)
        try: conn.unwrap()
        except Exception: pass
    except Exception as e:
        entry.setdefault("error", str(e)[:200])
    finally:
        log(entry)
        try: raw.close()
        except OSError: pass


def serve(listener):
    while True:
        try: c, _ = listener.accept()
        except OSError: return
        threading.Thread(target=handle, args=(c,), daemon=True).start()


listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", 0))
listener.listen(512)
print("PORT", listener.getsockname()[1], flush=True)
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
threading.Thread(target=serve, args=(listener,), daemon=True).start()
sys.stdin.read()
