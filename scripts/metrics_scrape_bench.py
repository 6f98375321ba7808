"""Times GET /metrics on a real txmq-broker with N consumer groups, each holding 100 deliveries of a
16-partition topic in flight (issue #13: the txmq_group_lag scrape runs on the io thread).
Usage: scripts/metrics_scrape_bench.py BROKER_BINARY [GROUPS]  (prints one line of figures)"""
import json, os, shutil, socket, statistics, subprocess, sys, tempfile, time, urllib.request

binary = sys.argv[1]
groups = int(sys.argv[2]) if len(sys.argv) > 2 else 1000

def free_port():
    s = socket.socket(); s.bind(("127.0.0.1", 0)); p = s.getsockname()[1]; s.close(); return p

d = tempfile.mkdtemp(prefix="txmq-scrape-")
port, http = free_port(), free_port()
proc = subprocess.Popen([binary, "--data-dir", d + "/data", "--listen", f"127.0.0.1:{port}", "--http", f"127.0.0.1:{http}",
                         "--ack-deadline", "30m"], stdout=subprocess.DEVNULL, stderr=open(d + "/log", "w"))
base = f"http://127.0.0.1:{http}"
def call(method, path, body=None):
    req = urllib.request.Request(base + path, method=method, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()
try:
    for _ in range(200):
        try:
            call("GET", "/healthz"); break
        except Exception:
            time.sleep(0.05)
    call("POST", "/v1/topics", {"name": "t", "partitions": 16})
    for i in range(0, 3200, 500):
        call("POST", "/v1/topics/t/messages", {"messages": [{"body": f"m{j}"} for j in range(i, min(i + 500, 3200))]})
    t0 = time.monotonic()
    for g in range(groups):
        call("POST", f"/v1/groups/g{g:04d}/fetch", {"topic": "t", "max": 100, "wait_ms": 0})
    setup = time.monotonic() - t0
    text = call("GET", "/metrics").decode()
    lags = [l for l in text.splitlines() if l.startswith("txmq_group_lag{")]
    assert len(lags) == groups, len(lags)
    assert all(l.endswith(" 3200") for l in lags), lags[:3]
    ms = []
    for _ in range(30):
        t = time.monotonic()
        call("GET", "/metrics")
        ms.append((time.monotonic() - t) * 1000)
    ms.sort()
    hz = []
    for _ in range(30):
        t = time.monotonic()
        call("GET", "/healthz")
        hz.append((time.monotonic() - t) * 1000)
    print(f"{os.path.basename(binary)}: {groups} groups x 16 partitions, 100 in flight each: GET /metrics median "
          f"{statistics.median(ms):.2f} ms, min {ms[0]:.2f} ms, p90 {ms[int(len(ms)*0.9)]:.2f} ms over {len(ms)} "
          f"scrapes ({len(text)} bytes; setup {setup:.1f} s); GET /healthz median {statistics.median(hz):.2f} ms; load {os.getloadavg()[0]:.1f}")
finally:
    proc.terminate(); proc.wait(timeout=20)
    shutil.rmtree(d, ignore_errors=True)
