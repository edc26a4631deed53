#!/usr/bin/env python3
"""`openssl s_server -www` on 127.0.0.1 that speaks TLS 1.3 with TLS_AES_128_CCM_SHA256 only (a
suite clients may offer and pinproxy's mirror does not open), or with --suites others. s_server
serves one connection at a time, as many embedded servers do. Prints 'PORT <n>', runs until stdin
closes or SIGTERM, and s_server ends with it (review of issue 18; issue 29).

  ccm_server.py --cert CHAIN.pem --key KEY.pem [--suites TLS_AES_128_CCM_SHA256]
"""
import argparse, signal, socket, subprocess, sys, time

# SIGTERM exits through `finally` below, so that s_server goes with us. It may arrive blocked (a
# test runner's threads block it, and a child inherits the mask, as s_server would from us).
signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
p = argparse.ArgumentParser()
p.add_argument("--cert", required=True); p.add_argument("--key", required=True)
p.add_argument("--suites", default="TLS_AES_128_CCM_SHA256")
a = p.parse_args()
s = socket.socket(); s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]; s.close()
server = subprocess.Popen(["openssl", "s_server", "-quiet", "-www", "-accept", "127.0.0.1:%d" % port, "-tls1_3",
                           "-ciphersuites", a.suites, "-cert", a.cert, "-cert_chain", a.cert, "-key", a.key],
                          stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
try:
    for _ in range(200):  # bounded: up to 10 s for the listener
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close(); break
        except OSError:
            time.sleep(0.05)
    print("PORT %d" % port, flush=True)
    sys.stdin.read()
finally:
    # s_server ends on SIGTERM; one that does not within 2 s is killed.
    server.terminate()
    try:
        server.wait(2)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait(2)
