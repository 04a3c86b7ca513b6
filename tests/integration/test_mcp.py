#!/usr/bin/env python3
"""`agentpay mcp` driven by the official MCP client (@modelcontextprotocol/sdk, through
tests/chain_env/mcp_client.mjs) on a real Anvil (issue 39 item 2): over stdio and over streamable
HTTP, tools/list, paid calls through the gateway, a call refused by the budget (nothing signed),
a lost answer retried by the host with the same task and step (one payment), and strangers of the
HTTP listener refused; every test over both transports. After every test the harness's money
check reads the chain.

Run:  python3 tests/integration/test_mcp.py --agentpay build/agentpay
"""

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "fault"))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from fault_proxy import FaultProxy  # noqa: E402
from x402_harness import BUYER, PRICE, eq_addr  # noqa: E402


def transfers(chain):
    return {t["tx"].lower() for t in chain.transfers(from_=BUYER.address) if eq_addr(t["to"], X.PAY_TO.address)}


def host(args, calls, timeout=180):
    """The official client: `args` are mcp_client.mjs's transport flags; returns its JSON."""
    p = subprocess.run(["node", "mcp_client.mjs"] + args + ["--calls", json.dumps(calls)], cwd=X.CHAIN_ENV,
                       capture_output=True, text=True, timeout=timeout)
    lines = p.stdout.strip().splitlines()
    if p.returncode != 0 or not lines:
        raise AssertionError("mcp_client.mjs failed (%d): %s" % (p.returncode, p.stderr[-3000:]))
    return json.loads(lines[-1])


def structured(entry):
    assert "result" in entry, entry
    return entry["result"]["structuredContent"]


class McpTest(X.X402TestCase):
    gateway_args = ("--sweep-interval-ms", "200")

    def setUp(self):
        super().setUp()
        n = getattr(type(self), "_n", 0) + 1
        type(self)._n = n
        self.db = os.path.join(self.workdir, "mcp-budget-%d.db" % n)
        self.key_file = os.path.join(self.workdir, "buyer.key")
        harness.write_secret(self.key_file, BUYER.private_key + "\n")

    def server_argv(self, *extra):
        return [harness.binary(), "mcp", "--buyer-key-file", self.key_file, "--budget-db", self.db,
                "--budget", str(2 * PRICE), "--max-amount", str(PRICE)] + list(extra)

    def transport(self, *extra):
        """mcp_client.mjs's flags to reach a server started with `extra`: here over stdio (the
        client starts it); McpOverHttpTest starts it with --listen instead."""
        return ["--stdio", json.dumps(self.server_argv(*extra))]

    def start_listener(self, *extra):
        """`agentpay mcp --listen` with a token, stopped when the test ends: (endpoint, token)."""
        token_file = os.path.join(self.workdir, "mcp.token")
        token = "t" * 40
        harness.write_secret(token_file, token + "\n")
        port = harness.free_port()
        log = open(os.path.join(self.workdir, "mcp-http-%d.log" % port), "w")
        self.addCleanup(log.close)
        proc = subprocess.Popen(self.server_argv("--listen", "127.0.0.1:%d" % port, "--token-file", token_file,
                                                 *extra),
                                stdout=log, stderr=log, preexec_fn=harness._die_with_parent)

        def stop():
            proc.terminate()
            proc.wait(timeout=10)
        self.addCleanup(stop)
        harness.wait_port(port, 20)
        return "http://127.0.0.1:%d/mcp" % port, token

    def test_lists_the_tools_pays_replays_and_stops_at_the_budget(self):
        before = transfers(self.chain)
        url = self.gw.url("/report")
        out = host(self.transport(), [
            {"tool": "budget"},
            {"tool": "pay_request", "arguments": {"url": url, "task": "mcp-report", "step": 0}},
            {"tool": "pay_request", "arguments": {"url": url, "task": "mcp-report", "step": 0}},
            {"tool": "pay_request", "arguments": {"url": url, "task": "mcp-report", "step": 1}},
            {"tool": "pay_request", "arguments": {"url": url, "task": "mcp-report", "step": 2}},
            {"tool": "budget"},
            {"tool": "pay_request", "arguments": {"url": url, "headers": {"Authorization": "Bearer x"}}},
        ])
        self.assertEqual(out["server"]["name"], "agentpay")
        self.assertEqual([t["name"] for t in out["tools"]], ["pay_request", "budget", "reconcile"])
        for tool in out["tools"]:
            self.assertIn("inputSchema", tool)
        fresh, first, again, second, over, budget, refused = out["results"]
        self.assertEqual((structured(fresh)["total"], structured(fresh)["committed"]), (str(2 * PRICE), "0"))
        self.assertEqual((structured(first)["outcome"], structured(first)["amount"]), ("paid", str(PRICE)))
        self.assertFalse(first["result"]["isError"])
        self.assertEqual(json.loads(structured(first)["body"]).get("ok"), True)
        self.assertEqual(structured(again)["outcome"], "paid")
        self.assertTrue(structured(again)["replayed"], "the same task and step: the stored answer")
        self.assertEqual(structured(again)["key"], structured(first)["key"])
        self.assertEqual(structured(second)["outcome"], "paid")
        self.assertEqual((structured(over)["outcome"], structured(over)["attempts"]), ("over_budget", 0))
        self.assertTrue(over["result"]["isError"])
        self.assertEqual((structured(budget)["spent"], structured(budget)["available"]), (str(2 * PRICE), "0"))
        self.assertTrue(refused["result"]["isError"])
        self.assertIn("Authorization", refused["result"]["content"][0]["text"])
        new = transfers(self.chain) - before
        self.assertEqual(len(new), 2, "two payments on chain: step 0 once, step 1; step 2 refused")
        self.assertEqual({structured(first)["evidence"]["transaction"].lower(),
                          structured(second)["evidence"]["transaction"].lower()}, new)

    def test_a_lost_answer_retried_by_the_host_with_the_same_step_pays_once(self):
        proxy = FaultProxy(("127.0.0.1", self.gw.port)).start()
        self.addCleanup(proxy.stop)
        proxy.set_mode("drop_response", count=1, paid_only=True)
        before = transfers(self.chain)
        url = "http://127.0.0.1:%d/lost" % proxy.port
        call = {"tool": "pay_request", "arguments": {"url": url, "task": "mcp-lost", "step": 7}}
        out = host(self.transport("--max-attempts", "1", "--chain-rpc", self.chain.url), [call, call])
        lost, retried = out["results"]
        self.assertIn(structured(lost)["outcome"], ("unknown", "paid_not_delivered"), structured(lost))
        self.assertTrue(lost["result"]["isError"])
        self.assertTrue(structured(lost)["evidence"]["nonce"], structured(lost))
        self.assertEqual(structured(retried)["outcome"], "paid", structured(retried))
        self.assertEqual(structured(retried)["key"], structured(lost)["key"])
        paid = [e for e in proxy.log() if e["paid"]]
        self.assertEqual([e["mode"] for e in paid], ["drop_response", "pass"])
        self.assertEqual(paid[0]["payment_sha256"], paid[1]["payment_sha256"], "the same signed payment")
        self.assertEqual(len(transfers(self.chain) - before), 1, "one payment on chain")

    def test_streamable_http_serves_the_official_client_and_refuses_strangers(self):
        endpoint, token = self.start_listener()
        before = transfers(self.chain)

        def post(headers, body=b'{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pay_request",'
                               b'"arguments":{"url":"' + self.gw.url("/report").encode() + b'"}}}'):
            req = urllib.request.Request(endpoint, data=body, method="POST",
                                         headers={"Content-Type": "application/json", **headers})
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    return resp.status
            except urllib.error.HTTPError as e:
                return e.code
        self.assertEqual(post({}), 401)
        self.assertEqual(post({"Authorization": "Bearer " + "u" * 40}), 401)
        self.assertEqual(post({"Authorization": "Bearer " + token, "Origin": "http://evil.example"}), 403)
        self.assertEqual(transfers(self.chain), before, "no stranger paid anything")
        out = host(["--http", endpoint, "--token", token], [
            {"tool": "pay_request", "arguments": {"url": self.gw.url("/report"), "task": "mcp-http", "step": 0}},
            {"tool": "budget"}])
        self.assertEqual([t["name"] for t in out["tools"]], ["pay_request", "budget", "reconcile"])
        paid, budget = out["results"]
        self.assertEqual(structured(paid)["outcome"], "paid")
        self.assertEqual(structured(budget)["spent"], str(PRICE))
        self.assertEqual(len(transfers(self.chain) - before), 1)


class McpOverHttpTest(McpTest):
    """The same tests with the server on streamable HTTP (--listen, a token) instead of stdio."""

    def transport(self, *extra):
        endpoint, token = self.start_listener(*extra)
        return ["--http", endpoint, "--token", token]


if __name__ == "__main__":
    X.main(sys.argv)
