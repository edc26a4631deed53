#!/usr/bin/env python3
"""Captures the TLS vectors of TLSReaderVectors.swift: real clients (openssl s_client, curl, Python
ssl) against openssl s_server with this directory's fixture certificates, through a recording relay
on 127.0.0.1, both directions. Rerun it after make-fixtures.sh (the tests compare the captured
chains with the fixture files):

    cd Tests/TLSInspectionTests/Fixtures && ./capture-flights.py > ../TLSReaderVectors.swift

Only the first flights matter, so each direction is trimmed: the client's records up to the end of
its first ClientHello, the server's up to the end of its plaintext (the ChangeCipherSpec record for
TLS 1.2, the first application_data header for TLS 1.3), and then one more record cut to its header
and 16 bytes, which the readers must leave alone.
"""
import base64, os, select, socket, ssl, subprocess, sys, tempfile, threading, time

HERE = os.path.dirname(os.path.abspath(__file__))
HOST = "api.pinproxy.test"


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


class Relay:
    """Accepts one connection at a time on 127.0.0.1 and relays it to the server, recording both
    directions in order."""

    def __init__(self, upstream_port):
        self.upstream_port = upstream_port
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(1)
        self.port = self.listener.getsockname()[1]

    def start(self):
        self.result = None
        self.thread = threading.Thread(target=self._relay_one, daemon=True)
        self.thread.start()

    def finish(self):
        self.thread.join(15)
        return self.result

    def _relay_one(self):
        client, _ = self.listener.accept()
        server = socket.create_connection(("127.0.0.1", self.upstream_port))
        recorded = {client: bytearray(), server: bytearray()}
        peer = {client: server, server: client}
        open_ = {client, server}
        deadline = time.time() + 10
        while open_ and time.time() < deadline:
            ready, _, _ = select.select(list(open_), [], [], 0.5)
            for s in ready:
                data = s.recv(65536)
                if not data:
                    open_.discard(s)
                    try:
                        peer[s].shutdown(socket.SHUT_WR)
                    except OSError:
                        pass
                    continue
                recorded[s] += data
                peer[s].sendall(data)
        client.close()
        server.close()
        self.result = (bytes(recorded[client]), bytes(recorded[server]))


def records(data):
    out, i = [], 0
    while i + 5 <= len(data):
        length = int.from_bytes(data[i + 3:i + 5], "big")
        out.append((data[i], data[i:i + 5 + length]))
        i += 5 + length
    return out


def trim_client(data):
    kept, hello = b"", b""
    recs = records(data)
    for n, (_, rec) in enumerate(recs):
        kept += rec
        hello += rec[5:]
        if len(hello) >= 4 and len(hello) >= 4 + int.from_bytes(hello[1:4], "big"):
            tail = recs[n + 1][1][:5 + 16] if n + 1 < len(recs) else b""
            return kept + tail
    raise SystemExit("no complete ClientHello")


def trim_server(data, tls13):
    kept = b""
    recs = records(data)
    for n, (kind, rec) in enumerate(recs):
        if kind == 23:
            return kept + rec[:5 + 16]
        kept += rec
        if kind == 20 and not tls13:
            tail = recs[n + 1][1][:5 + 16] if n + 1 < len(recs) else b""
            return kept + tail
    raise SystemExit("server flight did not reach its encrypted part")


def s_server(*args, cert="leaf-ec256"):
    port = free_port()
    proc = subprocess.Popen(
        ["openssl", "s_server", "-accept", "127.0.0.1:%d" % port, "-www", "-quiet",
         "-cert", "%s/%s.pem" % (HERE, cert), "-key", "%s/%s.key.pem" % (HERE, cert),
         "-cert_chain", "%s/good-intermediate.pem" % HERE, *args],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port)).close()
            return proc, port
        except OSError:
            time.sleep(0.05)
    raise SystemExit("s_server did not start")


def capture(relay, client):
    relay.start()
    client(relay.port)
    return relay.finish()


def s_client(*args, timeout=None):
    def run(port):
        command = ["openssl", "s_client", "-connect", "127.0.0.1:%d" % port, "-CAfile", HERE + "/good-root.pem", *args]
        if timeout is None:
            subprocess.run(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=15)
        else:  # stdin stays open until the timeout, then closes
            proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(timeout)
            proc.stdin.close()
            proc.wait(15)
    return run


def curl(*args):
    def run(port):
        subprocess.run(["curl", "-sS", "-o", "/dev/null", "--cacert", HERE + "/good-root.pem",
                        "--resolve", "%s:%d:127.0.0.1" % (HOST, port), *args, "https://%s:%d/" % (HOST, port)],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=15)
    return run


def python_ssl(port):
    ctx = ssl.create_default_context(cafile=HERE + "/good-root.pem")
    with socket.create_connection(("127.0.0.1", port)) as raw, ctx.wrap_socket(raw, server_hostname=HOST) as tls:
        tls.sendall(b"GET / HTTP/1.1\r\nHost: api.pinproxy.test\r\nConnection: close\r\n\r\n")
        while tls.recv(65536):
            pass


def main():
    vectors = []  # (name, doc, client bytes, server bytes)

    def add(name, doc, pair, tls13):
        vectors.append((name, doc, trim_client(pair[0]), trim_server(pair[1], tls13)))

    sni = ["-servername", HOST]
    proc, port = s_server()
    relay = Relay(port)
    add("opensslTLS12", "openssl s_client -tls1_2 -servername api.pinproxy.test (EC P-256 leaf)",
        capture(relay, s_client("-tls1_2", *sni)), False)
    add("opensslTLS13", "openssl s_client -tls1_3 -servername api.pinproxy.test",
        capture(relay, s_client("-tls1_3", *sni)), True)
    add("opensslNoSNI", "openssl s_client -tls1_2 -noservername",
        capture(relay, s_client("-tls1_2", "-noservername")), False)
    add("curlTLS13", "curl --tlsv1.3 https://api.pinproxy.test/",
        capture(relay, curl("--tlsv1.3")), True)
    add("pythonTLS13", "Python ssl.create_default_context(), server_hostname api.pinproxy.test",
        capture(relay, python_ssl), True)
    with tempfile.TemporaryDirectory() as tmp:
        ticket, session = tmp + "/ticket.pem", tmp + "/session.pem"
        add("ticketFull", "openssl s_client -tls1_2 -sess_out: full handshake, the server issues a NewSessionTicket",
            capture(relay, s_client("-tls1_2", *sni, "-sess_out", ticket)), False)
        add("ticketResumed", "openssl s_client -tls1_2 -sess_in: abbreviated handshake resuming with the ticket",
            capture(relay, s_client("-tls1_2", *sni, "-sess_in", ticket)), False)
        add("sessionIDFull", "openssl s_client -tls1_2 -no_ticket -sess_out: full handshake, session id only",
            capture(relay, s_client("-tls1_2", *sni, "-no_ticket", "-sess_out", session)), False)
        add("sessionIDResumed", "openssl s_client -tls1_2 -no_ticket -sess_in: abbreviated handshake resuming the session id",
            capture(relay, s_client("-tls1_2", *sni, "-no_ticket", "-sess_in", session)), False)
        # TLS 1.3 tickets come after the handshake: -ign_eof keeps s_client reading until they do.
        psk = tmp + "/psk.pem"
        capture(relay, s_client("-tls1_3", *sni, "-ign_eof", "-sess_out", psk, timeout=1))
        add("pskResumed", "openssl s_client -tls1_3 -sess_in: resumption with a TLS 1.3 ticket (pre_shared_key)",
            capture(relay, s_client("-tls1_3", *sni, "-sess_in", psk)), True)
    proc.terminate()

    proc, port = s_server(cert="leaf-rsa2048")
    relay = Relay(port)
    add("curlTLS12", "curl --tlsv1.2 --tls-max 1.2 https://api.pinproxy.test/ (RSA 2048 leaf)",
        capture(relay, curl("--tlsv1.2", "--tls-max", "1.2")), False)
    proc.terminate()

    proc, port = s_server("-groups", "P-384")
    relay = Relay(port)
    add("helloRetryRequest", "s_server -groups P-384 vs s_client -tls1_3 -groups X25519:P-384 (key share for X25519 only)",
        capture(relay, s_client("-tls1_3", *sni, "-groups", "X25519:P-384")), True)
    proc.terminate()

    print("// Captured by Fixtures/capture-flights.py: real clients against openssl s_server with the fixture")
    print("// certificates, through a recording relay on 127.0.0.1. Each direction is trimmed after its first")
    print("// flight, plus one record cut to its header and 16 bytes that the readers must leave alone.")
    print("// Base64, 76-column lines.")
    print()
    print("enum TLSReaderVectors {")
    for name, doc, client, server in vectors:
        for side, data in (("Client", client), ("Server", server)):
            print("    /// %s: %s, %d bytes." % (doc, "client → server" if side == "Client" else "server → client", len(data)))
            print('    static let %s%s = """' % (name, side))
            text = base64.b64encode(data).decode()
            for i in range(0, len(text), 76):
                print("        " + text[i:i + 76])
            print('        """')
    print("}")


main()
