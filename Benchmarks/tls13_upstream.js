// A TLS 1.3 upstream for Benchmarks/mirror.sh that serves its handshakes concurrently (openssl
// s_server serves one connection at a time: it would wait for the client's Finished while pinproxy
// holds that client's flight until the mirror it has not accepted yet is answered).
// Usage: node tls13_upstream.js PORT KEY CHAIN [MIN] (CHAIN: the leaf and its intermediate, PEM;
// MIN: the lowest TLS version, TLSv1.3 unless given, TLSv1.2 for Benchmarks/checks.sh's stream-check
// row); answers any request with "hello\n" on 127.0.0.1:PORT until killed. Writes one line to
// stderr per server flight ("flight": the tunnel's, a probe's or a mirror's) and per completed
// handshake ("handshake": a mirror never completes its own).
const fs = require("fs");
const https = require("https");
const [port, key, chain, min] = process.argv.slice(2);
const server = https.createServer({
  key: fs.readFileSync(key), cert: fs.readFileSync(chain), minVersion: min || "TLSv1.3", maxVersion: "TLSv1.3",
}, (request, response) => {
  response.writeHead(200, { "content-type": "text/plain", "content-length": 6 });
  response.end("hello\n");
});
server.on("keylog", (line) => {
  const text = line.toString();  // TLS 1.3 writes one SERVER_HANDSHAKE_TRAFFIC_SECRET per flight, TLS 1.2 one CLIENT_RANDOM
  if (text.startsWith("SERVER_HANDSHAKE_TRAFFIC_SECRET ") || text.startsWith("CLIENT_RANDOM ")) fs.writeSync(2, "flight\n");
});
server.on("secureConnection", () => fs.writeSync(2, "handshake\n"));
server.on("tlsClientError", () => {});  // a mirror closed before its Finished, a probe
server.listen(Number(port), "127.0.0.1");
