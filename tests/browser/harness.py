"""What the console's browser tests share: the real txmq-broker started on free loopback ports
in a temporary directory (stopped by PID), the txmq CLI with --json, a headless Chromium driven
by selenium (Debian chromium + chromium-driver + python3-selenium, scripts/setup.sh), and
waits on a condition with a deadline (never a fixed sleep)."""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
from txmq_testing import free_port  # noqa: E402,F401  (console_test.py uses harness.free_port)

CHROMIUM = os.environ.get("TXMQ_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TXMQ_CHROMEDRIVER", "/usr/bin/chromedriver")

DESKTOP = (1280, 800)
PHONE = (390, 844)


class Timeout(AssertionError):
    pass


def eventually(condition, timeout=15.0, what="condition", interval=0.05):
    """Calls condition() until it returns a truthy value (returned) or raises no AssertionError;
    fails with `what` and the last value or error after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            value = condition()
            if value:
                return value
            last = value
        except (AssertionError, LookupError) as e:  # not there yet
            last = e
        except Exception as e:  # selenium's stale elements and the like: try again
            last = e
        if time.monotonic() > deadline:
            raise Timeout(f"timed out after {timeout}s waiting for {what}; last: {last!r}")
        time.sleep(interval)


class Broker:
    """A txmq-broker of its own: free ports, a temporary data directory, stopped by PID."""

    def __init__(self, bin_dir, args=(), config=None):
        self.bin_dir = bin_dir
        self.dir = tempfile.mkdtemp(prefix="txmq-console-")
        self.port = free_port()
        self.http_port = free_port()
        self.address = f"127.0.0.1:{self.port}"
        self.url = f"http://127.0.0.1:{self.http_port}"
        self.config = None
        if config is not None:
            self.config = os.path.join(self.dir, "broker.toml")
            with open(self.config, "w") as f:
                f.write(config)
        self.log_path = os.path.join(self.dir, "broker.log")
        self._log = open(self.log_path, "wb")
        self._start(args)

    def _start(self, args):
        cmd = [os.path.join(self.bin_dir, "txmq-broker"), "--data-dir", os.path.join(self.dir, "data"),
               "--listen", self.address, "--http", f"127.0.0.1:{self.http_port}"]
        if self.config:
            cmd += ["--config", self.config]
        cmd += list(args)
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT)
        try:
            eventually(self._healthy, timeout=30, what=f"txmq-broker on {self.url}/healthz")
        except Exception:
            self.stop()
            raise RuntimeError(f"txmq-broker did not start:\n{self.log()}")

    def _healthy(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"txmq-broker exited with {self.proc.returncode}:\n{self.log()}")
        try:
            with urllib.request.urlopen(self.url + "/healthz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    def log(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def restart(self, args=()):
        """Stops the broker (SIGTERM) and starts it again on the same data and ports with `args`."""
        self._terminate()
        self._start(args)
        eventually(self._healthy, timeout=30, what=f"txmq-broker restarted on {self.url}/healthz")

    def _terminate(self):
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait()

    def stop(self):
        self._terminate()
        self._log.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def http_json(self, method, path, body=None, token=None):
        req = urllib.request.Request(self.url + path, method=method,
                                     data=None if body is None else json.dumps(body).encode())
        if body is not None:
            req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, timeout=10) as r:
            return json.loads(r.read() or b"null")


class Cli:
    """The txmq CLI against one broker; json() parses its JSON lines."""

    def __init__(self, bin_dir, broker, token=None):
        self.exe = os.path.join(bin_dir, "txmq")
        self.broker = broker
        self.env = dict(os.environ)
        if token:
            self.env["TXMQ_TOKEN"] = token

    def run(self, *args, stdin=None, check=True):
        cmd = [self.exe, "--broker", self.broker.address, "--json", *args]
        p = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=self.env, timeout=60)
        if check and p.returncode != 0:
            raise AssertionError(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stdout}\n{p.stderr}")
        return p

    def json(self, *args, **kw):
        out = self.run(*args, **kw).stdout
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def spawn(self, *args):
        cmd = [self.exe, "--broker", self.broker.address, *args]
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=self.env)


def chrome(size=DESKTOP, mobile=False):
    """A headless Chromium whose page is exactly `size` CSS pixels, console log kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.path.exists(path):
            raise RuntimeError(f"{path} is missing: run scripts/setup.sh (Debian chromium, chromium-driver)")
    o = Options()
    o.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="txmq-chromium-")
    for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--disable-extensions", "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--hide-scrollbars",
              f"--user-data-dir={profile}", f"--window-size={size[0]},{size[1] + 200}"):
        o.add_argument(a)
    o.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(CHROMEDRIVER), options=o)
    d._txmq_profile = profile
    set_viewport(d, size, mobile)
    return d


def set_viewport(d, size, mobile=False):
    d.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                      {"width": size[0], "height": size[1], "deviceScaleFactor": 1, "mobile": mobile})


def quit_chrome(d):
    profile = getattr(d, "_txmq_profile", None)
    d.quit()
    if profile:
        shutil.rmtree(profile, ignore_errors=True)


def console_problems(d, allow=()):
    """Entries of the browser's console log at WARNING or above since the last call, minus those
    containing one of `allow`'s strings."""
    out = []
    for e in d.get_log("browser"):
        if e.get("level") in ("SEVERE", "WARNING") and not any(a in e.get("message", "") for a in allow):
            out.append(f"{e.get('level')}: {e.get('message')}")
    return out
