// A Node https client for resumption_cut.py (issue 18 item 5): N GETs of URL one after another
// with the default https.Agent (its TLS session cache, maxCachedSessions 100), each on a new
// connection (the server closes), trusting only CAFILE.
//   node resume_node.js URL CAFILE N
// Prints one line per request: 'OK <status> resumed=<bool>' or 'ERROR <message>'.
'use strict';
const https = require('https');
const fs = require('fs');
const [url, cafile, count] = process.argv.slice(2);
const ca = fs.readFileSync(cafile);
setTimeout(() => { console.log('ERROR timeout'); process.exit(1); }, 60000).unref();
function get(left) {
  if (left === 0) return;
  const request = https.get(url, { ca, timeout: 10000 }, (response) => {
    const resumed = response.socket.isSessionReused();
    response.resume();
    response.on('end', () => { console.log(`OK ${response.statusCode} resumed=${resumed}`); get(left - 1); });
  });
  request.on('error', (e) => { console.log(`ERROR ${e.code || e.message}`); get(left - 1); });
}
get(Number(count));
