#!/usr/bin/env python3
"""Captures the ClientHellos of Tests/TLSInspectionTests/MirrorTests.swift: real clients (curl, Go
crypto/tls, Python ssl, Node tls, openssl s_client with one key share group each, with a resumed
session's PSK, and with early data) connecting to a listener on 127.0.0.1 that saves the client's
first flight and closes. Loopback only, no network.

    cd Tests/TLSInspectionTests/Fixtures/hellos && ./capture-hellos.py

Each <name>.hex is the client's bytes (hex, one line) from the connect until 0.5 s after its
ClientHello is complete: the hello's records, and for `openssl-early-data` the early-data records
after them. The PSK of `openssl-psk` / `openssl-early-data` comes from a real resumption against
`openssl s_server` with ../leaf-ec256.chain.pem (its ticket keys die with that server).
"""
import os, socket, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.dirname(HERE)
HOST = "api.pinproxy.test"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def hello_complete(data):
    """Whether the handshake records at the start of data hold a whole ClientHello."""
    body, i = b"", 0
    while i + 5 <= len(data) and data[i] == 22:
        length = int.from_bytes(data[i + 3:i + 5], "big")
        if i + 5 + length > len(data):
            break
        body += data[i + 5:i + 5 + length]
        i += 5 + length
        if len(body) >= 4 and len(body) >= 4 + int.from_bytes(body[1:4], "big"):
            return True
    return False


def capture(client_command, name):
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(20)
    port = listener.getsockname()[1]
    proc = subprocess.Popen([part.replace("PORT", str(port)) for part in client_command],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    conn, _ = listener.accept()
    conn.settimeout(0.5)
    data, deadline, complete_at = b"", time.time() + 10, None
    while time.time() < deadline and (complete_at is None or time.time() < complete_at + 0.5):
        try:
            chunk = conn.recv(65536)
        except socket.timeout:
            continue
        if not chunk:
            break
        data += chunk
        if complete_at is None and hello_complete(data):
            complete_at = time.time()
    conn.close()
    listener.close()
    proc.kill()
    proc.wait()
    if not hello_complete(data):
        raise SystemExit("%s: no whole ClientHello" % name)
    with open(os.path.join(HERE, name + ".hex"), "w") as out:
        out.write(data.hex() + "\n")
    print(name, len(data))


def s_server(*args):
    port = free_port()
    # -early_data cannot go with -www: then s_server just reads (stdin kept open, never written).
    mode = [] if "-early_data" in args else ["-www"]
    proc = subprocess.Popen(["openssl", "s_server", "-accept", "127.0.0.1:%d" % port, "-quiet"] + mode + [
                             "-cert", os.path.join(FIXTURES, "leaf-ec256.chain.pem"),
                             "-key", os.path.join(FIXTURES, "leaf-ec256.key.pem")] + list(args),
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("s_server did not start")


GO = r'''package main

import (
	"crypto/tls"
	"os"
)

func main() {
	conn, err := tls.Dial("tcp", "127.0.0.1:"+os.Args[1], &tls.Config{ServerName: "api.pinproxy.test", NextProtos: []string{"h2", "http/1.1"}})
	if err == nil {
		conn.Close()
	}
}
'''

NODE = r'''
const tls = require("tls");
const s = tls.connect({host: "127.0.0.1", port: Number(process.argv[1]), servername: "api.pinproxy.test", ALPNProtocols: ["h2", "http/1.1"]});
s.on("error", () => {});
'''

PYTHON = r'''
import socket, ssl, sys
context = ssl.create_default_context()
context.set_alpn_protocols(["http/1.1"])
raw = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
try:
    context.wrap_socket(raw, server_hostname="api.pinproxy.test")
except Exception:
    pass
'''


def main():
    work = tempfile.mkdtemp()
    go = os.path.join(work, "hello.go")
    with open(go, "w") as f:
        f.write(GO)
    env_go = dict(os.environ, GOFLAGS="-mod=mod", GOPROXY="off", CGO_ENABLED="0")
    subprocess.run(["go", "build", "-o", os.path.join(work, "hello-go"), go], check=True, env=env_go, cwd=work)

    capture(["curl", "-s", "-m", "5", "--resolve", "%s:PORT:127.0.0.1" % HOST, "https://%s:PORT/" % HOST], "curl")
    capture([os.path.join(work, "hello-go"), "PORT"], "go")
    capture(["python3", "-c", PYTHON, "PORT"], "python")
    capture(["node", "-e", NODE, "PORT"], "node")
    for group in ["P-256", "P-384", "P-521", "X448", "ffdhe2048"]:
        capture(["openssl", "s_client", "-connect", "127.0.0.1:PORT", "-servername", HOST, "-groups", group],
                "openssl-" + group.lower())

    # A real ticket: one full handshake against s_server, the session saved, then offered.
    proc, port = s_server("-early_data")
    session = os.path.join(work, "session.pem")
    early = os.path.join(work, "early.txt")
    with open(early, "w") as f:
        f.write("GET / HTTP/1.0\r\n\r\n" + "x" * 300)
    subprocess.run(["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-servername", HOST,
                    "-sess_out", session], input=b"Q\n", stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=20)
    proc.kill()
    proc.wait()
    capture(["openssl", "s_client", "-connect", "127.0.0.1:PORT", "-servername", HOST, "-sess_in", session], "openssl-psk")
    capture(["openssl", "s_client", "-connect", "127.0.0.1:PORT", "-servername", HOST, "-sess_in", session,
             "-early_data", early], "openssl-early-data")
    subprocess.run(["rm", "-rf", work])


main()
