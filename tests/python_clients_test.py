"""The Python examples against the real broker: the HTTP/JSON example (urllib only) and the
wire-protocol reference client built on the protobuf code protoc generated ($TXMQ_PYTHON_PROTO,
set by CTest): Hello, produce, fetch, ack, nack, Prepare, EndTx and an answered CheckTx."""

import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "python"))
from txmq_testing import Broker  # noqa: E402

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples", "python")


def run(args, env=None):
    p = subprocess.run([sys.executable] + args, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, **(env or {})))
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines() if line.strip()], p.stderr


class PythonClientsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.broker = Broker("--tx-check-answer-timeout", "2s").start()

    @classmethod
    def tearDownClass(cls):
        cls.broker.cleanup()

    def test_http_example_produces_consumes_and_acks(self):
        code, lines, err = run([os.path.join(EXAMPLES, "http_example.py"), "--http", self.broker.url,
                                "--topic", "py-http", "--count", "25"])
        self.assertEqual(code, 0, err)
        produced = [l["produced"] for l in lines if "produced" in l]
        consumed = [l["consumed"] for l in lines if "consumed" in l]
        self.assertEqual(len(produced), 25)
        # One key: consumed in the order produced, each once.
        self.assertEqual(consumed, produced)
        self.assertEqual([json.loads(l["body"])["order"] for l in lines if "consumed" in l], list(range(25)))
        # Everything was acknowledged: a second run's group sees nothing of these left.
        code, lines, err = run([os.path.join(EXAMPLES, "http_example.py"), "--http", self.broker.url,
                                "--topic", "py-http", "--count", "1"])
        self.assertEqual(code, 0, err)
        self.assertEqual(len([l for l in lines if "consumed" in l]), 1)

    def test_wire_reference_client(self):
        code, lines, err = run([os.path.join(EXAMPLES, "txmq_wire.py"), "--broker", self.broker.address, "demo"],
                               env={"PYTHONPATH": os.environ["TXMQ_PYTHON_PROTO"]})
        self.assertEqual(code, 0, err)
        steps = {}
        for l in lines:
            steps.setdefault(l["step"], []).append(l)
        self.assertEqual(steps["hello"][0]["broker_id"], "txmq-1")
        self.assertEqual(len(steps["produce"][0]["messages"]), 2)
        # Per-key order: "two" is not handed out before "one" is acked.
        self.assertEqual([f["bodies"] for f in steps["fetch"]], [["one"], ["two"], ["tx-committed"]])
        self.assertEqual(steps["ack"][0]["results"], ["ERROR_CODE_UNSPECIFIED"])
        self.assertEqual(steps["nack"][0]["results"], ["ERROR_CODE_UNSPECIFIED"])
        self.assertEqual(steps["redelivered"][0], {"step": "redelivered", "bodies": ["two"], "attempts": [2]})
        self.assertEqual(steps["end_tx"][0]["state"], "COMMITTED")
        self.assertEqual(steps["check_tx_answered"][0]["bodies"], ["tx-by-check"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
