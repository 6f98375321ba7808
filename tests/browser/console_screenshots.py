#!/usr/bin/env python3
"""Screenshots of every console page (docs/console/): a broker of its own with a little of
everything (topics with traffic, groups with lag and dead letters, prepared and abandoned
transactions, webhooks with delivered and failed attempts, connected producers), each page at
1280x800 and a few at phone size (390x844).

Usage: console_screenshots.py --bin-dir BUILD/bin --out docs/console"""

import argparse
import http.server
import os
import sys
import threading

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import eventually  # noqa: E402


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", "0")))
        self.send_response(500 if "fail" in self.path else 204)
        self.end_headers()

    def log_message(self, *args):
        pass


def populate(cli, receiver_port):
    for name, parts in (("payments", 2), ("shipments", 2), ("audit-log", 1)):
        cli.run("topic", "create", name, "--partitions", str(parts))
    for name, n in (("orders", 120), ("payments", 45), ("shipments", 30), ("audit-log", 8)):
        cli.run("produce", name, stdin="".join(f'{{"n": {i}, "source": "{name}"}}\n' for i in range(n)))
    cli.run("group", "create", "billing", "--topic", "orders")
    cli.run("group", "create", "shipping", "--topic", "orders")
    cli.run("group", "create", "ledger", "--topic", "payments")
    cli.run("consume", "orders", "--group", "billing", "--max", "90", "--wait", "3000")
    cli.run("consume", "orders", "--group", "shipping", "--max", "20", "--wait", "3000")
    cli.run("consume", "payments", "--group", "ledger", "--max", "5", "--no-ack", "--wait", "3000")
    eventually(lambda: len(cli.json("dlq", "list", "ledger")) == 5, 30, "dead letters in ledger")
    for i in range(6):
        cli.run("tx", "prepare", "payments", f'{{"payment": {i}, "amount": {100 + i}}}', "--group", "payments-svc",
                "--key", f"account-{i % 3}")
    ok = cli.json("webhook", "create", "orders", "--url", f"http://127.0.0.1:{receiver_port}/hooks/orders")[0]
    bad = cli.json("webhook", "create", "shipments", "--url", f"http://127.0.0.1:{receiver_port}/fail",
                   "--schedule", "1s,1s")[0]
    cli.run("produce", "orders", stdin="".join(f'{{"late": {i}}}\n' for i in range(4)))
    cli.run("produce", "shipments", stdin='{"parcel": 1}\n{"parcel": 2}\n')
    eventually(lambda: len(cli.json("webhook", "attempts", bad["id"])) >= 6, 30, "failed webhook attempts")
    eventually(lambda: len(cli.json("webhook", "attempts", ok["id"])) >= 4, 30, "delivered webhook attempts")
    return ok["id"], bad["id"]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin-dir", required=True)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    # First legacy-svc's transactions, abandoned after one undecided check (1 s); then the
    # broker again with the default clocks, so the later ones stay prepared.
    broker = harness.Broker(os.path.abspath(a.bin_dir), ("--tx-timeout", "1s", "--tx-check-schedule", "1s",
                                                          "--tx-max-checks", "1"))
    cli = harness.Cli(os.path.abspath(a.bin_dir), broker)
    checker = None
    d = None
    try:
        cli.run("topic", "create", "orders", "--partitions", "4")
        for i in range(3):
            cli.run("tx", "prepare", "orders", f'{{"order": {i}}}', "--group", "legacy-svc")
        eventually(lambda: len(cli.json("tx", "list", "--state", "abandoned")) == 3, 30, "abandoned transactions")
        broker.restart(("--ack-deadline", "300ms", "--max-attempts", "1"))
        checker = cli.spawn("tx", "checker", "--group", "payments-svc", "--answer", "unknown")
        ok_id, bad_id = populate(cli, server.server_port)
        d = harness.chrome()
        shots = [
            ("topics", "topics"), ("topic", "topics/orders"), ("groups", "groups"), ("group", "groups/billing"),
            ("transactions", "transactions"), ("dead-letters", "dead-letters/ledger"), ("webhooks", "webhooks"),
            ("webhook-attempts", f"webhooks/{bad_id}"), ("connections", "connections"), ("cluster", "cluster"),
        ]
        for name, route in shots:
            d.get(f"{broker.url}/#/{route}")
            eventually(lambda: int(d.execute_script("return document.body.dataset.refreshes || '0'")) >= 2, 20, route)
            d.save_screenshot(os.path.join(a.out, f"{name}.png"))
        # A confirmation, as an operator sees it before committing.
        d.get(f"{broker.url}/#/transactions")
        eventually(lambda: d.find_element("css selector", 'button[data-action="commit"]'), 20, "a commit button")
        d.find_element("css selector", 'button[data-action="commit"]').click()
        eventually(lambda: d.execute_script("return document.getElementById('confirm-dialog').open"), 10, "dialog")
        d.save_screenshot(os.path.join(a.out, "transactions-commit.png"))
        d.find_element("id", "confirm-cancel").click()
        harness.set_viewport(d, harness.PHONE, True)
        for name, route in (("phone-topics", "topics"), ("phone-transactions", "transactions")):
            d.get(f"{broker.url}/#/{route}")
            eventually(lambda: int(d.execute_script("return document.body.dataset.refreshes || '0'")) >= 2, 20, route)
            d.save_screenshot(os.path.join(a.out, f"{name}.png"))
        problems = harness.console_problems(d)
        if problems:
            print("browser console:", *problems, sep="\n  ", file=sys.stderr)
            return 1
        print(f"screenshots in {a.out}: {', '.join(sorted(os.listdir(a.out)))}")
        return 0
    finally:
        if d is not None:
            harness.quit_chrome(d)
        if checker is not None:
            checker.terminate()
            checker.wait(timeout=20)
        broker.stop()
        server.shutdown()


if __name__ == "__main__":
    sys.exit(main())
