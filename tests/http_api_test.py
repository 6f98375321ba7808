"""The HTTP/JSON API (docs/http-api.md) against the real broker: the same semantics as the
wire protocol (produce after fsync with dedupe, fetch with long poll and ack deadlines, ack and
nack by delivery handle, per-key order), the admin routes, typed errors and bounded bodies."""

import base64
import os
import re
import sys
import threading
import time
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "python"))
from txmq_testing import Broker, call, cli, eventually  # noqa: E402


class HttpApiTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.broker = Broker("--ack-deadline", "1s", "--retry-schedule", "100ms", "--max-attempts", "2",
                            "--max-message-bytes", "1KiB", "--max-frame-bytes", "80KiB").start()
        cls.url = cls.broker.url + "/v1"

    @classmethod
    def tearDownClass(cls):
        cls.broker.cleanup()

    def post(self, path, body=None, **kw):
        return call("POST", self.url + path, body, **kw)

    def get(self, path):
        return call("GET", self.url + path)

    def produce(self, topic, messages):
        status, body, _ = self.post(f"/topics/{topic}/messages", {"messages": messages})
        self.assertEqual(status, 200, body)
        return body["messages"]

    def fetch(self, group, topic, max=100, wait_ms=0, **extra):
        status, body, _ = self.post(f"/groups/{group}/fetch", dict(topic=topic, max=max, wait_ms=wait_ms, **extra))
        self.assertEqual(status, 200, body)
        return body["deliveries"]

    def test_produce_fetch_ack_with_text_and_binary_bodies(self):
        out = self.produce("t-basic", [{"key": "k", "headers": {"h": "v"}, "body": "héllo"},
                                       {"body_base64": base64.b64encode(b"\x00\xffbin").decode()}])
        self.assertEqual(len(out), 2)
        for m in out:
            self.assertRegex(m["id"], r"^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$")
            self.assertFalse(m["duplicate"])
        ds = self.fetch("g-basic", "t-basic")
        self.assertEqual(len(ds), 2)
        by_id = {d["id"]: d for d in ds}
        text = by_id[out[0]["id"]]
        self.assertEqual(text["body"], "héllo")
        self.assertEqual(text["key"], "k")
        self.assertEqual(text["headers"], {"h": "v"})
        self.assertEqual((text["partition"], text["offset"]), (out[0]["partition"], out[0]["offset"]))
        self.assertEqual(text["attempt"], 1)
        self.assertEqual(base64.b64decode(by_id[out[1]["id"]]["body_base64"]), b"\x00\xffbin")
        status, res, _ = self.post("/groups/g-basic/ack", {"deliveries": [d["delivery"] for d in ds]})
        self.assertEqual(status, 200, res)
        self.assertTrue(all(r["ok"] for r in res["results"]), res)
        # Acked: a second ack of the same handles is UNKNOWN_DELIVERY per handle, nothing comes again.
        status, res, _ = self.post("/groups/g-basic/ack", {"deliveries": [ds[0]["delivery"]]})
        self.assertEqual(res["results"][0], {"delivery": ds[0]["delivery"], "ok": False, "error": "UNKNOWN_DELIVERY"})
        self.assertEqual(self.fetch("g-basic", "t-basic", wait_ms=300), [])
        status, group, _ = self.get("/groups/g-basic")
        self.assertEqual(status, 200)
        self.assertEqual(sum(p["lag"] for p in group["partitions"]), 0)

    def test_dedupe_by_id(self):
        mid = "01890a5d-ac96-774b-bcce-b302099a8057"
        first = self.produce("t-dedupe", [{"id": mid, "body": "once"}])[0]
        again = self.produce("t-dedupe", [{"id": mid, "body": "once"}])[0]
        self.assertFalse(first["duplicate"])
        self.assertTrue(again["duplicate"])
        self.assertEqual((first["partition"], first["offset"]), (again["partition"], again["offset"]))
        self.assertEqual(len(self.fetch("g-dedupe", "t-dedupe", wait_ms=200)), 1)

    def test_long_poll_answers_when_a_message_arrives(self):
        self.produce("t-poll", [{"body": "warm-up"}])
        first = self.fetch("g-poll", "t-poll")
        self.post("/groups/g-poll/ack", {"deliveries": [d["delivery"] for d in first]})
        result = {}

        def poll():
            started = time.monotonic()
            result["deliveries"] = self.fetch("g-poll", "t-poll", wait_ms=20000)
            result["took"] = time.monotonic() - started
        t = threading.Thread(target=poll)
        t.start()
        # While the long poll is parked, the admin port (same io thread) keeps answering.
        eventually(lambda: self.get("/groups/g-poll")[0] == 200, 5, "another request during the long poll")
        self.produce("t-poll", [{"body": "wake"}])
        t.join(25)
        self.assertFalse(t.is_alive())
        self.assertEqual([d["body"] for d in result["deliveries"]], ["wake"])
        self.assertLess(result["took"], 15)

    def test_long_poll_times_out_empty(self):
        self.produce("t-empty", [{"body": "x"}])
        self.fetch("g-empty", "t-empty")  # takes it; no ack
        started = time.monotonic()
        self.assertEqual(self.fetch("g-empty", "t-empty", wait_ms=300, ack_deadline_ms=60000), [])
        self.assertGreaterEqual(time.monotonic() - started, 0.25)

    def test_ack_deadline_redelivers_and_nack_then_dead_letter(self):
        self.produce("t-retry", [{"body": "again"}])
        first = self.fetch("g-retry", "t-retry", ack_deadline_ms=300)
        self.assertEqual(first[0]["attempt"], 1)
        second = eventually(lambda: self.fetch("g-retry", "t-retry", wait_ms=500), 10, "the redelivery")
        self.assertEqual(second[0]["attempt"], 2)
        self.assertNotEqual(first[0]["delivery"], second[0]["delivery"])
        # The first delivery's handle no longer settles anything.
        status, res, _ = self.post("/groups/g-retry/ack", {"deliveries": [first[0]["delivery"]]})
        self.assertEqual(res["results"][0]["error"], "UNKNOWN_DELIVERY")
        # max_attempts is 2: a nack of the second attempt dead-letters it.
        status, res, _ = self.post("/groups/g-retry/nack", {"deliveries": [second[0]["delivery"]], "delay_ms": 0})
        self.assertTrue(res["results"][0]["ok"], res)
        letters = eventually(lambda: self.get("/groups/g-retry/dead-letters")[1]["dead_letters"], 10, "a dead letter")
        self.assertEqual(letters[0]["message"]["body"], "again")
        status, red, _ = self.post("/groups/g-retry/dead-letters/redrive")
        self.assertEqual((status, red["redriven"]), (200, 1))
        again = eventually(lambda: self.fetch("g-retry", "t-retry", wait_ms=500), 10, "the redriven message")
        self.assertEqual(again[0]["body"], "again")

    def test_per_key_order_is_held(self):
        self.produce("t-order", [{"key": "same", "body": str(i)} for i in range(5)])
        seen = []
        for _ in range(5):
            # Only the oldest unacked message of the key is ever handed out.
            ds = self.fetch("g-order", "t-order", wait_ms=5000)
            self.assertEqual(len(ds), 1, ds)
            seen.append(ds[0]["body"])
            self.post("/groups/g-order/ack", {"deliveries": [ds[0]["delivery"]]})
        self.assertEqual(seen, ["0", "1", "2", "3", "4"])

    def test_errors_are_typed(self):
        status, body, _ = self.post("/topics/t-err/messages", raw=b"{not json")
        self.assertEqual((status, body["error"]), (400, "INVALID_ARGUMENT"))
        status, body, _ = self.post("/topics/t-err/messages", {"messages": [{"bdy": "x"}]})
        self.assertEqual((status, body["error"]), (400, "INVALID_ARGUMENT"))
        self.assertIn("messages[0].bdy", body["message"])
        status, body, _ = self.post("/topics/t-err/messages", {"messages": [{"topic": "other", "body": "x"}]})
        self.assertEqual((status, body["error"]), (400, "INVALID_ARGUMENT"), body)
        status, body, _ = self.post("/topics/t-err/messages", {"messages": [{"body": "x" * 2000}]})
        self.assertEqual((status, body["error"]), (413, "MESSAGE_TOO_LARGE"))
        status, body, _ = self.post("/topics/t-err/messages", {"messages": [{"body": "x" * 100_000}]})
        self.assertEqual(status, 413)  # the body is above max_frame_bytes: refused before parsing
        status, body, _ = self.get("/topics/no-such-topic")
        self.assertEqual((status, body["error"]), (404, "UNKNOWN_TOPIC"))
        status, body, _ = self.get("/groups/no-such-group")
        self.assertEqual((status, body["error"]), (404, "UNKNOWN_GROUP"))
        status, body, _ = self.post("/groups/g/fetch", {"topic": "no-such-topic"})
        self.assertEqual((status, body["error"]), (404, "UNKNOWN_TOPIC"))
        status, body, _ = self.post("/groups/g/ack", {"deliveries": ["not-a-handle"]})
        self.assertEqual((status, body["error"]), (400, "INVALID_ARGUMENT"))
        status, body, _ = self.post("/topics", {"name": "t-exists", "partitions": 2})
        self.assertEqual(status, 200, body)
        status, body, _ = self.post("/topics", {"name": "t-exists", "partitions": 3})
        self.assertEqual((status, body["error"]), (409, "TOPIC_EXISTS"))
        status, body, _ = self.get("/transactions/01890a5d-ac96-474b-bcce-b302099a8057")
        self.assertEqual((status, body["error"]), (404, "UNKNOWN_TX"))
        status, body, hdrs = call("PUT", self.url + "/topics", {})
        self.assertEqual(status, 405)
        self.assertIn("GET", hdrs.get("Allow", ""))
        status, body, _ = self.get("/nothing-here")
        self.assertEqual(status, 404)

    def test_topics_groups_connections(self):
        status, info, _ = self.post("/topics", {"name": "t-admin", "partitions": 3, "retention_ms": 60000})
        self.assertEqual((status, info["name"], info["partitions"]), (200, "t-admin", 3))
        status, listing, _ = self.get("/topics")
        self.assertIn("t-admin", [t["name"] for t in listing["topics"]])
        status, one, _ = self.get("/topics/t-admin")
        self.assertEqual(len(one["partition_info"]), 3)
        status, g, _ = self.post("/groups", {"group": "g-admin", "topic": "t-admin", "from_latest": True})
        self.assertEqual((status, g["name"]), (200, "g-admin"))
        self.assertIn("g-admin", [x["name"] for x in self.get("/groups")[1]["groups"]])
        # A wire client (the CLI's consume, parked in a long poll) shows in the connection list.
        import subprocess
        consumer = subprocess.Popen([os.path.join(os.environ["TXMQ_BIN_DIR"], "txmq"), "--broker", self.broker.address,
                                     "consume", "t-admin", "--group", "g-conn", "--max", "1", "--wait", "20000"],
                                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            conns = eventually(lambda: self.get("/connections")[1]["connections"], 10, "a connection")
            self.assertTrue(all(c["peer"].startswith("127.0.0.1:") for c in conns), conns)
        finally:
            consumer.kill()
            consumer.wait()

    def test_patch_topic_changes_its_retention(self):
        status, info, _ = self.post("/topics", {"name": "t-alter", "partitions": 1, "retention_ms": 60000})
        self.assertEqual(status, 200, info)
        status, info, _ = call("PATCH", self.url + "/topics/t-alter", {"retention_bytes": 4096})
        self.assertEqual((status, info["retention_ms"], info["retention_bytes"]), (200, 60000, 4096), info)
        self.assertEqual(self.get("/topics/t-alter")[1]["retention_bytes"], 4096)
        # A single broker has no replicas: min_insync_replicas is refused, as is an unknown topic.
        status, body, _ = call("PATCH", self.url + "/topics/t-alter", {"min_insync_replicas": 2})
        self.assertEqual((status, body["error"]), (400, "INVALID_ARGUMENT"), body)
        status, body, _ = call("PATCH", self.url + "/topics/no-such-topic", {"retention_ms": 1000})
        self.assertEqual((status, body["error"]), (404, "UNKNOWN_TOPIC"), body)
        status, body, _ = call("PATCH", self.url + "/topics/t-alter", {"retention": 1})
        self.assertEqual((status, body["error"]), (400, "INVALID_ARGUMENT"), body)

    def test_transactions_commit_from_http_makes_the_message_consumable(self):
        code, out, err = cli(self.broker, "tx", "prepare", "t-tx", "half", "--group", "pg-http")
        self.assertEqual(code, 0, err)
        txid = re.search(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", out).group(0)
        status, listing, _ = self.get("/transactions?state=prepared")
        self.assertEqual(status, 200, listing)
        self.assertIn(txid, [t["txid"] for t in listing["txs"]])
        status, tx, _ = self.get(f"/transactions/{txid}")
        self.assertEqual((tx["state"], tx["producer_group"], tx["topics"]), ("PREPARED", "pg-http", ["t-tx"]))
        self.assertEqual(self.fetch("g-tx", "t-tx"), [])
        status, end, _ = self.post(f"/transactions/{txid}/commit")
        self.assertEqual((status, end["state"]), (200, "COMMITTED"), end)
        self.assertEqual([d["body"] for d in self.fetch("g-tx", "t-tx", wait_ms=2000)], ["half"])
        status, body, _ = self.post(f"/transactions/{txid}/rollback")
        self.assertEqual((status, body["error"]), (409, "TX_ALREADY_RESOLVED"))
        status, listing, _ = self.get("/transactions?state=all")
        self.assertEqual([t["state"] for t in listing["txs"] if t["txid"] == txid], ["COMMITTED"])
        status, body, _ = self.get("/transactions?state=bogus")
        self.assertEqual(status, 400)

    def test_webhooks_admin(self):
        self.post("/topics", {"name": "t-wh"})
        status, w, _ = self.post("/webhooks", {"topic": "t-wh", "url": "http://127.0.0.1:9/hook", "timeout_ms": 1000,
                                              "payload": "WEBHOOK_PAYLOAD_ENVELOPE"})
        self.assertEqual(status, 200, w)
        self.assertTrue(w["id"].startswith("wh_"))
        self.assertTrue(w["secrets"][0]["secret"].startswith("whsec_"))
        self.assertEqual(w["payload"], "WEBHOOK_PAYLOAD_ENVELOPE")
        listed = [x for x in self.get("/webhooks")[1]["webhooks"] if x["id"] == w["id"]]
        self.assertEqual(len(listed), 1)
        self.assertEqual(listed[0]["secrets"], [])  # shown only by create
        self.produce("t-wh", [{"body": "{}"}])
        attempts = eventually(lambda: self.get(f"/webhooks/{w['id']}/attempts")[1]["attempts"], 20, "an attempt")
        # 127.0.0.1 is refused by the egress guard (webhook_allow_private is off).
        self.assertEqual(attempts[0]["outcome"], "WEBHOOK_BLOCKED")
        status, rotated, _ = self.post(f"/webhooks/{w['id']}/rotate-secret", {})
        self.assertEqual(len(rotated["secrets"]), 2)
        status, body, _ = call("DELETE", f"{self.url}/webhooks/{w['id']}")
        self.assertEqual(status, 200, body)
        status, body, _ = call("DELETE", f"{self.url}/webhooks/{w['id']}")
        self.assertEqual(status, 404)

    def test_webhook_attempts_newest_first(self):
        # Three messages, each attempted once (blocked by the egress guard; the next attempt an
        # hour away): the newest-first pages run from the latest back, following next_after.
        self.post("/topics", {"name": "t-wh-order"})
        status, w, _ = self.post("/webhooks", {"topic": "t-wh-order", "url": "http://127.0.0.1:9/hook",
                                              "timeout_ms": 1000, "schedule_ms": [3600000]})
        self.assertEqual(status, 200, w)
        self.produce("t-wh-order", [{"body": "a"}, {"body": "b"}, {"body": "c"}])
        path = f"/webhooks/{w['id']}/attempts"
        oldest = eventually(lambda: (lambda a: a if len(a) == 3 else None)(self.get(path)[1]["attempts"]), 20,
                            "3 attempts")
        key = lambda a: (a["time_ms"], a["message_id"], a["attempt"])  # noqa: E731
        self.assertEqual([key(a) for a in oldest], sorted(key(a) for a in oldest))
        status, page, _ = self.get(path + "?order=newest&limit=2")
        self.assertEqual(status, 200, page)
        self.assertEqual([key(a) for a in page["attempts"]], [key(a) for a in reversed(oldest)][:2])
        self.assertTrue(page.get("next_after"), page)
        status, rest, _ = self.get(path + "?order=newest&limit=2&after=" + page["next_after"])
        self.assertEqual(status, 200, rest)
        self.assertEqual([key(a) for a in rest["attempts"]], [key(oldest[0])])
        self.assertFalse(rest.get("next_after"), rest)
        status, body, _ = self.get(path + "?order=sideways")
        self.assertEqual(status, 400, body)
        call("DELETE", f"{self.url}/webhooks/{w['id']}")

    def test_openapi_document(self):
        status, doc, _ = self.get("/openapi.json")
        self.assertEqual(status, 200)
        self.assertTrue(doc["openapi"].startswith("3.0"))
        self.assertIn("/v1/topics/{topic}/messages", doc["paths"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
