"""Checks with the Node.js tools of tests/node (installed by `npm ci` into the build directory,
$TXMQ_NODE_MODULES_DIR): the OpenAPI document the broker serves, validated by
@apidevtools/swagger-parser; and webhook requests received by a receiver built on the official
Standard Webhooks library (standardwebhooks' Webhook.verify), for raw and envelope payloads."""

import base64
import json
import os
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "python"))
from txmq_testing import Broker, call, eventually  # noqa: E402

NODE_DIR = os.path.join(os.path.dirname(__file__), "node")
NODE_MODULES = os.environ.get("TXMQ_NODE_MODULES_DIR", "")
SECRET = "whsec_" + base64.b64encode(b"txmq-standard-webhooks-test-key!").decode()


def node(script, *args, **kw):
    env = dict(os.environ, NODE_PATH=os.path.join(NODE_MODULES, "node_modules"))
    # ES modules resolve packages from the script's folder upwards, not NODE_PATH: run a copy
    # placed beside the installed node_modules.
    target = os.path.join(NODE_MODULES, os.path.basename(script))
    with open(script) as src, open(target, "w") as dst:
        dst.write(src.read())
    return ["node", target] + list(args), env


class NodeToolsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.broker = Broker().start()

    @classmethod
    def tearDownClass(cls):
        cls.broker.cleanup()

    def test_served_openapi_document_is_valid_openapi_3(self):
        status, doc, _ = call("GET", self.broker.url + "/v1/openapi.json")
        self.assertEqual(status, 200)
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(doc, f)
        try:
            cmd, env = node(os.path.join(NODE_DIR, "validate_openapi.mjs"), f.name)
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
            self.assertIn("valid:", p.stdout)
        finally:
            os.unlink(f.name)
        # A broken document is refused: the check can fail.
        doc["paths"]["/v1/topics"]["get"]["responses"]["200"]["content"]["application/json"]["schema"] = {"$ref": "#/nope"}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(doc, f)
        try:
            cmd, env = node(os.path.join(NODE_DIR, "validate_openapi.mjs"), f.name)
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
            self.assertNotEqual(p.returncode, 0)
        finally:
            os.unlink(f.name)

    def test_standard_webhooks_library_accepts_txmq_requests(self):
        cmd, env = node(os.path.join(NODE_DIR, "webhook_receiver.mjs"), SECRET)
        receiver = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = receiver.stdout.readline()
            self.assertTrue(line.startswith("PORT "), line + receiver.stderr.read() if not line else line)
            hook = f"http://127.0.0.1:{int(line.split()[1])}/hook"
            api = self.broker.url + "/v1"
            call("POST", api + "/topics", {"name": "sw-raw"})
            call("POST", api + "/topics", {"name": "sw-env"})
            for topic, payload in (("sw-raw", "WEBHOOK_PAYLOAD_RAW"), ("sw-env", "WEBHOOK_PAYLOAD_ENVELOPE")):
                status, w, _ = call("POST", api + "/webhooks", {"topic": topic, "url": hook, "secret": SECRET,
                                                               "payload": payload})
                self.assertEqual(status, 200, w)
            bodies = [{"body": '{"order": 1}'},
                      {"body": "plain text"},
                      {"body": "hello", "headers": {"content-type": "text/plain; charset=utf-8"}},
                      {"body_base64": base64.b64encode(b"\x00\x01\xfe").decode()}]
            ids = {}
            for topic in ("sw-raw", "sw-env"):
                status, out, _ = call("POST", f"{api}/topics/{topic}/messages", {"messages": bodies})
                self.assertEqual(status, 200, out)
                ids[topic] = [m["id"] for m in out["messages"]]

            def received():
                status, results, _ = call("GET", hook.replace("/hook", "/results"))
                return results if len(results) >= 8 else None
            results = {r["id"]: r for r in eventually(received, 30, "8 webhook requests")}

            raw = [results[i] for i in ids["sw-raw"]]
            # Every signature is the library's own (Webhook.sign over the raw body) ...
            self.assertTrue(all(r["signature_matches"] for r in raw[:3]), raw)
            # ... a JSON body passes verify() and is labelled JSON ...
            self.assertEqual(raw[0]["content_type"], "application/json")
            self.assertTrue(raw[0]["verified"], raw[0])
            self.assertEqual(raw[0]["payload"], {"order": 1})
            # ... text is not labelled JSON: octet-stream, or the message's own content-type.
            self.assertEqual(raw[1]["content_type"], "application/octet-stream")
            self.assertEqual(raw[2]["content_type"], "text/plain; charset=utf-8")
            self.assertEqual(raw[3]["content_type"], "application/octet-stream")
            self.assertEqual(base64.b64decode(raw[3]["body_base64"]), b"\x00\x01\xfe")

            env_results = [results[i] for i in ids["sw-env"]]
            for r in env_results:
                self.assertEqual(r["content_type"], "application/json")
                self.assertTrue(r["verified"], r)  # verify() accepts every envelope
                self.assertEqual(r["payload"]["type"], "sw-env")
                self.assertRegex(r["payload"]["timestamp"], r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
            self.assertEqual(env_results[0]["payload"]["data"], {"order": 1})
            self.assertEqual(base64.b64decode(env_results[1]["payload"]["data_base64"]), b"plain text")
            self.assertEqual(base64.b64decode(env_results[3]["payload"]["data_base64"]), b"\x00\x01\xfe")
        finally:
            receiver.kill()
            receiver.wait()
            receiver.stdout.close()
            receiver.stderr.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
