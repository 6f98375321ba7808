#!/usr/bin/env python3
"""The web console in a real headless Chromium against a real broker (ctest label `browser`):
each page shows what `txmq ... --json` shows for the same state; committing a prepared
transaction from the console makes its message consumable; rolling back drops it; redrive
from the console; webhook attempt log and replay; connections; the cluster placeholder; the
phone-sized layout; refreshes pause under a dialog; API text is never markup; no console
errors on any page; the token prompt when the broker runs with auth.

Usage: console_test.py --bin-dir BUILD/bin [unittest args]"""

import argparse
import http.server
import json
import os
import sys
import threading
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import eventually  # noqa: E402

BIN_DIR = None

ROWS_JS = """
const t = document.querySelector(`[data-testid="${arguments[0]}"]`);
if (!t) return null;
return [...t.querySelectorAll('tbody tr[data-key]')].map((tr) => {
  const cols = {}, text = {};
  for (const td of tr.querySelectorAll('td')) { cols[td.dataset.col] = td.dataset.value; text[td.dataset.col] = td.textContent; }
  return {key: tr.dataset.key, cols, text};
});
"""


def by_key(rows):
    return {r["key"]: r for r in rows}


class ConsoleCase(unittest.TestCase):
    """One broker (short ack deadline, one attempt: an unacked delivery becomes a dead letter)
    and one browser for the whole class. The deadline leaves `txmq consume` room to ack on a
    loaded machine (its ack is a round trip after the fetch; a late one fails the command)."""

    broker_args = ("--ack-deadline", "2s", "--max-attempts", "1", "--tx-timeout", "1h")

    @classmethod
    def setUpClass(cls):
        cls.broker = harness.Broker(BIN_DIR, cls.broker_args)
        cls.cli = harness.Cli(BIN_DIR, cls.broker)
        try:
            cls.d = harness.chrome()
        except Exception:
            cls.broker.stop()
            raise

    @classmethod
    def tearDownClass(cls):
        harness.quit_chrome(cls.d)
        cls.broker.stop()

    def setUp(self):
        harness.set_viewport(self.d, harness.DESKTOP)

    def tearDown(self):
        # Every test: nothing at warning level or above in the browser's console.
        problems = harness.console_problems(self.d)
        self.assertEqual(problems, [], "browser console")

    # ---- page helpers
    def open(self, route):
        """Loads the console at #/route afresh and waits for its first refresh with data."""
        self.d.get(f"{self.broker.url}/?t={id(route)}#/{route}")
        self.wait_refreshes(1)

    def refreshes(self):
        return int(self.d.execute_script("return document.body.dataset.refreshes || '0'"))

    def wait_refreshes(self, n, timeout=15):
        eventually(lambda: self.refreshes() >= n, timeout, f"{n} refreshes of {self.d.current_url}")
        errors = self.d.execute_script("return document.body.dataset.errors || ''")
        banner = self.d.execute_script(
            "const b = document.querySelector('[data-testid=error-banner]'); return b && !b.hidden ? b.textContent : ''")
        self.assertEqual(banner, "", f"error banner on {self.d.current_url} (errors: {errors})")

    def rows(self, testid):
        return self.d.execute_script(ROWS_JS, testid) or []

    def wait_rows(self, testid, predicate, what, timeout=15):
        # A one-element tuple, so that an empty table that satisfies `predicate` counts as true.
        return eventually(lambda: (lambda r: (r,) if predicate(r) else None)(self.rows(testid)), timeout, what)[0]

    def click(self, css):
        el = eventually(lambda: self.d.find_element("css selector", css), 10, css)
        self.d.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
        el.click()

    def confirm_dialog(self, ok=True):
        eventually(lambda: self.d.execute_script("return document.getElementById('confirm-dialog').open"), 10,
                   "the confirmation dialog")
        text = self.d.find_element("id", "confirm-text").text
        self.click("#confirm-ok" if ok else "#confirm-cancel")
        eventually(lambda: not self.d.execute_script("return document.getElementById('confirm-dialog').open"), 10,
                   "the dialog to close")
        return text


class TopicsAndGroups(ConsoleCase):
    def test_topics_page_shows_what_topic_list_shows(self):
        self.cli.run("topic", "create", "ta", "--partitions", "3")
        self.cli.run("topic", "create", "tb", "--partitions", "1")
        self.cli.run("produce", "ta", stdin="".join(f"message {i}\n" for i in range(7)))
        self.cli.run("produce", "tb", "--key", "k", "one body")
        listed = {t["topic"]: t for t in self.cli.json("topic", "list")}
        self.assertEqual(listed["ta"]["messages"], 7)
        self.open("topics")
        rows = by_key(self.wait_rows("topics-table", lambda r: {"ta", "tb"} <= {x["key"] for x in r}, "ta and tb"))
        for name in ("ta", "tb"):
            cols = rows[name]["cols"]
            self.assertEqual(int(cols["partitions"]), listed[name]["partitions"], name)
            self.assertEqual(int(cols["messages"]), listed[name]["messages"], name)
            self.assertEqual(int(cols["bytes"]), listed[name]["bytes"], name)
        # More messages show up without a reload, with a rate.
        self.cli.run("produce", "tb", stdin="x\ny\n")
        self.wait_rows("topics-table", lambda r: by_key(r)["tb"]["cols"]["messages"] == "3", "tb at 3 messages")
        self.wait_rows("topics-table", lambda r: by_key(r)["tb"]["text"]["rate"] != "-", "a rate for tb")

        # One topic's partitions, as topic describe shows them.
        described = self.cli.json("topic", "describe", "ta")[0]
        self.click('[data-testid="topics-table"] tr[data-key="ta"] a')
        self.wait_refreshes(1)
        parts = by_key(self.wait_rows("partitions-table", lambda r: len(r) == 3, "3 partitions of ta"))
        for p in described["partition_info"]:
            cols = parts[str(p["partition"])]["cols"]
            self.assertEqual(int(cols["start_offset"]), p["start_offset"])
            self.assertEqual(int(cols["end_offset"]), p["end_offset"])
            self.assertEqual(int(cols["bytes"]), p["bytes"])

    def test_groups_page_shows_what_group_list_and_describe_show(self):
        self.cli.run("topic", "create", "tg", "--partitions", "2")
        self.cli.run("produce", "tg", stdin="".join(f"m{i}\n" for i in range(10)))
        self.cli.run("group", "create", "g-lag", "--topic", "tg")
        self.cli.run("consume", "tg", "--group", "g-lag", "--max", "4", "--wait", "2000")
        listed = {g["group"]: g for g in self.cli.json("group", "list")}
        self.assertEqual(listed["g-lag"]["lag"], 6)
        self.open("groups")
        row = by_key(self.wait_rows("groups-table", lambda r: "g-lag" in by_key(r), "g-lag"))["g-lag"]["cols"]
        self.assertEqual(int(row["lag"]), listed["g-lag"]["lag"])
        self.assertEqual(int(row["dead_letters"]), listed["g-lag"]["dead_letters"])
        self.assertEqual(row["topics"], "tg")

        described = self.cli.json("group", "describe", "g-lag")[0]
        self.d.get(f"{self.broker.url}/#/groups/g-lag")
        parts = by_key(self.wait_rows("group-partitions-table", lambda r: len(r) == 2, "2 partitions"))
        for p in described["partitions"]:
            cols = parts[f"{p['topic']}/{p['partition']}"]["cols"]
            for field in ("acked", "end_offset", "lag", "dead"):
                self.assertEqual(int(cols[field]), p[field], field)

    def test_cluster_page_says_single_node(self):
        self.open("cluster")
        eventually(lambda: self.d.find_element("css selector", "[data-testid=cluster-health]").text == "healthy", 10,
                   "healthy")
        self.assertEqual(self.d.find_element("css selector", "[data-testid=cluster-mode]").text, "single node")


class Transactions(ConsoleCase):
    def prepare(self, body, group="pg-console", topic="tx-topic"):
        return self.cli.json("tx", "prepare", topic, body, "--group", group)[0]["txid"]

    def test_pages_commit_and_rollback_from_the_console(self):
        self.cli.run("topic", "create", "tx-topic", "--partitions", "1")
        txids = [self.prepare(f"tx body {i}") for i in range(55)]
        listed = {t["txid"]: t for t in self.cli.json("tx", "list")}
        self.assertTrue(set(txids) <= set(listed))

        self.open("transactions")
        page1 = self.wait_rows("tx-table", lambda r: len(r) == 50, "a first page of 50")
        for r in page1:
            t = listed[r["key"]]
            self.assertEqual(r["cols"]["state"], t["state"].lower())
            self.assertEqual(r["cols"]["producer_group"], t["producer_group"])
            self.assertEqual(r["cols"]["topics"], ",".join(t["topics"]).replace(",", ", "))
            self.assertEqual(int(r["cols"]["messages"]), t["messages"])
            self.assertEqual(int(r["cols"]["checks"]), t["check_count"])
        # The CLI lists in txid order as the console pages: the first 50 are the same.
        self.assertEqual([r["key"] for r in page1], sorted(listed)[:50])
        self.click('button[data-action="next"]')
        page2 = self.wait_rows("tx-table", lambda r: len(r) == len(listed) - 50, "the second page")
        self.assertEqual([r["key"] for r in page2], sorted(listed)[50:])
        self.click('button[data-action="prev"]')
        self.wait_rows("tx-table", lambda r: len(r) == 50, "back to the first page")

        # Cancel leaves the transaction prepared. Target and victim come from the first page:
        # txids are random, so txids[0] may well be on the second.
        target, victim = page1[0]["key"], page1[1]["key"]
        self.click(f'[data-testid="tx-table"] tr[data-key="{target}"] button[data-action="commit"]')
        text = self.confirm_dialog(ok=False)
        self.assertIn(target, text)
        self.assertEqual(self.cli.json("tx", "show", target)[0]["state"], "PREPARED")

        # Commit: the row leaves the list and the message can be consumed.
        self.click(f'[data-testid="tx-table"] tr[data-key="{target}"] button[data-action="commit"]')
        self.confirm_dialog(ok=True)
        self.wait_rows("tx-table", lambda r: target not in by_key(r), "the committed transaction to leave the list")
        self.assertEqual(self.cli.json("tx", "show", target)[0]["state"], "COMMITTED")
        consumed = self.cli.json("consume", "tx-topic", "--group", "tx-reader", "--max", "1", "--wait", "5000")
        self.assertEqual([m["body"] for m in consumed], [f"tx body {txids.index(target)}"])

        # Rollback: gone for good, nothing more to consume.
        self.click(f'[data-testid="tx-table"] tr[data-key="{victim}"] button[data-action="rollback"]')
        self.confirm_dialog(ok=True)
        self.wait_rows("tx-table", lambda r: victim not in by_key(r), "the rolled back transaction to leave the list")
        self.assertEqual(self.cli.json("tx", "show", victim)[0]["state"], "ROLLED_BACK")
        self.assertEqual(self.cli.json("consume", "tx-topic", "--group", "tx-reader", "--max", "1", "--wait", "500"), [])

    def test_refreshes_pause_while_a_dialog_is_open(self):
        self.cli.run("topic", "create", "tx-pause", "--partitions", "1")
        txid = self.prepare("pause", topic="tx-pause")
        self.d.get(f"{self.broker.url}/#/transactions?topic=tx-pause")
        self.wait_rows("tx-table", lambda r: txid in by_key(r), "the transaction")
        self.click(f'[data-testid="tx-table"] tr[data-key="{txid}"] button[data-action="rollback"]')
        eventually(lambda: self.d.execute_script("return document.getElementById('confirm-dialog').open"), 10, "dialog")
        before = self.refreshes()
        # The loop ticks, sees the dialog and says so instead of refreshing.
        eventually(lambda: self.d.find_element("id", "refresh-state").text == "waiting", 10, "refresh state 'waiting'")
        self.assertEqual(self.refreshes(), before)
        self.confirm_dialog(ok=False)
        self.wait_refreshes(before + 1)
        self.assertEqual(self.cli.json("tx", "show", txid)[0]["state"], "PREPARED")


class DeadLetters(ConsoleCase):
    def test_dead_letters_show_dlq_list_and_redrive_from_the_console(self):
        markup = '<img src=x id=injected onerror="document.title=1">'
        self.cli.run("topic", "create", "dl", "--partitions", "1")
        self.cli.run("produce", "dl", stdin=f"a\nb\n{markup}\n")
        # Delivered once, never acked: with max_attempts 1 each becomes a dead letter.
        self.cli.run("consume", "dl", "--group", "dg", "--max", "3", "--no-ack", "--wait", "3000")
        dead = eventually(lambda: (lambda x: x if len(x) == 3 else None)(self.cli.json("dlq", "list", "dg")), 20,
                          "3 dead letters")
        self.open("dead-letters/dg")
        rows = by_key(self.wait_rows("dlq-table", lambda r: len(r) == 3, "3 dead letters in the page"))
        for d in dead:
            cols = rows[d["id"]]["cols"]
            self.assertEqual(cols["topic"], d["topic"])
            self.assertEqual(int(cols["offset"]), d["offset"])
            self.assertEqual(int(cols["attempts"]), d["attempts"])
        # Text from the API stays text.
        self.assertIn(markup, [r["text"]["body"] for r in rows.values()])
        self.assertEqual(self.d.find_elements("id", "injected"), [])

        self.click('button[data-action="redrive"]')
        self.assertIn("dg", self.confirm_dialog(ok=True))
        self.wait_rows("dlq-table", lambda r: len(r) == 0, "an empty dead-letter list")
        self.assertEqual(self.cli.json("dlq", "list", "dg"), [])
        again = self.cli.json("consume", "dl", "--group", "dg", "--max", "3", "--wait", "5000")
        self.assertEqual(sorted(m["id"] for m in again), sorted(d["id"] for d in dead))


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


class WebhooksAndConnections(ConsoleCase):
    def test_webhooks_show_webhook_list_attempts_and_replay(self):
        server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        try:
            self.cli.run("topic", "create", "wh", "--partitions", "1")
            hook = self.cli.json("webhook", "create", "wh", "--url", f"http://127.0.0.1:{server.server_port}/hook")[0]
            self.cli.run("produce", "wh", stdin="one\ntwo\n")
            eventually(lambda: len(self.cli.json("webhook", "attempts", hook["id"])) == 2, 20, "2 attempts")
            listed = {w["id"]: w for w in self.cli.json("webhook", "list")}
            self.open("webhooks")
            row = by_key(self.wait_rows("webhooks-table", lambda r: hook["id"] in by_key(r), "the webhook"))[hook["id"]]
            self.assertEqual(row["cols"]["topic"], "wh")
            self.assertEqual(row["cols"]["url"], listed[hook["id"]]["url"])
            self.assertEqual(row["cols"]["state"], listed[hook["id"]]["state"])
            self.assertEqual(int(row["cols"]["backlog"]), listed[hook["id"]]["backlog"])
            self.assertEqual(int(row["cols"]["exhausted"]), listed[hook["id"]]["exhausted"])

            self.click(f'[data-testid="webhooks-table"] tr[data-key="{hook["id"]}"] a')
            attempts = self.cli.json("webhook", "attempts", hook["id"])
            rows = self.wait_rows("attempts-table", lambda r: len(r) == 2, "2 attempts in the log")
            self.assertEqual(sorted(r["cols"]["message"] for r in rows), sorted(a["message"] for a in attempts))
            self.assertEqual({r["cols"]["outcome"] for r in rows}, {a["outcome"] for a in attempts})

            self.click('button[data-action="replay"]')
            self.confirm_dialog(ok=True)
            replays = eventually(
                lambda: (lambda a: a if len(a) == 2 else None)(
                    [x for x in self.cli.json("webhook", "attempts", hook["id"]) if x["replay"]]),
                20, "2 replayed attempts")
            self.wait_rows("attempts-table", lambda r: len(r) == 4, "4 attempts in the log")
            self.assertEqual(len(replays), 2)
        finally:
            server.shutdown()
            server.server_close()

    def test_connections_show_client_and_producer_group(self):
        checker = self.cli.spawn("tx", "checker", "--group", "pg-conn", "--answer", "unknown")
        try:
            self.open("connections")
            rows = self.wait_rows("connections-table",
                                  lambda r: any(x["cols"]["producer_group"] == "pg-conn" for x in r),
                                  "the checker's connection")
            api = self.broker.http_json("GET", "/v1/connections")["connections"]
            mine = [c for c in api if c.get("producer_group") == "pg-conn"]
            self.assertEqual(len(mine), 1)
            row = [x for x in rows if x["cols"]["producer_group"] == "pg-conn"][0]
            self.assertEqual(row["cols"]["client_id"], mine[0]["client_id"])
            self.assertTrue(row["cols"]["client_id"])
        finally:
            checker.terminate()
            checker.wait(timeout=20)
        self.wait_rows("connections-table", lambda r: not any(x["cols"]["producer_group"] == "pg-conn" for x in r),
                       "the connection gone after the checker exited")


class EveryPage(ConsoleCase):
    PAGES = ("topics", "groups", "transactions", "dead-letters", "webhooks", "connections", "cluster")

    def test_every_page_loads_without_console_errors_at_desktop_and_phone_size(self):
        self.cli.run("topic", "create", "every", "--partitions", "2")
        self.cli.run("produce", "every", "hello")
        self.cli.run("group", "create", "every-g", "--topic", "every")
        for size, mobile in ((harness.DESKTOP, False), (harness.PHONE, True)):
            harness.set_viewport(self.d, size, mobile)
            for page in self.PAGES + ("topics/every", "groups/every-g"):
                self.open(page)
                self.wait_refreshes(2)
                self.assertEqual(harness.console_problems(self.d), [], f"console on {page} at {size}")
                # The page never scrolls sideways: wide tables scroll in their own box.
                overflow = self.d.execute_script(
                    "return document.documentElement.scrollWidth - document.documentElement.clientWidth")
                self.assertLessEqual(overflow, 0, f"{page} at {size} is wider than the window")

    def test_phone_menu_folds_the_pages(self):
        harness.set_viewport(self.d, harness.PHONE, True)
        self.open("topics")
        nav = self.d.find_element("id", "nav")
        self.assertFalse(nav.is_displayed())
        self.click("#menu-toggle")
        eventually(lambda: nav.is_displayed(), 5, "the menu open")
        self.click('nav a[data-page="cluster"]')
        eventually(lambda: self.d.execute_script("return document.body.dataset.page") == "cluster", 5, "cluster page")
        eventually(lambda: not nav.is_displayed(), 5, "the menu closed after choosing")

    def test_console_files_have_their_headers(self):
        import urllib.request
        for path, ctype in (("/", "text/html"), ("/js/app.js", "text/javascript"), ("/console.css", "text/css"),
                            ("/favicon.svg", "image/svg+xml")):
            with urllib.request.urlopen(self.broker.url + path) as r:
                self.assertTrue(r.headers["Content-Type"].startswith(ctype), path)
                self.assertIn("default-src 'none'", r.headers["Content-Security-Policy"])
                self.assertEqual(r.headers["Cache-Control"], "no-cache")
                self.assertEqual(r.headers["X-Content-Type-Options"], "nosniff")
                etag = r.headers["ETag"]
            req = urllib.request.Request(self.broker.url + path, headers={"If-None-Match": etag})
            with self.assertRaises(urllib.error.HTTPError) as e:
                urllib.request.urlopen(req)
            self.assertEqual(e.exception.code, 304, path)


def broker_has_auth():
    import subprocess
    out = subprocess.run([os.path.join(BIN_DIR, "txmq-broker"), "--help"], capture_output=True, text=True).stdout
    return "--admin-token-file" in out


class Auth(ConsoleCase):
    """With auth = true the console asks for a token, keeps it in sessionStorage, sends it as
    Bearer and asks again when the broker answers 401."""

    token = "txmq_" + os.urandom(16).hex()
    # The answers 401 that make the console ask are logged by Chromium as failed loads.
    allowed_console = ("401 (Unauthorized)",)

    @classmethod
    def setUpClass(cls):
        if not broker_has_auth():
            raise unittest.SkipTest("this txmq-broker has no auth (--admin-token-file): the token prompt is not testable")
        import tempfile
        cls.token_dir = tempfile.mkdtemp(prefix="txmq-console-token-")
        path = os.path.join(cls.token_dir, "admin.token")
        with open(path, "w") as f:
            f.write(cls.token + "\n")
        os.chmod(path, 0o600)
        cls.broker_args = ConsoleCase.broker_args + ("--auth", "true", "--admin-token-file", path)
        super().setUpClass()
        cls.cli = harness.Cli(BIN_DIR, cls.broker, token=cls.token)

    def tearDown(self):
        problems = harness.console_problems(self.d, allow=self.allowed_console)
        self.assertEqual(problems, [], "browser console")

    def dialog_open(self):
        return self.d.execute_script("return document.getElementById('token-dialog').open")

    def enter_token(self, token):
        eventually(self.dialog_open, 15, "the token prompt")
        field = self.d.find_element("id", "token-input")
        field.clear()
        field.send_keys(token)
        self.click("#token-ok")

    def test_token_prompt_session_storage_and_401_again(self):
        import urllib.request
        # The console's own files need no token (they hold no data); the API does.
        with urllib.request.urlopen(self.broker.url + "/") as r:
            self.assertEqual(r.status, 200)
        with self.assertRaises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(self.broker.url + "/v1/topics")
        self.assertEqual(e.exception.code, 401)

        self.cli.run("topic", "create", "secured", "--partitions", "1")
        self.d.get(f"{self.broker.url}/#/topics")
        eventually(self.dialog_open, 15, "the token prompt")
        self.assertEqual(self.refreshes(), 0)

        # A wrong token: asked again, saying why.
        self.enter_token("txmq_wrong")
        eventually(lambda: self.dialog_open() and self.d.find_element("id", "token-error").is_displayed(), 15,
                   "the prompt again with its error")
        self.assertIn("refused", self.d.find_element("id", "token-error").text)

        self.enter_token(self.token)
        self.wait_refreshes(1)
        self.wait_rows("topics-table", lambda r: "secured" in by_key(r), "the topic behind auth")
        self.assertEqual(self.d.execute_script("return sessionStorage.getItem('txmq.token')"), self.token)
        self.assertFalse(self.dialog_open())

        # Kept for the tab's session: a reload asks nothing.
        self.d.refresh()
        self.wait_refreshes(1)
        self.assertFalse(self.dialog_open())

        # A token the broker stops accepting (here: replaced in storage) is asked for again.
        self.d.execute_script("sessionStorage.setItem('txmq.token', 'txmq_revoked')")
        eventually(self.dialog_open, 15, "the prompt after a 401")
        self.enter_token(self.token)
        n = self.refreshes()
        self.wait_refreshes(n + 1)

        # Forget token: the next refresh asks.
        self.click("#forget-token")
        eventually(self.dialog_open, 15, "the prompt after forgetting the token")
        self.assertIsNone(self.d.execute_script("return sessionStorage.getItem('txmq.token')"))
        self.enter_token(self.token)
        self.wait_refreshes(self.refreshes() + 1)


class ClusterConsole(ConsoleCase):
    """Cluster mode (docs/cluster.md "The admin HTTP API and the console in a cluster"): etcd
    and three brokers; the console of node 1 shows the nodes and partitions, lists transactions
    homed on every node, and says so when part of the cluster does not answer (a node SIGKILLed
    that alone held a partition) instead of showing the rest as whole."""

    ETCD = "/usr/bin/etcd"

    @classmethod
    def setUpClass(cls):
        if not os.path.exists(cls.ETCD):
            raise unittest.SkipTest("no /usr/bin/etcd (scripts/setup.sh installs etcd-server)")
        import subprocess
        import tempfile
        import urllib.request
        cls.etcd_dir = tempfile.mkdtemp(prefix="txmq-console-etcd-")
        client, peer = harness.free_port(), harness.free_port()
        cls.etcd_url = f"http://127.0.0.1:{client}"
        cls.etcd_log = open(os.path.join(cls.etcd_dir, "etcd.log"), "wb")
        cls.etcd = subprocess.Popen(
            [cls.ETCD, "--name", "t", "--data-dir", os.path.join(cls.etcd_dir, "data"),
             "--listen-client-urls", cls.etcd_url, "--advertise-client-urls", cls.etcd_url,
             "--listen-peer-urls", f"http://127.0.0.1:{peer}", "--initial-advertise-peer-urls",
             f"http://127.0.0.1:{peer}", "--initial-cluster", f"t=http://127.0.0.1:{peer}"],
            stdout=cls.etcd_log, stderr=subprocess.STDOUT)

        def etcd_up():
            try:
                with urllib.request.urlopen(cls.etcd_url + "/health", timeout=1) as r:
                    return r.status == 200
            except OSError:
                return False
        cls.brokers = []
        try:
            eventually(etcd_up, 30, "etcd")
            for node in (1, 2, 3):
                cls.brokers.append(harness.Broker(BIN_DIR, ConsoleCase.broker_args + (
                    "--cluster-etcd", cls.etcd_url, "--node-id", str(node), "--node-lease-ttl", "3s")))
            cls.broker = cls.brokers[0]
            cls.cli = harness.Cli(BIN_DIR, cls.broker)
            cls.bootstrap = ",".join(b.address for b in cls.brokers)
            cls.d = harness.chrome()
        except Exception:
            cls.tearDownClass()
            raise

    @classmethod
    def tearDownClass(cls):
        if getattr(cls, "d", None) is not None:
            harness.quit_chrome(cls.d)
        for b in getattr(cls, "brokers", []):
            b.stop()
        cls.etcd.kill()
        cls.etcd.wait()
        cls.etcd_log.close()
        import shutil
        shutil.rmtree(cls.etcd_dir, ignore_errors=True)

    def txmq(self, *args):
        import subprocess
        return subprocess.run([os.path.join(BIN_DIR, "txmq"), "--broker", self.bootstrap, "--json", *args],
                              capture_output=True, text=True, timeout=60)

    def test_cluster_page_transactions_and_a_partial_view(self):
        # A replicas-1 topic of 3 partitions: each partition's only copy on its leader.
        eventually(lambda: self.txmq("topic", "create", "spread", "--partitions", "3", "--replicas", "1").returncode == 0,
                   30, "topic create with three live nodes")

        def metadata():
            return self.broker.http_json("GET", "/v1/cluster")

        def leaders():
            m = metadata()
            t = [t for t in m["topics"] if t["name"] == "spread"]
            return {p["partition"]: p["leader"] for p in t[0]["partition_info"]} if t else {}
        eventually(lambda: len(leaders()) == 3 and all(v > 0 for v in leaders().values()), 30, "leaders")

        self.open("cluster")
        self.assertTrue(self.d.find_element("css selector", "[data-testid=cluster-mode]").text.startswith("cluster"))
        self.wait_rows("cluster-nodes", lambda r: len(r) == 3, "three nodes")
        self.wait_rows("cluster-partitions", lambda r: {"spread/0", "spread/1", "spread/2"} <= set(by_key(r)), "partitions")

        # One transaction homed in each partition, prepared through its leader.
        txids = set()
        for i in range(60):
            key = f"k{i}"
            p = self.txmq("tx", "prepare", "spread", "body", "--group", "pg", "--key", key)
            if p.returncode == 0:
                txids.add(json.loads(p.stdout.splitlines()[0])["txid"])
            if len(txids) >= 6:
                break
        self.open("transactions")
        self.wait_rows("tx-table", lambda r: txids <= set(by_key(r)), "every node's transactions")
        partial = "const b = document.querySelector('[data-testid=partial-banner]'); return b && !b.hidden ? b.textContent : ''"
        self.assertEqual(self.d.execute_script(partial), "")

        # A node leading a partition (not the one serving the console) SIGKILLed: the page
        # keeps what answered and names what did not.
        lead = leaders()
        victim = next(n for n in (2, 3) if n in lead.values())
        self.brokers[victim - 1].proc.kill()
        self.brokers[victim - 1].proc.wait()
        text = eventually(lambda: self.d.execute_script(partial), 30, "the partial-view banner")
        self.assertIn("Partial view of the cluster", text)
        gone = [p for p, n in lead.items() if n == victim]
        self.assertIn(f"spread/{gone[0]}", text)
        banner = self.d.execute_script(
            "const b = document.querySelector('[data-testid=error-banner]'); return b && !b.hidden ? b.textContent : ''")
        self.assertEqual(banner, "")


def main():
    global BIN_DIR
    p = argparse.ArgumentParser()
    p.add_argument("--bin-dir", required=True)
    args, rest = p.parse_known_args()
    BIN_DIR = os.path.abspath(args.bin_dir)
    prog = unittest.main(argv=[sys.argv[0], *rest], verbosity=2, exit=False)
    r = prog.result
    if not r.wasSuccessful():
        sys.exit(1)
    # Everything skipped (the broker lacks the feature): tell ctest, which shows it as skipped.
    sys.exit(77 if r.skipped and r.testsRun <= len(r.skipped) else 0)


if __name__ == "__main__":
    main()
