#!/usr/bin/env python3
"""GET /v1/sim (CONTRACT 7) on `agentpay sim --serve` and on `agentpay serve`: the same JSON as
`agentpay sim --format json` for the same parameters, and clear 4xx answers for bad ones.

usage: test_sim_http.py [--agentpay PATH] [unittest args]"""
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness  # noqa: E402  (free_port)

AGENTPAY = os.path.join(os.path.dirname(__file__), "..", "..", "build", "agentpay")
WORKED_CASE_1 = {"fault": "none", "service_ms": "8000", "timeout_ms": "1000", "max_attempts": "3",
                 "initial_delay_ms": "1000", "dedup": "on", "retry_key": "stable",
                 "retention_ms": "86400000"}


def start(args):
    proc = subprocess.Popen([AGENTPAY] + args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if "listening on" in line:
            return proc
        if not line and proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("%r did not start" % args)


def get(port, query, method="GET"):
    request = urllib.request.Request("http://127.0.0.1:%d/v1/sim?%s" % (port, query), method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def cli_json(params):
    flags = []
    for name, value in params.items():
        flags += ["--" + name.replace("_", "-"), value]
    out = subprocess.run([AGENTPAY, "sim"] + flags + ["--format", "json"], check=True,
                         capture_output=True, text=True, timeout=30)
    return json.loads(out.stdout)


class SimHttpTest(unittest.TestCase):
    def check_endpoint(self, port):
        query = "&".join("%s=%s" % item for item in WORKED_CASE_1.items())
        status, body = get(port, query)
        self.assertEqual(status, 200, body)
        self.assertEqual(body, cli_json(WORKED_CASE_1))
        result = body["result"]
        self.assertEqual((result["client_outcome"], result["attempts"], result["effects"],
                          result["server_operations"], result["late_acks"], result["intended"],
                          result["reconciliation_flag"]),
                         ("exhausted", 3, 1, 1, 3, 1, True))
        sends = [e["at_ms"] for e in body["events"] if e["kind"] == "send"]
        self.assertEqual(sends, [0, 2000, 5000])
        for query, fragment in (("timeout_ms=0", "timeout_ms"), ("fault=boom", "fault"),
                                ("colour=red", "colour"), ("service_ms=%zz", "escape"),
                                ("max_attempts=1e3", "max_attempts")):
            status, problem = get(port, query)
            self.assertEqual(status, 400, (query, problem))
            self.assertEqual(problem["code"], "invalid_request", problem)
            self.assertIn(fragment, problem["detail"], problem)
        status, problem = get(port, "", method="POST")
        self.assertEqual((status, problem["code"]), (405, "method_not_allowed"))
        status, problem = get(port, "fault=" + "x" * 5000)
        self.assertEqual((status, problem["code"]), (414, "limit_exceeded"))

    def test_sim_serve(self):
        port = harness.free_port()
        proc = start(["sim", "--serve", "--listen", "127.0.0.1:%d" % port])
        try:
            self.check_endpoint(port)
        finally:
            proc.terminate()
            proc.wait(timeout=10)
            proc.stdout.close()

    def test_gateway_serves_the_model_too(self):
        with tempfile.TemporaryDirectory() as tmp:
            token = os.path.join(tmp, "token")
            fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as f:
                f.write("t0ken\n")
            port = harness.free_port()
            proc = start(["serve", "--listen", "127.0.0.1:%d" % port, "--admin-listen", "off",
                          "--db", "sqlite:%s/a.db" % tmp,
                          "--upstream", "http://127.0.0.1:9", "--price", "1", "--admin-token-file", token])
            try:
                self.check_endpoint(port)
            finally:
                proc.terminate()
                proc.wait(timeout=20)
                proc.stdout.close()


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--agentpay" in args:
        i = args.index("--agentpay")
        AGENTPAY = args[i + 1]
        del args[i:i + 2]
    unittest.main(argv=[sys.argv[0]] + args, verbosity=2)
