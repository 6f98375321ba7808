"""What the Python tests share: the real txmq-broker on free loopback ports in a temporary
directory, a small JSON-over-HTTP helper (urllib) and waiting on a condition with a deadline.

The binaries are found in $TXMQ_BIN_DIR (set by CTest)."""

import fcntl
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

BIN_DIR = os.environ.get("TXMQ_BIN_DIR", "")


_given_ports = set()
# Descriptors of the port claims (_claim_across_processes), open until the process ends.
_port_claims = []


def _claim_across_processes(port):
    """Claims the port against other test processes, C++ ones included, for this process's
    lifetime: an flock on the file named after it, as tests/support/broker_process.cc does."""
    directory = os.path.join(tempfile.gettempdir(), "txmq-test-ports")
    try:
        os.makedirs(directory, exist_ok=True)
        fd = os.open(os.path.join(directory, str(port)), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError:
        return True  # nowhere to claim: the bind check alone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False
    _port_claims.append(fd)
    return True


def free_port():
    """A loopback port nobody listens on, below the kernel's range for outgoing connections'
    local ports: a port the kernel hands out (bind to 0) can be taken by any connection, another
    test's included, before the broker binds it. Claimed against other test processes until
    this one ends. As tests/support/broker_process.cc does."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            ephemeral_low = int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        ephemeral_low = 32768
    high = ephemeral_low - 1 if ephemeral_low > 1024 else 32767
    low = min(10000, high // 2)
    for _ in range(1000):
        port = random.randint(low, high)  # seeded from the OS at import: each process its own
        if port in _given_ports:
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        if not _claim_across_processes(port):
            continue
        _given_ports.add(port)
        return port
    raise RuntimeError("no free TCP port on 127.0.0.1 below the ephemeral range")


def eventually(condition, timeout=20.0, what="condition"):
    """Polls condition() until it returns a true value (returned) or the deadline passes."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)  # polling interval, not synchronization


class Broker:
    def __init__(self, *extra_args):
        self.dir = tempfile.mkdtemp(prefix="txmq-py-")
        self.port = free_port()
        self.http_port = free_port()
        self.extra_args = list(extra_args)
        self.proc = None
        self.log_path = os.path.join(self.dir, "broker.log")

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    @property
    def url(self):
        return f"http://127.0.0.1:{self.http_port}"

    def start(self):
        args = [os.path.join(BIN_DIR, "txmq-broker"), "--data-dir", os.path.join(self.dir, "data"),
                "--listen", self.address, "--http", f"127.0.0.1:{self.http_port}"] + self.extra_args
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)

        def ready():
            if self.proc.poll() is not None:
                raise AssertionError("txmq-broker exited during start:\n" + self.read_log())
            try:
                with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                    return r.status == 200
            except (urllib.error.URLError, ConnectionError, OSError):
                return False
        eventually(ready, 30, "the broker's /healthz")
        return self

    def read_log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.proc:
            self.log.close()
        self.proc = None

    def cleanup(self):
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.cleanup()


def call(method, url, body=None, raw=None, headers=None, timeout=60):
    """One HTTP request; returns (status, parsed JSON body or None, response headers)."""
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            text = r.read()
            return r.status, (json.loads(text) if text else None), dict(r.headers)
    except urllib.error.HTTPError as e:
        text = e.read()
        try:
            parsed = json.loads(text) if text else None
        except ValueError:
            parsed = {"raw": text.decode("utf-8", "replace")}
        return e.code, parsed, dict(e.headers)


def cli(broker, *args):
    """Runs the txmq CLI against `broker`; returns (exit status, stdout, stderr)."""
    p = subprocess.run([os.path.join(BIN_DIR, "txmq"), "--broker", broker.address] + list(args),
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stdout, p.stderr
