#!/usr/bin/env python3
"""Debian's nginx as a TLS 1.3 test server on 127.0.0.1, for what only a real server does: 0-RTT.

  nginx_server.py --cert CHAIN --key KEY [--early-data]

Writes its configuration into a temporary directory, starts nginx in the foreground (one process,
no master), waits until it listens (bounded), prints `PORT n`, and stops nginx when stdin closes or
on SIGTERM.
Every request is answered `hello from nginx` and the connection closed (keepalive_timeout 0), so a
server that answers 0-RTT data sends its flight, its response and its close at once.
"""
import argparse, os, shutil, signal, socket, subprocess, sys, tempfile, time

# SIGTERM exits through `finally` below, so that nginx goes with us. It may arrive blocked (a test
# runner's threads block it, and a child inherits the mask).
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
p = argparse.ArgumentParser()
p.add_argument("--cert", required=True); p.add_argument("--key", required=True)
p.add_argument("--early-data", action="store_true")
a = p.parse_args()

directory = tempfile.mkdtemp(prefix="pinproxy-nginx-")
probe = socket.socket(); probe.bind(("127.0.0.1", 0)); port = probe.getsockname()[1]; probe.close()
temp = " ".join(f"{kind}_temp_path {directory};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi"))
with open(os.path.join(directory, "nginx.conf"), "w") as f:
    f.write(f"""daemon off;
master_process off;
worker_processes 1;
error_log {directory}/error.log info;
pid {directory}/nginx.pid;
events {{ worker_connections 64; }}
http {{
  access_log off;
  {temp}
  server {{
    listen 127.0.0.1:{port} ssl;
    ssl_certificate {a.cert};
    ssl_certificate_key {a.key};
    ssl_protocols TLSv1.3;
    ssl_early_data {"on" if a.early_data else "off"};
    ssl_session_cache shared:tickets:1m;
    keepalive_timeout 0;
    location / {{ return 200 "hello from nginx\\n"; }}
  }}
}}
""")
nginx = subprocess.Popen(["/usr/sbin/nginx", "-c", os.path.join(directory, "nginx.conf"), "-p", directory],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    deadline = time.monotonic() + 5
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if nginx.poll() is not None or time.monotonic() > deadline:
                sys.exit("nginx did not listen: " + open(os.path.join(directory, "error.log")).read())
            time.sleep(0.05)
    print(f"PORT {port}", flush=True)
    sys.stdin.read()
finally:
    nginx.send_signal(signal.SIGKILL)  # one process, no master: nothing else to stop
    nginx.wait(timeout=5)
    shutil.rmtree(directory, ignore_errors=True)
