#!/usr/bin/env python3
"""Console page load time with 1,000 topics and 10,000 pending transactions (docs/BENCHMARKS.md):
a broker of its own is filled through the CLI, then each page is loaded in a fresh headless
Chromium (cold cache) `--runs` times; the figures are medians. Measured in the browser:
Navigation Timing (DOMContentLoaded, load) and the console's own mark of the first table
rendered with data (navigation start to the end of the first refresh), plus the API call's
own time from Resource Timing. The transactions page asks for one page of 50, never all.

Usage: console_load_bench.py --bin-dir BUILD/bin [--topics 1000] [--transactions 10000] [--runs 3]"""

import argparse
import concurrent.futures
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402
from harness import eventually  # noqa: E402

MEASURE_JS = """
const nav = performance.getEntriesByType('navigation')[0];
const api = performance.getEntriesByType('resource').filter((e) => e.name.includes('/v1/'));
return {
  dom_content_loaded_ms: nav.domContentLoadedEventEnd,
  load_ms: nav.loadEventEnd,
  first_render_ms: Number(document.documentElement.dataset.firstRenderMs),
  api_ms: api.length ? api[0].duration : null,
  api_bytes: api.length ? api[0].transferSize : null,
  rows: document.querySelectorAll('main tbody tr[data-key]').length,
};
"""


def fill(cli, topics, transactions, workers=8):
    def run(args):
        cli.run(*args)

    with concurrent.futures.ThreadPoolExecutor(workers) as pool:
        list(pool.map(run, [("topic", "create", f"topic-{i:04d}", "--partitions", "1") for i in range(topics)]))
        # A message in every 10th topic, so sizes and counts are not all zero.
        list(pool.map(run, [("produce", f"topic-{i:04d}", f"hello {i}") for i in range(0, topics, 10)]))
        list(pool.map(run, [("tx", "prepare", f"topic-{i % topics:04d}", f"pending {i}", "--group", f"pg-{i % 20}")
                            for i in range(transactions)]))


def measure(url, route, runs):
    out = []
    for _ in range(runs):
        d = harness.chrome()
        try:
            d.get(f"{url}/#/{route}")
            eventually(lambda: d.execute_script("return document.documentElement.dataset.firstRenderMs"), 60,
                       f"the first render of {route}")
            eventually(lambda: d.execute_script("return performance.getEntriesByType('navigation')[0].loadEventEnd > 0"),
                       30, "the load event")
            m = d.execute_script(MEASURE_JS)
            problems = harness.console_problems(d)
            if problems:
                raise AssertionError(f"browser console on {route}: {problems}")
            out.append(m)
        finally:
            harness.quit_chrome(d)
    med = {k: statistics.median([r[k] for r in out]) for k in out[0] if out[0][k] is not None}
    return {"page": route, "runs": out, "median": med}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--bin-dir", required=True)
    p.add_argument("--topics", type=int, default=1000)
    p.add_argument("--transactions", type=int, default=10000)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    bin_dir = os.path.abspath(a.bin_dir)
    broker = harness.Broker(bin_dir, ("--tx-timeout", "1h"))
    try:
        cli = harness.Cli(bin_dir, broker)
        t0 = time.monotonic()
        fill(cli, a.topics, a.transactions)
        listed_topics = len(cli.json("topic", "list"))
        pending, after = 0, ""
        while True:  # what the broker holds, counted through the API's pages of 1,000
            page = broker.http_json("GET", "/v1/transactions?limit=1000" + (f"&after={after}" if after else ""))
            pending += len(page.get("txs", []))
            after = page.get("next_after_txid", "")
            if not after:
                break
        print(json.dumps({"filled_s": round(time.monotonic() - t0, 1), "topics": listed_topics,
                          "pending_transactions": pending}), flush=True)
        results = [measure(broker.url, "topics", a.runs), measure(broker.url, "transactions", a.runs)]
        for r in results:
            print(json.dumps({"page": r["page"], "topics": a.topics, "transactions": a.transactions,
                              "runs": a.runs, "median": {k: round(v, 1) for k, v in r["median"].items()},
                              "first_render_ms_each": [x["first_render_ms"] for x in r["runs"]]}))
        return 0
    finally:
        broker.stop()


if __name__ == "__main__":
    sys.exit(main())
