#!/usr/bin/env python3
"""A TLS 1.3 server on loopback built on tlslite-ng (the peers venv: .build-peers/bin/python), for
the peers that compress their certificate (RFC 8879) and pick ML-KEM hybrid groups. Prints
'PORT <n>' once listening and serves until stdin closes, so it never outlives the test that
started it. Answers `GET /` with a short body (anything else: 404), one request per connection.

  tlslite_server.py --cert CHAIN --key KEY [--compress zlib,brotli,zstd] [--groups x25519mlkem768,x25519]
                    [--bind 127.0.0.1] [--port 0]

--compress: the algorithms the server may compress its certificate with (tlslite picks the first
of the client's compress_certificate list that is among them); an empty value sends a plain
Certificate. --groups: the key exchange groups it accepts, in tlslite's names; without it,
tlslite's defaults (x25519mlkem768 first when kyber-py is there). Per handshake, one line on
stderr:

  HANDSHAKE version=TLS 1.3 group=<name> certificate_compression=<zlib|brotli|zstd|none>

and 'FAILED <reason>' for a handshake that did not complete.
"""
import argparse, socket, sys, threading

from tlslite.api import HandshakeSettings, TLSConnection, X509CertChain, parsePEMKey
from tlslite.constants import GroupName
from tlslite.errors import TLSError

BODY = b"hello from tlslite-ng\n"
REQUEST_LIMIT = 64 * 1024

p = argparse.ArgumentParser()
p.add_argument("--cert", required=True); p.add_argument("--key", required=True)
p.add_argument("--compress", default="zlib,brotli,zstd")
p.add_argument("--groups", default="")
p.add_argument("--bind", default="127.0.0.1"); p.add_argument("--port", type=int, default=0)
a = p.parse_args()

settings = HandshakeSettings()
settings.minVersion = settings.maxVersion = (3, 4)
settings.certificate_compression_send = [name for name in a.compress.split(",") if name]
if a.groups:
    settings.eccCurves = a.groups.split(",")
    # keyShares are what a tlslite client sends; validate() wants them among the groups.
    settings.keyShares = [group for group in settings.keyShares if group in settings.eccCurves]
settings = settings.validate()  # refuses an unknown algorithm or group name here, not per connection

with open(a.cert) as f:
    chain = X509CertChain()
    chain.parsePemList(f.read())
with open(a.key) as f:
    key = parsePEMKey(f.read(), private=True)

log_lock = threading.Lock()


def log(line):
    with log_lock:
        print(line, file=sys.stderr, flush=True)


def read_head(connection):
    """The request head, up to its blank line (bounded)."""
    head = b""
    while b"\r\n\r\n" not in head and len(head) < REQUEST_LIMIT:
        chunk = connection.recv(4096)
        if not chunk:
            break
        head += chunk
    return head


def serve(raw):
    raw.settimeout(30)
    connection = TLSConnection(raw)
    try:
        # alpn: tlslite 0.8.2 fails with a TypeError on a client's ALPN extension when the server
        # has no list (every browser sends one).
        connection.handshakeServer(certChain=chain, privateKey=key, settings=settings, alpn=[bytearray(b"http/1.1")])
    except Exception as error:  # tlslite raises TLSError, OSError, and its own bugs' TypeErrors
        log(f"FAILED {type(error).__name__}: {error}")
        raw.close()
        return
    group = GroupName.toStr(connection.ecdhCurve) if connection.ecdhCurve is not None else "none"
    compression = connection.server_cert_compression_algo or "none"
    log(f"HANDSHAKE version=TLS 1.3 group={group} certificate_compression={compression}")
    # The body says what this handshake was, so a test through a proxy knows the client's own
    # connection had the group and the compressed certificate it meant to test.
    body = BODY.rstrip(b"\n") + f" group={group} compression={compression}\n".encode()
    try:
        request_line = read_head(connection).split(b"\r\n", 1)[0]
        if request_line.startswith(b"GET / "):
            head = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
            connection.write(head + body)
        else:
            connection.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        connection.close()
    except (TLSError, OSError):
        pass
    finally:
        raw.close()


def accept_loop(listener):
    while True:
        try:
            raw, _ = listener.accept()
        except OSError:
            return  # the listener closed: stdin ended
        threading.Thread(target=serve, args=(raw,), daemon=True).start()


listener = socket.create_server((a.bind, a.port))
print("PORT", listener.getsockname()[1], flush=True)
threading.Thread(target=accept_loop, args=(listener,), daemon=True).start()
sys.stdin.read()
listener.close()
