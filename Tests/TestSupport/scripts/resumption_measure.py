#!/usr/bin/env python3
"""Measures what clients do when a resumed TLS 1.3 handshake is refused (issue 18 item 5).

A TLS 1.3 server on 127.0.0.1 (this script; it issues tickets, serves DIR built by matrix_tree.py
and closes every connection after one response, so each request is a new handshake) behind
resumption_cut.py; every client makes several requests, once with --cut none (does it resume at
all?) and once per cut mode (rst, close): what did each request get, and what did the relay see.

  resumption_measure.py [--clients curl,curl-runs,git,go,go-cache,node,urllib,requests,session]
                        [--cuts none,rst,close] [--requests 4] [--go-binary PATH]

Needs go (unless --go-binary), node, git, curl; prints a block per client and cut:
  <client> cut=<mode>
    <the client's lines>
    relay: offered=<n> accepted=<n> cut=<n> relayed=<n>
"""
import argparse, functools, http.server, json, os, socketserver, ssl, subprocess, sys, tempfile, threading, time

here = os.path.dirname(os.path.abspath(__file__))
fixtures = os.path.join(here, "..", "..", "TLSInspectionTests", "Fixtures")
cafile = os.path.join(fixtures, "both-roots.pem")

p = argparse.ArgumentParser()
p.add_argument("--clients", default="curl,curl-runs,git,go,go-cache,node,urllib,requests,session")
p.add_argument("--cuts", default="none,rst,close")
p.add_argument("--requests", type=int, default=4)
p.add_argument("--go-binary")
a = p.parse_args()

work = tempfile.mkdtemp(prefix="pinproxy-resumption-")
subprocess.run([sys.executable, os.path.join(here, "matrix_tree.py"), work + "/tree"], check=True, stdout=subprocess.DEVNULL, timeout=60)


class Quiet(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.0"  # one response per connection: the next request is a new handshake
    def log_message(self, *args): pass


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    def finish_request(self, request, client_address):
        request.settimeout(30)
        try:
            tls = context.wrap_socket(request, server_side=True)
        except (ssl.SSLError, OSError):
            return
        self.RequestHandlerClass(tls, client_address, self)


context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.minimum_version = ssl.TLSVersion.TLSv1_3
context.load_cert_chain(os.path.join(fixtures, "leaf-ip.chain.pem"), os.path.join(fixtures, "leaf-ip.key.pem"))
server = Server(("127.0.0.1", 0), functools.partial(Quiet, directory=work + "/tree"))
threading.Thread(target=server.serve_forever, daemon=True).start()
server_port = server.server_address[1]

go_binary = a.go_binary
if go_binary is None and any(c.startswith("go") for c in a.clients.split(",")):
    go_binary = work + "/resume_go"
    env = dict(os.environ, GOCACHE=work + "/gocache", GOPATH=work + "/gopath", GO111MODULE="off", CGO_ENABLED="0", HOME=work)
    subprocess.run(["go", "build", "-o", go_binary, os.path.join(here, "resume_go.go")], check=True, env=env, timeout=300)

clean = {"PATH": "/usr/bin:/bin", "HOME": work, "LANG": "C.UTF-8", "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}


def commands(client, base, n):
    """The client's runs (each a list of arguments): one invocation, or n for curl-runs."""
    url = base + "/hello.txt"
    if client == "curl":
        return [["curl", "-sS", "--max-time", "10", "--cacert", cafile, "-w", "OK %{http_code} %{num_connects}\\n", "-o", "/dev/null"]
                + ["-o", "/dev/null"] * (n - 1) + [url] * n]
    if client == "curl-runs":
        return [["curl", "-sS", "--max-time", "10", "--cacert", cafile, "-w", "OK %{http_code}\\n", "-o", "/dev/null", url]] * n
    if client == "git":
        return [["git", "-c", "http.sslCAInfo=" + cafile, "ls-remote", base + "/repo.git"],
                ["git", "-c", "http.sslCAInfo=" + cafile, "clone", "-q", base + "/repo.git", work + "/clone-%d" % time.monotonic_ns()]]
    if client == "go": return [[go_binary, url, cafile, str(n), "default"]]
    if client == "go-cache": return [[go_binary, url, cafile, str(n), "cache"]]
    if client == "node": return [["node", os.path.join(here, "resume_node.js"), url, cafile, str(n)]]
    return [[sys.executable, os.path.join(here, "resume_python.py"), client, url, cafile, str(n)]]


for client in a.clients.split(","):
    for cut in a.cuts.split(","):
        log = "%s/%s-%s.log" % (work, client, cut)
        relay = subprocess.Popen([sys.executable, os.path.join(here, "resumption_cut.py"), "--server", str(server_port), "--log", log,
                                  "--cut", cut, "--until-stdin-closes"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        port = int(relay.stdout.readline().split()[1])
        print("%s cut=%s" % (client, cut))
        for argv in commands(client, "https://127.0.0.1:%d" % port, a.requests):
            r = subprocess.run(argv, capture_output=True, text=True, env=clean, timeout=120)
            lines = (r.stdout + r.stderr).strip().splitlines() or [""]
            print("    exit=%d %s" % (r.returncode, " | ".join(lines)[:400]))
        time.sleep(0.3)
        relay.stdin.close(); relay.wait(10)
        entries = [json.loads(line) for line in open(log)] if os.path.exists(log) else []
        count = lambda f: sum(1 for e in entries if f(e))
        print("    relay: connections=%d offered=%d accepted=%d cut=%d relayed=%d dropped=%d" % (
            len(entries), count(lambda e: e.get("psk_offered")), count(lambda e: e.get("psk_accepted")),
            count(lambda e: e.get("action") == "cut"), count(lambda e: e.get("action") == "relayed"),
            count(lambda e: e.get("action") == "dropped")))
        sys.stdout.flush()

subprocess.run(["rm", "-rf", work])
