#!/usr/bin/env python3
"""An HTTPS (or, without --cert, plain HTTP) server on one address and port, one thread per
connection, for the transparent-mode tests: it runs inside the test's network namespace at an
address the test gave the namespace. Answers every GET with 200 and 'hello from NAME'. Runs until
killed (the test's script ends the namespace's processes).

  transparent_server.py --bind ADDR --port N --name NAME [--cert CHAIN.pem --key KEY.pem]
"""
import argparse, http.server, socket, ssl, sys

p = argparse.ArgumentParser()
p.add_argument("--bind", required=True); p.add_argument("--port", type=int, required=True)
p.add_argument("--name", required=True); p.add_argument("--cert"); p.add_argument("--key")
a = p.parse_args()

class Hello(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        body = ("hello from %s host=%s\n" % (a.name, self.headers.get("Host", ""))).encode()
        self.send_response(200); self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close"); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *_): pass

context = None
if a.cert:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(a.cert, a.key)

class Server(http.server.ThreadingHTTPServer):
    address_family = socket.AF_INET6 if ":" in a.bind else socket.AF_INET
    daemon_threads = True
    # The handshake in the connection's own thread, not in accept(): the probe, the tunnel and its
    # mirror arrive together, and a server that handshakes one at a time loses the mirror.
    def finish_request(self, request, client_address):
        if context:
            try: request = context.wrap_socket(request, server_side=True)
            except (ssl.SSLError, OSError): return
        super().finish_request(request, client_address)

Server((a.bind, a.port), Hello).serve_forever()
