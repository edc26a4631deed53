#!/usr/bin/env python3
"""An Android network_security_config.xml of N domains for `pinproxy pin --import nsc` (issue 30):
   manydomains.py N > nsc.xml
Domain-configs of 50 domains each (one in four with includeSubdomains), each with a pin-set of two
pins, one beside pinproxy's `at:` comment, and every tenth with a nested domain-config that
inherits its pin-set and names trust anchors."""
import base64, hashlib, sys

n = int(sys.argv[1])
out = sys.stdout
out.write('<?xml version="1.0" encoding="utf-8"?>\n<network-security-config>\n')
def pin(i):
    return base64.b64encode(hashlib.sha256(str(i).encode()).digest()).decode()
domain = 0
config = 0
while domain < n:
    out.write('  <domain-config>\n')
    for _ in range(min(50, n - domain)):
        sub = ' includeSubdomains="true"' if domain % 4 == 0 else ''
        out.write(f'    <domain{sub}>h{domain}.d{config}.test</domain>\n')
        domain += 1
    out.write(f'    <pin-set expiration="2027-01-31"><pin digest="SHA-256">{pin(2 * config)}</pin><!-- at: leaf -->'
              f'<pin digest="SHA-256">{pin(2 * config + 1)}</pin></pin-set>\n')
    if config % 10 == 0 and domain < n:
        out.write(f'    <domain-config><trust-anchors><certificates src="system"/></trust-anchors><domain>n{domain}.d{config}.test</domain></domain-config>\n')
        domain += 1
    out.write('  </domain-config>\n')
    config += 1
out.write('</network-security-config>\n')
