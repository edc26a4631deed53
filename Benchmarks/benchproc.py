"""The process plumbing Benchmarks/relay.py and workers.py share: loopback ports, children that are
always stopped, and CPU seconds from /proc. Loopback only; every wait is bounded."""
import os, socket, subprocess, time

TICK = os.sysconf("SC_CLK_TCK")
children = []  # every process `start` made; the scripts stop them all at exit

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

def start(args, **kw):
    p = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=kw.pop("stdout", subprocess.DEVNULL), stderr=kw.pop("stderr", subprocess.DEVNULL), **kw)
    children.append(p)
    return p

def wait_port(port, timeout=20):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close(); return
        except OSError:
            time.sleep(0.1)
    raise SystemExit("nothing listens on %d" % port)

def stop(p):
    if p.poll() is None:
        p.terminate()
        try: p.wait(10)
        except subprocess.TimeoutExpired: p.kill(); p.wait(5)

def cpu_seconds(pids):
    """utime + stime of these processes, in seconds (a process already gone counts nothing)."""
    total = 0
    for pid in pids:
        try:
            fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return total / TICK

def write_report(out, name, report, table):
    """OUT/NAME.json and OUT/NAME.md, then the table on stdout, ready to paste into docs/performance.md."""
    import json
    os.makedirs(out, exist_ok=True)
    json.dump(report, open(os.path.join(out, name + ".json"), "w"), indent=2)
    open(os.path.join(out, name + ".md"), "w").write(table + "\n")
    print(table)

def run(main, work):
    """Runs `main`; whatever happens (an exception, ^C, SIGTERM), every child is stopped and the work
    directory removed."""
    import signal, sys
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    try:
        main()
    finally:
        for p in children: stop(p)
        subprocess.run(["rm", "-rf", work])
