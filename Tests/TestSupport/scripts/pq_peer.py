#!/usr/bin/env python3
"""A TLS 1.3 peer on the OpenSSL that cryptography bundles (>= 3.5: the ML-KEM groups), for the
mirror check's post-quantum tests. Run with the peers' venv (.build-peers/bin/python).

  pq_peer.py server --cert LEAF.pem --key LEAF.key.pem [--chain INTERMEDIATE.pem] --groups G[:G...]
      Serves TLS 1.3 on 127.0.0.1 (an ephemeral port), choosing among the groups G only; prints
      'PORT <n>' once listening and serves until stdin closes. Each connection gets one handshake
      attempt (at most 10 s), then one HTTP request answered with 'hello from pq', and is closed
      (the mirror never sends its Finished).

  pq_peer.py hello --groups G[:G...] [--server-name NAME] [--retry-to G --cert C --key K]
      Prints, as one line of hex, the records of the ClientHello this OpenSSL sends with that
      groups list (key shares as OpenSSL chooses them: the first group's, or those marked '*').
      Made in memory (no socket): the client's first flight is read from its memory BIO. With
      --retry-to, a server in memory that accepts only those groups answers it with a
      HelloRetryRequest, and the line goes on with the client's ChangeCipherSpec and second hello.

  pq_peer.py client --proxy PORT --host NAME --port N --groups G[:G...] --cafile CA.pem
      CONNECT NAME:N through the proxy on 127.0.0.1:PORT, a TLS 1.3 handshake with those groups
      (the chain verified against CA.pem), GET /; prints 'STATUS GROUP BODY' (the group the
      server chose). Every read is bounded (64 KiB, 10 s).

Groups are OpenSSL's names: X25519MLKEM768, SecP256r1MLKEM768, SecP384r1MLKEM1024, MLKEM768,
MLKEM1024, X25519, ... pyOpenSSL 26.4 has no Context.set_groups: the list is set through
cryptography's binding of SSL_CTX_set1_curves_list (OpenSSL's older name of set1_groups_list).
"""
import argparse, socket, struct, sys, threading

from cryptography.hazmat.bindings.openssl.binding import Binding
from OpenSSL import SSL, crypto

MAX_CONNECTIONS = 64          # handled at once; more are closed at accept
HANDSHAKE_SECONDS = 10        # a connection lives at most this long

binding = Binding()


def context(method_side, groups):
    ctx = SSL.Context(SSL.TLS_METHOD)
    ctx.set_min_proto_version(SSL.TLS1_3_VERSION)
    ctx.set_max_proto_version(SSL.TLS1_3_VERSION)
    if binding.lib.SSL_CTX_set1_curves_list(ctx._context, groups.encode()) != 1:
        sys.exit(f"{method_side}: OpenSSL refuses the groups list {groups!r}")
    return ctx


def serve(args):
    ctx = context("server", args.groups)
    ctx.use_certificate_file(args.cert)
    ctx.use_privatekey_file(args.key)
    if args.chain:
        with open(args.chain, "rb") as f:
            ctx.add_extra_chain_cert(crypto.load_certificate(crypto.FILETYPE_PEM, f.read()))
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def handle(sock):
        try:
            # Blocking reads bounded by SO_RCVTIMEO (pyOpenSSL turns a Python socket timeout into
            # WantReadError at once, which would close before the client's Finished).
            limit = struct.pack("ll", HANDSHAKE_SECONDS, 0)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, limit)
            conn = SSL.Connection(ctx, sock)
            conn.set_accept_state()
            try:
                conn.do_handshake()
                answer(conn)
            except (SSL.Error, OSError) as error:
                # the mirror closes after the server's flight, before its Finished: said on stderr only
                print(f"handshake: {error!r}", file=sys.stderr, flush=True)
        finally:
            sock.close()
            slots.release()

    def accept():
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return
            if not slots.acquire(blocking=False):
                sock.close()
                continue
            threading.Thread(target=handle, args=(sock,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    sys.stdin.read()  # until stdin closes
    listener.close()


def answer(conn):
    """One HTTP/1.1 request (its head, at most 64 KiB) answered with 'hello from pq'."""
    request = b""
    while b"\r\n\r\n" not in request and len(request) < 1 << 16:
        try:
            chunk = conn.recv(4096)
        except SSL.ZeroReturnError:
            return
        if not chunk:
            return
        request += chunk
    body = b"hello from pq\n"
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(body), body))
    conn.shutdown()


def client(args):
    """CONNECT through the proxy, TLS 1.3 with the groups, GET /; prints 'STATUS GROUP BODY'."""
    sock = socket.create_connection(("127.0.0.1", args.proxy), timeout=HANDSHAKE_SECONDS)
    target = f"{args.host}:{args.port}"
    sock.sendall(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 1 << 16:
        chunk = sock.recv(1)  # byte by byte: nothing of the tunnel is read here
        if not chunk:
            sys.exit(f"the proxy closed: {head!r}")
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        sys.exit(f"CONNECT refused: {head.splitlines()[0]!r}")
    ctx = context("client", args.groups)
    ctx.load_verify_locations(args.cafile)
    ctx.set_verify(SSL.VERIFY_PEER, lambda conn, cert, error, depth, ok: bool(ok))
    limit = struct.pack("ll", HANDSHAKE_SECONDS, 0)
    sock.settimeout(None)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, limit)
    conn = SSL.Connection(ctx, sock)
    conn.set_tlsext_host_name(args.host.encode())
    conn.set_connect_state()
    conn.do_handshake()
    conn.sendall(f"GET / HTTP/1.1\r\nHost: {args.host}\r\nConnection: close\r\n\r\n".encode())
    response = b""
    while len(response) < 1 << 16:
        try:
            chunk = conn.recv(4096)
        except SSL.ZeroReturnError:
            break
        if not chunk:
            break
        response += chunk
    status = response.split(b" ", 2)[1].decode()
    body = response.split(b"\r\n\r\n", 1)[1].decode()
    print(status, conn.get_group_name(), body, end="", flush=True)


def hello(args):
    ctx = context("client", args.groups)
    conn = SSL.Connection(ctx, None)  # memory BIOs
    conn.set_tlsext_host_name(args.server_name.encode())
    conn.set_connect_state()
    step(conn)
    flight = conn.bio_read(1 << 16)
    if args.retry_to:
        # A server in memory that wants only --retry-to's group answers with a HelloRetryRequest;
        # the client's answer (its compatibility ChangeCipherSpec and second hello) follows.
        server_ctx = context("retrying server", args.retry_to)
        server_ctx.use_certificate_file(args.cert)
        server_ctx.use_privatekey_file(args.key)
        server = SSL.Connection(server_ctx, None)
        server.set_accept_state()
        server.bio_write(flight)
        step(server)
        conn.bio_write(server.bio_read(1 << 16))
        step(conn)
        flight += conn.bio_read(1 << 16)
    print(flight.hex(), flush=True)


def step(conn):
    """One handshake step in memory: it stops where it needs the peer's bytes."""
    try:
        conn.do_handshake()
    except SSL.WantReadError:
        pass


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    modes = parser.add_subparsers(dest="mode", required=True)
    serving = modes.add_parser("server")
    serving.add_argument("--cert", required=True)
    serving.add_argument("--key", required=True)
    serving.add_argument("--chain")
    serving.add_argument("--groups", required=True)
    capturing = modes.add_parser("hello")
    capturing.add_argument("--groups", required=True)
    capturing.add_argument("--server-name", default="localhost")
    capturing.add_argument("--retry-to", help="groups of a server in memory that asks for a second hello")
    capturing.add_argument("--cert", help="that server's certificate")
    capturing.add_argument("--key", help="and its key")
    proxied = modes.add_parser("client")
    proxied.add_argument("--proxy", type=int, required=True)
    proxied.add_argument("--host", required=True)
    proxied.add_argument("--port", type=int, required=True)
    proxied.add_argument("--groups", required=True)
    proxied.add_argument("--cafile", required=True)
    args = parser.parse_args()
    {"server": serve, "hello": hello, "client": client}[args.mode](args)


if __name__ == "__main__":
    main()
