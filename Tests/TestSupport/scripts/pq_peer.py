#!/usr/bin/env python3
"""A TLS 1.3 peer on the OpenSSL that cryptography bundles (>= 3.5: the ML-KEM groups), for the
mirror check's post-quantum tests. Run with the peers' venv (.build-peers/bin/python).

  pq_peer.py server --cert LEAF.pem --key LEAF.key.pem [--chain INTERMEDIATE.pem] --groups G[:G...]
      Serves TLS 1.3 on 127.0.0.1 (an ephemeral port), choosing among the groups G only; prints
      'PORT <n>' once listening and serves until stdin closes. Each connection gets one handshake
      attempt (at most 10 s) and is closed: the mirror never sends its Finished.

  pq_peer.py hello --groups G[:G...] [--server-name NAME] [--retry-to G --cert C --key K]
      Prints, as one line of hex, the records of the ClientHello this OpenSSL sends with that
      groups list (key shares as OpenSSL chooses them: the first group's, or those marked '*').
      Made in memory (no socket): the client's first flight is read from its memory BIO. With
      --retry-to, a server in memory that accepts only those groups answers it with a
      HelloRetryRequest, and the line goes on with the client's ChangeCipherSpec and second hello.

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
    server = modes.add_parser("server")
    server.add_argument("--cert", required=True)
    server.add_argument("--key", required=True)
    server.add_argument("--chain")
    server.add_argument("--groups", required=True)
    client = modes.add_parser("hello")
    client.add_argument("--groups", required=True)
    client.add_argument("--server-name", default="localhost")
    client.add_argument("--retry-to", help="groups of a server in memory that asks for a second hello")
    client.add_argument("--cert", help="that server's certificate")
    client.add_argument("--key", help="and its key")
    args = parser.parse_args()
    serve(args) if args.mode == "server" else hello(args)


if __name__ == "__main__":
    main()
