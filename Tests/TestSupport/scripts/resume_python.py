#!/usr/bin/env python3
"""Python clients for resumption_cut.py (issue 18 item 5): N GETs of URL, each on a new connection.

  resume_python.py urllib URL CAFILE N     urllib.request with one shared SSLContext
  resume_python.py requests URL CAFILE N   one requests.Session (the server closes each connection)
  resume_python.py session URL CAFILE N    http.client over ssl sockets wrapped with session= the
                                           previous connection's SSLSession (what a caller must do
                                           by hand to resume)
Prints one line per request: 'OK <status> resumed=<bool|?>' or 'ERROR <error>'.
"""
import http.client, socket, ssl, sys, urllib.parse, urllib.request

mode, url, cafile, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
context = ssl.create_default_context(cafile=cafile)
parts = urllib.parse.urlsplit(url)

if mode == "requests":
    import requests
    session = requests.Session()
    session.trust_env = False

previous = None
for _ in range(count):
    try:
        if mode == "urllib":
            with urllib.request.urlopen(url, context=context, timeout=10) as response:
                response.read()
                print("OK", response.status, "resumed=?")
        elif mode == "requests":
            response = session.get(url, verify=cafile, timeout=10)
            print("OK", response.status_code, "resumed=?")
        else:
            raw = socket.create_connection((parts.hostname, parts.port), timeout=10)
            tls = context.wrap_socket(raw, server_hostname=parts.hostname, session=previous)
            resumed = tls.session_reused
            connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=10)
            connection.sock = tls
            connection.request("GET", parts.path or "/")
            response = connection.getresponse()
            # TLS 1.3 tickets arrive after the handshake: take the session once the response head is
            # in, before reading the body closes the connection (HTTP/1.0) and the SSL object with it.
            previous = tls.session
            response.read()
            print("OK", response.status, "resumed=%s" % str(resumed).lower())
            connection.close()
    except Exception as e:
        print("ERROR", type(e).__name__, e)
