// Node's documented CONNECT pattern (https://nodejs.org/api/http.html#event-connect): an
// http.request to the proxy with method CONNECT and path host:port, then tls.connect over the
// socket it hands back. Node sends `Host: <the proxy's address>`, not the target.
//   node node_connect.js PROXYPORT HOST PORT PATH CAFILE
// prints 'OK <status> <body>', 'REFUSED <status> <reason phrase>' or 'ERROR <message>'.
'use strict';
const http = require('http');
const tls = require('tls');
const fs = require('fs');
const [proxyPort, host, port, path, cafile] = process.argv.slice(2);
setTimeout(() => { console.log('ERROR timeout'); process.exit(1); }, 20000).unref();
const request = http.request({ host: '127.0.0.1', port: Number(proxyPort), method: 'CONNECT', path: `${host}:${port}` });
request.on('connect', (response, socket) => {
  if (response.statusCode !== 200) {
    console.log(`REFUSED ${response.statusCode} ${response.statusMessage}`);
    socket.destroy();
    return;
  }
  const secure = tls.connect({ socket, servername: host, ca: fs.readFileSync(cafile) }, () => {
    secure.write(`GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nConnection: close\r\n\r\n`);
  });
  let data = '';
  secure.on('data', (chunk) => { data += chunk; });
  secure.on('end', () => {
    const [head, body] = data.split('\r\n\r\n');
    console.log(`OK ${head.split(' ')[1]} ${(body || '').trim()}`);
  });
  secure.on('error', (e) => console.log(`ERROR ${e.message}`));
});
request.on('error', (e) => console.log(`ERROR ${e.message}`));
request.end();
