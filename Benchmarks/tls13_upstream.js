// A TLS 1.3 upstream for the benchmarks (relay.py's setup rounds, rows.sh's rows) that serves its
// handshakes concurrently (openssl s_server serves one connection at a time: it would wait for the
// client's Finished while pinproxy holds that client's flight until the mirror it has not accepted
// yet is answered).
// Usage: [UPSTREAM_WORKERS=N] node tls13_upstream.js PORT KEY CHAIN [MIN] (CHAIN: the leaf and its
// intermediate, PEM; MIN: the lowest TLS version, TLSv1.3 unless given, TLSv1.2 for
// Benchmarks/checks.sh's stream-check row); answers any request with "hello\n" on 127.0.0.1:PORT
// until killed. Writes one line to stderr per server flight ("flight": the tunnel's, a probe's or a
// mirror's) and per completed handshake ("handshake": a mirror never completes its own), each line
// one write(2) to the inherited descriptor, so the lines of several processes never mix.
//
// UPSTREAM_WORKERS (default 1): with N > 1 the primary forks N workers (Node's cluster module) that
// share the listening port, so that two handshakes are served at once, a tunnel's and its mirror's,
// as by a server with a process per core; one process serves them one after the other on its single
// thread. Round robin (SCHED_RR, whatever NODE_CLUSTER_SCHED_POLICY says): the primary accepts and
// hands each connection to the next worker, so a tunnel's two connections, made one after the other,
// go to two workers (28 of 30 pinned tunnels in a trial with 2 workers). With SCHED_NONE the workers
// accept themselves and one of them often took both before starting either handshake (12 of 30).
// The hand-off costs every connection (direct ones too) one hop through the primary. The primary
// serves nothing; SIGTERM or SIGINT to it stops the workers (and a worker whose primary is gone
// exits: its IPC channel closes).
const cluster = require("cluster");
const fs = require("fs");
const https = require("https");
const [port, key, chain, min] = process.argv.slice(2);
const workers = Number(process.env.UPSTREAM_WORKERS || "1");
if (!Number.isInteger(workers) || workers < 1 || workers > 64) {
  fs.writeSync(2, "UPSTREAM_WORKERS must be 1 to 64\n");
  process.exit(2);
}

function serve() {
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
}

if (workers === 1) {
  serve();
} else if (cluster.isPrimary) {
  cluster.schedulingPolicy = cluster.SCHED_RR;
  for (let i = 0; i < workers; i++) cluster.fork();
  let stopping = false;
  const stop = (code) => {
    stopping = true;
    process.exitCode = code;
    for (const worker of Object.values(cluster.workers)) worker.process.kill("SIGTERM");
    setTimeout(() => process.exit(), 2000).unref();  // bounded: exits when the last worker has gone, or after 2 s
  };
  process.on("SIGTERM", () => stop(0));
  process.on("SIGINT", () => stop(0));
  cluster.on("exit", () => {
    if (!stopping) { fs.writeSync(2, "tls13_upstream.js: a worker died\n"); stop(1); }  // a smaller cluster would measure something else
    if (Object.keys(cluster.workers).length === 0) process.exit();
  });
} else {
  serve();
}
