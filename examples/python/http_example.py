"""Producing, consuming and acknowledging through txmq's HTTP/JSON API (docs/http-api.md),
with the Python standard library only (urllib).

    python3 examples/python/http_example.py --http http://127.0.0.1:7879 --topic orders --count 10

Produces `count` messages (answered after fsync), then consumes them as group `--group` with
long polls and acknowledges each batch by its delivery handles. With auth on, pass the token
with --token or TXMQ_TOKEN. Prints one JSON line per message produced and consumed."""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request


class TxmqHttp:
    def __init__(self, base_url, token=None, timeout=60):
        self.base = base_url.rstrip("/") + "/v1"
        self.token = token
        self.timeout = timeout

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.base + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                return json.loads(r.read())
        except urllib.error.HTTPError as e:
            # Every error is {"error": CODE, "message": TEXT}; branch on the code.
            err = json.loads(e.read() or b"{}")
            raise RuntimeError(f"{method} {path}: HTTP {e.code} {err.get('error')}: {err.get('message')}") from None

    def produce(self, topic, messages):
        return self.call("POST", f"/topics/{topic}/messages", {"messages": messages})["messages"]

    def fetch(self, group, topic, max=100, wait_ms=5000):
        return self.call("POST", f"/groups/{group}/fetch", {"topic": topic, "max": max, "wait_ms": wait_ms})["deliveries"]

    def ack(self, group, deliveries):
        return self.call("POST", f"/groups/{group}/ack", {"deliveries": [d["delivery"] for d in deliveries]})["results"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--http", default=os.environ.get("TXMQ_HTTP", "http://127.0.0.1:7879"))
    ap.add_argument("--token", default=os.environ.get("TXMQ_TOKEN"))
    ap.add_argument("--topic", default="orders")
    ap.add_argument("--group", default="http-example")
    ap.add_argument("--count", type=int, default=10)
    args = ap.parse_args()
    api = TxmqHttp(args.http, args.token)

    # Same key, same partition: the group receives these in order, one at a time per key.
    sent = api.produce(args.topic, [{"key": "customer-7", "headers": {"content-type": "application/json"},
                                     "body": json.dumps({"order": i})} for i in range(args.count)])
    for m in sent:
        print(json.dumps({"produced": m["id"], "partition": m["partition"], "offset": m["offset"]}), flush=True)

    received = 0
    while received < args.count:
        deliveries = api.fetch(args.group, args.topic)
        if not deliveries:
            print(f"nothing arrived within the long poll; {received} of {args.count} consumed", file=sys.stderr)
            return 1
        for d in deliveries:
            print(json.dumps({"consumed": d["id"], "attempt": d["attempt"], "body": d.get("body")}), flush=True)
        results = api.ack(args.group, deliveries)
        failed = [r for r in results if not r["ok"]]
        if failed:
            print(f"acks refused: {failed}", file=sys.stderr)
            return 1
        received += len(deliveries)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except RuntimeError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
