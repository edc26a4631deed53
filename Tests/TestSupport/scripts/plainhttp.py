#!/usr/bin/env python3
"""A plain-HTTP/1.1 server on loopback for the plain-HTTP forwarding tests (keep-alive, bodies with
Content-Length and chunked, both ways). Prints 'PORT <n>' once listening and serves until stdin
closes, so it never outlives the test that started it.

  GET  /hello          'hello plain' with Content-Length
  GET  /headers        the request head it received, as the body
  GET  /chunked        a chunked body: 'chunk 0'..'chunk 99', one line each
  GET  /bytes/N        N zero bytes with Content-Length, written 64 KiB at a time
  GET  /reset          promises 1,000,000 bytes, sends 100,000, then resets the connection (RST)
  GET  /count          how many requests it has answered so far
  GET  /then-close     'hello plain' without 'Connection: close', then closes the connection anyway
  GET  /silent         reads the head and never answers (until pinproxy closes the connection)
  GET  /then-spam      'hello plain' (kept alive); once /spam is asked, 100,000 bytes nobody asked
                       for on the same connection, then waits for pinproxy to close it
  GET  /spam           lets /then-spam send its bytes; 'sent' once they are written
  GET  /spam-closed    'closed' once pinproxy closed /then-spam's connection (within 5 s), else 'open'
  GET  /delay/MS       'hello plain' after MS milliseconds
  GET  /raw/NAME       one of RAW's answers, byte for byte (framing pinproxy must undo or refuse)
  POST|PUT /upload     reads the body (Content-Length or chunked) and answers 'received N sha256 H'
  POST /sink           never reads the body (a small receive buffer), until pinproxy closes
"""
import hashlib, http.server, select, socket, socketserver, struct, sys, threading, time

RAW = {
    # A chunked answer with an extension and a trailer, for an HTTP/1.0 client to get de-chunked.
    "chunked": b"HTTP/1.1 200 OK\r\nX-Test: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n",
    "plus-status": b"HTTP/1.1 +200 OK\r\nContent-Length: 2\r\n\r\nok",
    "bad-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5 6\r\nhello\r\n0\r\n\r\n",
    "huge-chunk": b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n20000000000\r\nhello",
    # 100 fields: pinproxy reads them, but with its Via and Connection the client would get 102.
    "many-fields": b"HTTP/1.1 200 OK\r\n" + b"".join(b"X-F%d: v\r\n" % i for i in range(99)) + b"Content-Length: 0\r\n\r\n",
    # A head one byte over pinproxy's 64 KiB limit for response heads.
    "long-head": b"HTTP/1.1 200 OK\r\nX-Long: " + b"a" * 65536 + b"\r\nContent-Length: 0\r\n\r\n",
}

answered = 0
lock = threading.Lock()
spam_go, spam_sent, spam_closed = threading.Event(), threading.Event(), threading.Event()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def send_text(self, text, status=200):
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def count(self):
        global answered
        with lock:
            answered += 1

    def wait_for_close(self, seconds=120):
        """Until the peer closes (or resets) the connection, without reading what it sent. True if it did."""
        poller = select.poll()
        poller.register(self.connection, select.POLLRDHUP | select.POLLHUP | select.POLLERR)
        deadline = time.time() + seconds
        closed = False
        while time.time() < deadline and not closed:
            closed = bool(poller.poll(200))
        self.close_connection = True
        return closed

    def do_HEAD(self):
        self.do_GET()

    def do_GET(self):
        self.count()
        if self.path == "/hello":
            return self.send_text("hello plain\n")
        if self.path == "/headers":
            return self.send_text(self.requestline + "\n" + str(self.headers))
        if self.path == "/then-close":
            self.send_text("hello plain\n")
            self.wfile.flush()
            self.close_connection = True
            return
        if self.path == "/silent":
            return self.wait_for_close()
        if self.path == "/then-spam":
            self.send_text("hello plain\n")
            self.wfile.flush()
            if spam_go.wait(60):
                self.wfile.write(b"x" * 100000)
                self.wfile.flush()
                spam_sent.set()
                if self.wait_for_close(60):
                    spam_closed.set()
            self.close_connection = True
            return
        if self.path == "/spam":
            spam_go.set()
            return self.send_text("sent\n" if spam_sent.wait(30) else "not sent\n")
        if self.path == "/spam-closed":
            return self.send_text("closed\n" if spam_closed.wait(5) else "open\n")
        if self.path.startswith("/delay/"):
            time.sleep(int(self.path[len("/delay/"):]) / 1000)
            return self.send_text("hello plain\n")
        if self.path.startswith("/raw/"):
            answer = RAW[self.path[len("/raw/"):]]
            if self.command == "HEAD" and b"chunked" in answer:
                answer = answer[: answer.index(b"\r\n\r\n") + 4]  # a HEAD answer is its head
            self.wfile.write(answer)
            self.wfile.flush()
            self.close_connection = True
            return
        if self.path == "/count":
            with lock:
                return self.send_text("%d\n" % answered)
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for i in range(100):
                data = ("chunk %d\n" % i).encode()
                self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.write(b"0\r\n\r\n")
            return
        if self.path.startswith("/bytes/"):
            n = int(self.path[len("/bytes/"):])
            self.send_response(200)
            self.send_header("Content-Length", str(n))
            self.end_headers()
            block = bytes(65536)
            while n > 0:
                self.wfile.write(block[: min(n, len(block))])
                n -= min(n, len(block))
            return
        if self.path == "/reset":
            self.send_response(200)
            self.send_header("Content-Length", "1000000")
            self.end_headers()
            self.wfile.write(bytes(100000))
            self.wfile.flush()
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.connection.close()
            self.close_connection = True
            return
        self.send_text("not found\n", 404)

    def do_POST(self):
        self.count()
        if self.path == "/sink":
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            return self.wait_for_close()
        digest = hashlib.sha256()
        received = 0
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip(), 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                left = size
                while left > 0:
                    data = self.rfile.read(min(left, 1 << 20))
                    digest.update(data)
                    received += len(data)
                    left -= len(data)
                self.rfile.readline()
        else:
            left = int(self.headers.get("Content-Length", "0"))
            while left > 0:
                data = self.rfile.read(min(left, 1 << 20))
                if not data:
                    break
                digest.update(data)
                received += len(data)
                left -= len(data)
        self.send_text("received %d sha256 %s\n" % (received, digest.hexdigest()))

    do_PUT = do_POST


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # Hundreds of connections at once in the abuse tests: a backlog of 5 would drop their SYNs.
    request_queue_size = 1024

    def handle_error(self, request, client_address):
        # pinproxy closing a connection mid-answer (a client that left) is expected, not an error.
        if not isinstance(sys.exc_info()[1], (ConnectionError, BrokenPipeError)):
            super().handle_error(request, client_address)


srv = Server(("127.0.0.1", 0), Handler)
print("PORT", srv.server_address[1], flush=True)
threading.Thread(target=srv.serve_forever, daemon=True).start()
sys.stdin.read()
srv.shutdown()
