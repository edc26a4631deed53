#!/usr/bin/env python3
"""The common Python HTTPS server: http.server's HTTPServer (one request at a time, no threads)
with its listening socket wrapped in TLS, so each handshake is made inside accept() and a second
connection waits until the first is done. Prints 'PORT <n>', runs until stdin closes.

  single_server.py --cert CHAIN.pem --key KEY.pem
"""
import argparse, http.server, ssl, sys, threading

p = argparse.ArgumentParser()
p.add_argument("--cert", required=True); p.add_argument("--key", required=True)
a = p.parse_args()

class Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        body = b"hello from one at a time\n"
        self.send_response(200); self.send_header("Content-Length", str(len(body))); self.end_headers()
        self.wfile.write(body)
    def log_message(self, *_): pass

server = http.server.HTTPServer(("127.0.0.1", 0), Hello)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain(a.cert, a.key)
server.socket = context.wrap_socket(server.socket, server_side=True)
print("PORT %d" % server.server_address[1], flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
