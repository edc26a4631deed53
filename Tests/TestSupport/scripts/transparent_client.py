#!/usr/bin/env python3
"""A Python client with no proxy setting, for the transparent-mode tests: one HTTPS GET straight to
an address (the namespace's redirect sends it to pinproxy). Prints 'python STATUS' or
'python error KIND'.

  transparent_client.py --address ADDR --host NAME --cafile CA.pem [--no-sni]
"""
import argparse, socket, ssl

p = argparse.ArgumentParser()
p.add_argument("--address", required=True); p.add_argument("--host", required=True)
p.add_argument("--cafile", required=True); p.add_argument("--no-sni", action="store_true")
p.add_argument("--port", type=int, default=443)
a = p.parse_args()

context = ssl.create_default_context(cafile=a.cafile)
if a.no_sni:
    context.check_hostname = False  # no server_hostname: no SNI; the chain is still verified
try:
    with socket.create_connection((a.address, a.port), timeout=10) as raw:
        with context.wrap_socket(raw, server_hostname=None if a.no_sni else a.host) as tls:
            tls.sendall(("GET / HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % a.host).encode())
            response = b""
            while chunk := tls.recv(4096): response += chunk  # to the server's close: the tunnel ends with eof
            print("python", response.split(b"\r\n")[0].decode().split(" ")[1])
except ssl.SSLError as e:
    print("python error", e.reason or type(e).__name__)
except OSError as e:
    print("python error", type(e).__name__)
