#!/usr/bin/env python3
"""A policy of RULES rules for Benchmarks/manyrules.sh:
    python3 Benchmarks/manyrules.py RULES [SEED] [METRICS_LISTEN]

Each block of 20 rules: 8 exact names, 3 `*.` and 3 `**.` wildcards, an exact name on port 8443
only, IPv4 /32 and /24 and IPv6 /64 rules, a rule from a pinset, and (one block in ten) a `mode:
unpinned` exclusion under a `*.` rule, which `check` warns about (weaker_rule_shadows_enforced).
Every pinned rule has two `at: leaf` keys, so nothing else is warned about. SEED changes the pins of
rule 0 alone: a reload to the file of another seed changes one rule. METRICS_LISTEN (127.0.0.1:PORT)
sets proxy.metrics_listen. Prints the YAML on stdout.
"""
import base64
import hashlib
import sys

rules = int(sys.argv[1])
seed = sys.argv[2] if len(sys.argv) > 2 else "0"
metrics = f", metrics_listen: {sys.argv[3]}" if len(sys.argv) > 3 else ""


def pin(text):
    return "spki-sha256:" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()


out = ["version: 1", f"proxy: {{ allowed_ports: [443, 8443]{metrics} }}", "defaults: { unpinned: allow }",
       "pinsets:", f'  corp: [ {{ pin: "{pin("corp-a")}", at: leaf }}, {{ pin: "{pin("corp-b")}", at: leaf }} ]',
       "rules:"]
for i in range(rules):
    k, block = i % 20, i // 20
    salt = seed if i == 0 else ""
    pins = f'pins: [ {{ pin: "{pin(f"{i}a{salt}")}", at: leaf }}, {{ pin: "{pin(f"{i}b")}", at: leaf }} ]'
    if k < 8:
        out.append(f"  - {{ host: h{i}.d{block}.example, {pins} }}")
    elif k < 11:
        out.append(f'  - {{ host: "*.w{i}.example", {pins} }}')
    elif k < 14:
        out.append(f'  - {{ host: "**.z{i}.example", {pins} }}')
    elif k == 14:
        out.append(f"  - {{ host: h{i}.d{block}.example, ports: [8443], {pins} }}")
    elif k == 15:
        out.append(f"  - {{ ip: 10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}, {pins} }}")
    elif k == 16:
        out.append(f"  - {{ ip: 11.{block >> 8 & 255}.{block & 255}.0/24, {pins} }}")
    elif k == 17:
        out.append(f"  - {{ ip: \"2001:db8:{i >> 16:x}:{i & 0xffff:x}::/64\", {pins} }}")
    elif k == 18 and block % 10 == 0:
        out.append(f"  - {{ host: skip.w{i - 8}.example, mode: unpinned }}")
    else:
        out.append(f"  - {{ host: p{i}.d{block}.example, pinset: corp }}")
print("\n".join(out))
