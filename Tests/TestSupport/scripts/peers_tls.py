#!/usr/bin/env python3
"""The 2026 TLS peers for pinproxy's end-to-end tests (ModernTLSTests), run with the peers' venv
(.build-peers/bin/python: pyOpenSSL on cryptography's bundled OpenSSL >= 3.5, curl_cffi). Loopback
only; every wait is bounded.

  peers_tls.py server --cert CHAIN --key KEY [--name NAME] [--groups LIST] [--log FILE] [--port 0]
  peers_tls.py server --backend NAME:CHAIN:KEY --backend NAME:CHAIN:KEY ... (a load-balanced pool)
      A TLS 1.3-only pyOpenSSL server, one thread per connection (the mirror check's connection
      comes while the client's waits). --groups is OpenSSL's group list (SSL_CTX_set1_groups_list,
      reached as SSL_CTX_set1_curves_list through cryptography's binding: pyOpenSSL 26.4 has no
      set_groups): `X25519MLKEM768:X25519` picks the hybrid when offered, `X25519` is classical;
      without it, OpenSSL's defaults (which put X25519MLKEM768 first). With several --backend, the
      handshakes take the backends in turn (connection n gets backend n mod count), each with its
      own chain and key, as a pool behind one address.
      Answers any HTTP request with 200 and the body 'peer-ok NAME GROUP VERSION\\n' (the backend
      and the group and version this handshake agreed on), then closes. With --log, appends one
      line per connection: 'conn=N backend=NAME group=G result=ok' or 'group=none
      result=error:TEXT': the mirror check's connections, which hang up after the server's
      flight, end in errors.
      Prints 'PORT n' once listening; serves until stdin closes.

  peers_tls.py client --proxy 127.0.0.1:P --host H --port N --ca CAFILE [--keylog FILE] [--count N]
      pyOpenSSL client with OpenSSL's default groups (X25519MLKEM768 and X25519 key shares): CONNECT
      through the proxy, TLS 1.3 to H:N verified against CAFILE (name and chain), GET /. N tunnels
      one after the other; for each prints 'OK <status line> | <body>' or 'ERROR <what failed>',
      then 'GOT k/N'. Exit status 0 only when all N got a 200. --keylog appends SSLKEYLOGFILE lines
      (Context.set_keylog_callback) to FILE as the handshake goes.

  peers_tls.py curlcffi --impersonate NAME --proxy 127.0.0.1:P --host H --port N --ca CAFILE [--count N]
      curl_cffi (curl-impersonate: Chrome's, Firefox's or Safari's ClientHello, with their ML-KEM
      share, compress_certificate and GREASE) with proxy=http://127.0.0.1:P, verify=CAFILE. Prints
      as `client` does.

  peers_tls.py hello [--log FILE] [--port 0]
      Captures one ClientHello (no TLS): prints 'PORT n', accepts one connection (answering a
      CONNECT first, so a client can name it as its proxy), and prints 'GROUPS a,b'
      (supported_groups), 'SHARES a,b' (key_share groups), 'COMPRESS a,b' (compress_certificate
      algorithms) in hex and 'ECH yes|no' (an encrypted_client_hello extension, GREASE or not),
      (and writes them to FILE), then exits. What a client offers, checked.
"""
import argparse
import os, os, random, socket, struct, sys, threading, time


def set_groups(context, groups):
    """SSL_CTX_set1_groups_list on a pyOpenSSL Context: OpenSSL >= 3 defines the old
    SSL_CTX_set1_curves_list as the same control (SSL_CTRL_SET_GROUPS_LIST), and cryptography's
    binding exports that name."""
    from OpenSSL._util import lib
    if lib.SSL_CTX_set1_curves_list(context._context, groups.encode()) != 1:
        sys.exit("SSL_CTX_set1_groups_list(%s) failed" % groups)


def group_of(connection):
    from OpenSSL._util import lib, ffi
    name = lib.SSL_get0_group_name(connection._ssl)
    return ffi.string(name).decode() if name != ffi.NULL else "none"


def bounded(sock, seconds):
    """Blocking socket (pyOpenSSL needs one) whose reads and writes give up after `seconds`."""
    sock.settimeout(None)
    value = struct.pack("ll", int(seconds), 0)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, value)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, value)


def read_head(read):
    data = b""
    while b"\r\n\r\n" not in data and len(data) < 65536:
        chunk = read()
        if not chunk: return None
        data += chunk
    return data


# MARK: server

def server(a):
    from OpenSSL import SSL
    specs = a.backend or ["%s:%s:%s" % (a.name, a.cert, a.key)]
    backends = []
    for spec in specs:
        name, chain, key = spec.split(":", 2)
        context = SSL.Context(SSL.TLS_SERVER_METHOD)
        context.set_min_proto_version(SSL.TLS1_3_VERSION)
        context.use_certificate_chain_file(chain)
        context.use_privatekey_file(key)
        context.check_privatekey()
        if a.groups: set_groups(context, a.groups)
        backends.append((name, context))
    lock = threading.Lock()
    counter = [0]

    def log(text):
        if not a.log: return
        with lock:
            with open(a.log, "a") as f: f.write(text + "\n")

    def handle(raw, number):
        name, context = backends[number % len(backends)]
        group = "none"  # known only after a handshake: SSL_get0_group_name on a failed one can crash (OpenSSL 4.0.3)
        try:
            bounded(raw, 20)
            conn = SSL.Connection(context, raw)
            conn.set_accept_state()
            conn.do_handshake()
            group = group_of(conn)
            version = conn.get_protocol_version_name()

            def read():
                try: return conn.recv(4096)
                except SSL.ZeroReturnError: return b""
            if read_head(read) is None:
                log("conn=%d backend=%s group=%s result=ok request=none" % (number, name, group)); return
            body = ("peer-ok %s %s %s\n" % (name, group, version)).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\nConnection: close\r\n\r\n"
                         % len(body) + body)
            log("conn=%d backend=%s group=%s result=ok" % (number, name, group))
            try: conn.shutdown()
            except SSL.Error: pass
        except (SSL.Error, OSError) as e:
            log("conn=%d backend=%s group=%s result=error:%s" % (number, name, group, str(e).replace(" ", "_")[:200]))
        finally:
            try: raw.close()
            except OSError: pass

    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", a.port)); listening.listen(128)
    print("PORT", listening.getsockname()[1], flush=True)

    def serve():
        while True:
            try: c, _ = listening.accept()
            except OSError: return
            with lock:
                number = counter[0]; counter[0] += 1
            threading.Thread(target=handle, args=(c, number), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    sys.stdin.read()  # the test closes stdin (or dies) to stop us
    os._exit(0)


# MARK: clients

def connect_through(proxy, host, port, deadline):
    phost, pport = proxy.rsplit(":", 1)
    raw = socket.create_connection((phost, int(pport)), timeout=max(1, deadline - time.monotonic()))
    raw.sendall(b"CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host.encode(), port, host.encode(), port))
    head = b""
    while b"\r\n\r\n" not in head and len(head) < 8192:
        chunk = raw.recv(1)  # one byte at a time: nothing past the head is read here
        if not chunk: raise ConnectionError("proxy closed before answering CONNECT")
        head += chunk
    status = head.split(b"\r\n")[0].decode(errors="replace")
    if not status.startswith("HTTP/1.1 200"):
        raw.close()
        raise ConnectionError("CONNECT answered %s" % status)
    return raw


def pyopenssl_once(a):
    from OpenSSL import SSL
    deadline = time.monotonic() + 20
    context = SSL.Context(SSL.TLS_CLIENT_METHOD)
    context.set_min_proto_version(SSL.TLS1_3_VERSION)
    context.set_verify(SSL.VERIFY_PEER)
    context.load_verify_locations(a.ca)
    if a.keylog:
        def write(connection, line):
            with open(a.keylog, "ab") as f: f.write(line + b"\n")
        context.set_keylog_callback(write)
    raw = connect_through(a.proxy, a.host, a.port, deadline)
    try:
        bounded(raw, 20)
        conn = SSL.Connection(context, raw)
        conn.set_tlsext_host_name(a.host.encode())
        from OpenSSL._util import lib  # pyOpenSSL checks no name: OpenSSL's X509_VERIFY_PARAM does
        param = lib.SSL_get0_param(conn._ssl)
        if lib.X509_VERIFY_PARAM_set1_host(param, a.host.encode(), len(a.host)) != 1:
            raise RuntimeError("X509_VERIFY_PARAM_set1_host failed")
        conn.set_connect_state()
        conn.do_handshake()
        conn.sendall(b"GET / HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n" % (a.host.encode(), a.port))
        response = b""
        while time.monotonic() < deadline and len(response) < 65536:
            try: chunk = conn.recv(4096)
            except SSL.ZeroReturnError: break
            except SSL.SysCallError: break  # the server closed without close_notify
            if not chunk: break
            response += chunk
        return response
    finally:
        raw.close()


def curlcffi_once(a):
    from curl_cffi import requests
    r = requests.get("https://%s:%d/" % (a.host, a.port), impersonate=a.impersonate,
                     proxy="http://%s" % a.proxy, verify=a.ca, timeout=20)
    return ("HTTP/1.1 %d %s\r\n\r\n" % (r.status_code, r.reason or "")).encode() + r.content


def client(a, once):
    got = 0
    for _ in range(a.count):
        try:
            response = once(a)
            head, _, body = response.partition(b"\r\n\r\n")
            status = head.split(b"\r\n")[0].decode(errors="replace")
            print("OK %s | %s" % (status, body.decode(errors="replace").strip()), flush=True)
            if status.split(" ")[1:2] == ["200"]: got += 1
        except Exception as e:  # what the client library said, on one line
            print("ERROR %s: %s" % (type(e).__name__, str(e).replace("\n", " ")[:300]), flush=True)
    print("GOT %d/%d" % (got, a.count), flush=True)
    sys.exit(0 if got == a.count else 1)


# MARK: hello capture

def hello(a):
    def watch_stdin():  # the test closing stdin ends the capture, connection or not
        sys.stdin.read(); os._exit(0)
    threading.Thread(target=watch_stdin, daemon=True).start()
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listening.bind(("127.0.0.1", a.port)); listening.listen(1); listening.settimeout(30)
    print("PORT", listening.getsockname()[1], flush=True)
    conn, _ = listening.accept(); conn.settimeout(10)
    data = b""
    # Named as the client's proxy: answer its CONNECT, then read what it sends into the "tunnel".
    while len(data) < 8192:
        chunk = conn.recv(1)
        if not chunk: break
        data += chunk
        if len(data) == 1 and data != b"C": break  # no CONNECT: the ClientHello came straight
        if data.endswith(b"\r\n\r\n"):
            conn.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n"); data = b""; break
    while len(data) < 5 or len(data) < 5 + struct.unpack(">H", data[3:5])[0]:
        chunk = conn.recv(65536)
        if not chunk: break
        data += chunk
    body = data[5 + 4:]
    i = 2 + 32
    i += 1 + body[i]                                     # session id
    i += 2 + struct.unpack(">H", body[i:i + 2])[0]       # cipher suites
    i += 1 + body[i]                                     # compression methods
    end = i + 2 + struct.unpack(">H", body[i:i + 2])[0]; i += 2
    found = {}
    while i + 4 <= end:
        kind, length = struct.unpack(">HH", body[i:i + 4]); found[kind] = body[i + 4:i + 4 + length]; i += 4 + length
    def u16s(b): return [struct.unpack(">H", b[j:j + 2])[0] for j in range(0, len(b) - 1, 2)]
    groups = u16s(found.get(10, b"\0\0")[2:])
    shares, ks, j = [], found.get(51, b"\0\0")[2:], 0
    while j + 4 <= len(ks):
        g, n = struct.unpack(">HH", ks[j:j + 4]); shares.append(g); j += 4 + n
    compress = u16s(found.get(27, b"\0")[1:])
    report = ["%s %s" % (label, ",".join("%04x" % v for v in values))
              for label, values in (("GROUPS", groups), ("SHARES", shares), ("COMPRESS", compress))]
    report.append("ECH %s" % ("yes" if 0xfe0d in found else "no"))
    print("\n".join(report), flush=True)
    if a.log:
        with open(a.log, "w") as f: f.write("\n".join(report) + "\n")
    conn.close()


p = argparse.ArgumentParser()
p.add_argument("mode", choices=["server", "client", "curlcffi", "hello"])
p.add_argument("--cert"); p.add_argument("--key"); p.add_argument("--name", default="peer")
p.add_argument("--backend", action="append")
p.add_argument("--groups"); p.add_argument("--log")
p.add_argument("--port", type=int, default=0)
p.add_argument("--proxy"); p.add_argument("--host"); p.add_argument("--ca")
p.add_argument("--keylog"); p.add_argument("--count", type=int, default=1)
p.add_argument("--impersonate", default="chrome")
a = p.parse_args()
if a.mode == "server": server(a)
elif a.mode == "client": client(a, pyopenssl_once)
elif a.mode == "curlcffi":
    # libcurl (BoringSSL) appends SSLKEYLOGFILE lines when the variable is set as it starts.
    if a.keylog: os.environ["SSLKEYLOGFILE"] = a.keylog
    client(a, curlcffi_once)
else: hello(a)
