#!/usr/bin/env python3
"""A TLS file server on loopback for the works-with matrix: serves a directory (a PEP 503 index, a
dumb-HTTP git repository, a flat apt repository) with the given chain. Prints 'PORT <n>' once
listening and serves until stdin closes, so it never outlives the test that started it.

  static.py --root DIR --cert CHAIN --key KEY [--bind 127.0.0.1] [--port 0]
"""
import argparse, functools, http.server, os, socketserver, ssl, sys, threading

p = argparse.ArgumentParser()
p.add_argument("--root", required=True); p.add_argument("--cert", required=True); p.add_argument("--key", required=True)
p.add_argument("--bind", default="127.0.0.1"); p.add_argument("--port", type=int, default=0)
a = p.parse_args()

class Quiet(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
    def log_message(self, *args): pass

class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    def get_request(self):
        raw, addr = self.socket.accept()
        raw.settimeout(30)
        return raw, addr
    def finish_request(self, request, client_address):
        try:
            tls = ctx.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return  # a client (or pinproxy's probe) that hangs up during the handshake
        self.RequestHandlerClass(tls, client_address, self)

ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(a.cert, a.key)
srv = Server((a.bind, a.port), functools.partial(Quiet, directory=a.root))
print("PORT", srv.server_address[1], flush=True)
threading.Thread(target=srv.serve_forever, daemon=True).start()
sys.stdin.read()
srv.shutdown()
