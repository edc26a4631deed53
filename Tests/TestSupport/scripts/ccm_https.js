// An HTTPS server on 127.0.0.1 that speaks TLS 1.3 with TLS_AES_128_CCM_SHA256 only (a suite
// clients may offer and pinproxy's mirror does not open), serving many connections at once; its
// 200's body is "hello from rogue-ccm". Prints 'PORT <n>', exits when stdin closes (review of issue 18).
//
//   node ccm_https.js CHAIN.pem KEY.pem
const fs = require('fs'), https = require('https');
const [cert, key] = process.argv.slice(2);
const server = https.createServer({
  cert: fs.readFileSync(cert), key: fs.readFileSync(key),
  minVersion: 'TLSv1.3', ciphers: 'TLS_AES_128_CCM_SHA256',
}, (req, res) => { res.writeHead(200, { 'Content-Type': 'text/plain' }); res.end('hello from rogue-ccm\n'); });
server.listen(0, '127.0.0.1', () => { process.stdout.write(`PORT ${server.address().port}\n`); });
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
