#!/usr/bin/env python3
"""An attacker for pinproxy's tests: it shows a site's genuine certificate chain without holding the
key, then hangs up. Prints 'PORT <n>' once listening and serves until stdin closes.

Each connection is relayed to --genuine (a real TLS server with the genuine chain), but only until
the server's Certificate message has passed; then the relay aborts the handshake (--abort alert, fin
or rst) instead of passing on the proof of key (TLS 1.3 CertificateVerify; TLS 1.2 the signed
ServerKeyExchange). To the client this is exactly a server that replays a public chain it cannot
sign for.

With --abort none, the first connection is relayed to --genuine whole (its key proved): the
selective attacker of the stream-check tests, whose probe passes and whose tunnel meets --then.

With --then PORT, only the first connection is treated so; every later one is relayed untouched to
PORT (a rogue server): the on-path attacker who lets the probe "see" the genuine chain and
intercepts the tunnel.

TLS 1.2: the Certificate message is plaintext; the relay re-frames ServerHello + Certificate into one
record and drops the rest. TLS 1.3: it is encrypted; OpenSSL writes each handshake message of the
server's flight as its own record, so the relay passes the ServerHello, the compatibility
ChangeCipherSpec, and the first two encrypted records (EncryptedExtensions, Certificate).
"""
import argparse, os, socket, struct, sys, threading

p = argparse.ArgumentParser()
p.add_argument("--genuine", type=int, required=True)
p.add_argument("--then", type=int, default=0)
p.add_argument("--truncate", type=int, default=0,
               help="with --abort none: later connections get only this many bytes of --genuine's answer, then FIN")
p.add_argument("--cut-after-certificate", action="store_true",
               help="with --abort none: later connections get --genuine's answer up to the end of the record "
                    "carrying its (TLS 1.2, plaintext) Certificate, then FIN: a server that hangs up right after it")
p.add_argument("--stall", action="store_true",
               help="with --abort none: later connections are accepted and read, and never get a byte: "
                    "a server that answers no look but the probe's")
p.add_argument("--abort", choices=["alert", "fin", "rst", "none"], default="fin")
a = p.parse_args()

srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
srv.bind(("127.0.0.1", 0)); srv.listen(64)
print("PORT", srv.getsockname()[1], flush=True)
first = threading.Lock()
served_first = [False]


def pump(src, dst):
    try:
        while True:
            data = src.recv(65536)
            if not data: break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try: dst.shutdown(socket.SHUT_WR)
        except OSError: pass


def passthrough(client, port):
    upstream = socket.create_connection(("127.0.0.1", port), timeout=30)
    threading.Thread(target=pump, args=(upstream, client), daemon=True).start()
    pump(client, upstream)


def truncated(client, port, limit):
    """The server's answer cut after `limit` bytes, then a FIN: a flight that never completes."""
    upstream = socket.create_connection(("127.0.0.1", port), timeout=30)
    threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
    sent = 0
    while sent < limit:
        data = upstream.recv(limit - sent)
        if not data: break
        client.sendall(data); sent += len(data)
    client.shutdown(socket.SHUT_WR)


def cut_after_certificate(client, port):
    """The server's records passed on whole up to the one that carries a Certificate (type 11), then a FIN."""
    upstream = socket.create_connection(("127.0.0.1", port), timeout=30)
    threading.Thread(target=pump, args=(client, upstream), daemon=True).start()
    for _ in range(64):  # bounded: a first flight has a handful of records
        header = read_exact(upstream, 5)
        if header is None: break
        body = read_exact(upstream, struct.unpack("!H", header[3:5])[0])
        if body is None: break
        client.sendall(header + body)
        if header[0] == 22 and body[:1] == b"\x0b":
            break
    client.shutdown(socket.SHUT_WR)


def stalled(client):
    """Reads what comes and answers nothing, until the peer closes (or 120 s pass)."""
    client.settimeout(120)
    try:
        while client.recv(65536): pass
    except OSError:
        pass
    client.close()


def read_exact(sock, n):
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk: return None
        data += chunk
    return data


def read_record(sock):
    header = read_exact(sock, 5)
    if header is None: return None
    body = read_exact(sock, struct.unpack("!H", header[3:5])[0])
    return None if body is None else (header, body)


def abort(client, version):
    if a.abort == "alert":
        # A fatal handshake_failure alert in clear.
        client.sendall(b"\x15" + version + b"\x00\x02\x02\x28")
        client.close()
    elif a.abort == "rst":
        client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        client.close()
    else:
        client.shutdown(socket.SHUT_WR)
        try:
            client.settimeout(5)
            while client.recv(4096): pass
        except OSError:
            pass
        client.close()


def replay_without_key(client):
    upstream = socket.create_connection(("127.0.0.1", a.genuine), timeout=30)
    # The client's ClientHello is all it sends before the server's flight. Forwarding it here,
    # rather than from a second thread, matters for --abort rst: a socket another thread is
    # blocked reading from is not really closed, so no RST would leave.
    hello = read_record(client)
    if hello is None: return client.close()
    upstream.sendall(hello[0] + hello[1])
    handshake = b""     # TLS 1.2: the plaintext handshake messages so far
    encrypted = 0       # TLS 1.3: encrypted records passed on
    tls13 = False
    while True:
        record = read_record(upstream)
        if record is None: return client.close()
        header, body = record
        if header[0] == 0x14:               # ChangeCipherSpec (TLS 1.3 compatibility)
            client.sendall(header + body); continue
        if header[0] == 0x17:               # TLS 1.3 encrypted handshake record
            client.sendall(header + body)
            encrypted += 1
            if encrypted == 2:              # EncryptedExtensions, Certificate: stop before CertificateVerify
                upstream.close()
                return abort(client, header[1:3])
            continue
        if header[0] != 0x16: return client.close()
        handshake += body
        # Walk the complete handshake messages.
        offset, keep = 0, None
        while offset + 4 <= len(handshake):
            kind = handshake[offset]
            length = int.from_bytes(handshake[offset + 1:offset + 4], "big")
            if offset + 4 + length > len(handshake): break
            message = handshake[offset:offset + 4 + length]
            if kind == 2 and b"\x00\x2b\x00\x02\x03\x04" in message:
                tls13 = True                 # supported_versions = TLS 1.3
            if kind == 11:                   # Certificate (TLS 1.2): pass up to here, nothing more
                keep = handshake[:offset + 4 + length]
                break
            offset += 4 + length
        if tls13:
            client.sendall(header + body)    # the ServerHello; the rest comes encrypted
            handshake = b""
            continue
        if keep is not None:
            client.sendall(b"\x16" + header[1:3] + struct.pack("!H", len(keep)) + keep)
            upstream.close()
            return abort(client, header[1:3])


def handle(client):
    client.settimeout(30)
    try:
        with first:
            replay = a.then == 0 or not served_first[0]
            served_first[0] = True
        if replay and a.abort == "none":
            passthrough(client, a.genuine)   # the probe gets the genuine server, whole
        elif not replay and a.stall:
            stalled(client)
        elif not replay and a.cut_after_certificate:
            cut_after_certificate(client, a.genuine)
        elif not replay and a.truncate:
            truncated(client, a.genuine, a.truncate)
        elif replay:
            replay_without_key(client)
        else:
            passthrough(client, a.then)
    except OSError:
        pass


def serve():
    while True:
        try: c, _ = srv.accept()
        except OSError: return
        threading.Thread(target=handle, args=(c,), daemon=True).start()


threading.Thread(target=serve, daemon=True).start()
sys.stdin.read()
os._exit(0)
