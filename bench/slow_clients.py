#!/usr/bin/env python3
"""Paid throughput with and without 2,000 slow connections from another address (issue 13, floor 0.8).

One seller and one gateway (fresh SQLite database in a temp dir, one funded account). Paid wallet requests
come from 127.0.0.1 through wrk with bench/wrk/bench.lua (every request a new Idempotency-Key: a new
payment), exactly as bench/wallet_vs_nginx.sh's "gateway paid" row. The slow connections come from
127.0.0.2 (tests/security/slowloris.py): each sends a request line and then one header line a second and
never ends its header ("trickle"), or sends nothing ("idle"); a connection the gateway closes is reopened a
second later, so the pressure stays at BENCH_SLOW.

Two gateway configurations are measured:
  defaults      the shipped limits: one address holds at most 512 connections, the rest get 503 and
                reconnect; the header deadline (10 s) cuts the ones held.
  all held      --max-connections-per-client 4096: every slow connection is held until its header
                deadline, the harder case for the server.
For each, runs alternate (base, slow, slow, base, base, slow, ...), BENCH_RUNS of each, so that drift over
the session falls on both alike; the verdict is the ratio of the medians, slow/base, against the floor.

  python3 bench/slow_clients.py [--agentpay build/agentpay]
  BENCH_DURATION=10 BENCH_RUNS=3 BENCH_SLOW=2000 BENCH_SLOW_MODE=trickle BENCH_CONNECTIONS=32 BENCH_FLOOR=0.8

Exit status: 0 when both ratios reach the floor, 1 when one does not (or any paid answer was not 2xx, or
the money check failed), 2 when the setup failed.
"""

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

BENCH = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(BENCH)
sys.path.insert(0, os.path.join(ROOT, "tests", "security"))
from slowloris import SlowClients  # noqa: E402

DURATION = int(os.environ.get("BENCH_DURATION", "10"))
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
SLOW = int(os.environ.get("BENCH_SLOW", "2000"))
SLOW_MODE = os.environ.get("BENCH_SLOW_MODE", "trickle")
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "32"))
FLOOR = float(os.environ.get("BENCH_FLOOR", "0.8"))
PRICE = 1


def log(msg):
    print("# " + msg, file=sys.stderr, flush=True)


def die(msg):
    log("SETUP FAILED: " + msg)
    sys.exit(2)


def start(argv, log_path):
    out = open(log_path, "w")
    p = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with open(log_path) as f:
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", f.read())
        if m:
            return p, int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.05)
    p.kill()
    die("%s did not start: %s" % (argv[:2], open(log_path).read()[-2000:]))


def admin_url(log_path):
    """The admin listener's URL, which serve prints after its public one (the admin API is there
    only)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with open(log_path) as f:
            m = re.search(r"\(admin listener\): (http://127\.0\.0\.1:\d+)", f.read())
        if m:
            return m.group(1)
        time.sleep(0.05)
    die("the gateway printed no admin listener: %s" % open(log_path).read()[-2000:])


def http(method, url, body=None, token=None):
    req = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    with urllib.request.urlopen(req, timeout=20) as r:
        return json.loads(r.read())


def wrk(url, api_key, prefix):
    env = dict(os.environ, BENCH_MODE="unique", BENCH_API_KEY=api_key, BENCH_KEY_PREFIX=prefix,
               BENCH_PATH="/bench", BENCH_BODY='{"query":"bench"}')
    out = subprocess.run(["wrk", "-t1", "-c%d" % CONNECTIONS, "-d%ds" % DURATION, "--timeout", "10s",
                          "-s", os.path.join(BENCH, "wrk", "bench.lua"), url],
                         env=env, capture_output=True, text=True, check=False)
    line = next((l for l in out.stdout.splitlines() if l.startswith("BENCH_RESULT ")), None)
    if line is None:
        die("wrk printed no BENCH_RESULT: %s %s" % (out.stdout[-1000:], out.stderr[-1000:]))
    fields = dict(kv.split("=", 1) for kv in line.split()[1:])
    return {"rate": int(fields["ok2xx"]) / (int(fields["duration_us"]) / 1e6), "ok": int(fields["ok2xx"]),
            "non2xx": int(fields["non2xx"]), "statuses": fields["statuses"],
            "sock_errors": sum(int(fields[k]) for k in ("sock_connect", "sock_read", "sock_write", "sock_timeout")),
            "p99_ms": int(fields["lat_p99_us"]) / 1000}


def measure(name, extra_args, binary, tmp, seller_url):
    token = "adm_" + os.urandom(16).hex()
    token_file = os.path.join(tmp, name + "-token")
    with open(os.open(token_file, os.O_WRONLY | os.O_CREAT, 0o600), "w") as f:
        f.write(token + "\n")
    log_path = os.path.join(tmp, name + "-gateway.log")
    gw, port = start([binary, "serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0",
                      "--db", "sqlite:%s/%s.db" % (tmp, name), "--upstream", seller_url,
                      "--price", str(PRICE), "--admin-token-file", token_file] + extra_args, log_path)
    url = "http://127.0.0.1:%d" % port
    try:
        admin = admin_url(log_path)
        acct = http("POST", admin + "/admin/v1/accounts", {"name": "bench"}, token)
        http("POST", admin + "/admin/v1/accounts/%s/deposits" % acct["account_id"],
             {"amount": "1000000000000", "reference": "bench"}, token)
        wrk(url, acct["api_key"], "warm-" + name)  # warm-up, not counted
        order = []
        for i in range(RUNS):
            order += ["base", "slow"] if i % 2 == 0 else ["slow", "base"]
        rows = {"base": [], "slow": []}
        failures = []
        for n, kind in enumerate(order):
            slow = None
            samples = []
            stop_sampling = threading.Event()
            if kind == "slow":
                slow = SlowClients(port, SLOW, mode=SLOW_MODE).start()
                slow.wait_open(min(SLOW, 500) * 0.95, timeout=30)
                time.sleep(4)  # all of them opened (500 a second); the gateway holds what it allows

                def sample():
                    while not stop_sampling.wait(0.5):
                        samples.append(slow.open_now())
                sampler = threading.Thread(target=sample, daemon=True)
                sampler.start()
            try:
                result = wrk(url, acct["api_key"], "%s-%d" % (name, n))
            finally:
                stop_sampling.set()
                if slow:
                    slow.stop()
            held = min(samples) if samples else 0
            result["held"] = held
            result["held_max"] = max(samples) if samples else 0
            result["slow_stats"] = dict(slow.stats) if slow else {}
            rows[kind].append(result)
            log("%-9s %-4s run %d: %8.1f paid/s  p99 %6.1f ms  non-2xx %d  sock-err %d  slow held %d-%d %s" % (
                name, kind, n, result["rate"], result["p99_ms"], result["non2xx"], result["sock_errors"], held,
                result["held_max"], result["slow_stats"] or ""))
            if result["non2xx"] or result["sock_errors"]:
                failures.append("%s %s run %d: %d non-2xx (%s), %d socket errors" % (
                    name, kind, n, result["non2xx"], result["statuses"], result["sock_errors"]))
        # Money: every 2xx the gateway sent is one capture (wrk may have missed the last in flight).
        time.sleep(1)
        account = http("GET", url + "/v1/account", token=acct["api_key"])
        if account["held"] != "0":
            failures.append("%s: %s still held after the runs" % (name, account["held"]))
        return rows, failures
    finally:
        gw.terminate()
        gw.wait(timeout=20)


def main():
    binary = os.path.join(ROOT, "build", "agentpay")
    if "--agentpay" in sys.argv:
        binary = sys.argv[sys.argv.index("--agentpay") + 1]
    binary = os.path.abspath(binary)
    if shutil.which("wrk") is None:
        die("wrk is not installed")
    import resource
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < SLOW + 1000:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, SLOW * 2 + 1000), hard))
    tmp = tempfile.mkdtemp(prefix="agentpay-slow-bench.")
    seller, seller_port = start([binary, "seller", "--listen", "127.0.0.1:0"], os.path.join(tmp, "seller.log"))
    load_before = os.getloadavg()
    try:
        configs = [("defaults", []), ("all held", ["--max-connections-per-client", "4096"])]
        results = {}
        failures = []
        for name, args in configs:
            rows, failed = measure(name.replace(" ", "-"), args, binary, tmp,
                                   "http://127.0.0.1:%d" % seller_port)
            results[name] = rows
            failures += failed
    finally:
        seller.terminate()
        seller.wait(timeout=20)
        shutil.rmtree(tmp, ignore_errors=True)
    load_after = os.getloadavg()

    print("AgentPay paid throughput with %d slow connections (%s) from 127.0.0.2 vs none: wrk -t1 -c%d -d%ds from "
          "127.0.0.1, POST /bench, price %d, %d runs each, alternating" % (
              SLOW, SLOW_MODE, CONNECTIONS, DURATION, PRICE, RUNS))
    print("gateway %s; load average before/after: %s / %s" % (
        binary, " ".join("%.2f" % x for x in load_before), " ".join("%.2f" % x for x in load_after)))
    print()
    print("%-10s %14s %14s %8s %12s" % ("config", "base paid/s", "slow paid/s", "ratio", "slow held"))
    print("(slow held: the fewest slow connections open during any slow run, sampled every 0.5 s)")
    verdicts = []
    for name, rows in results.items():
        base = statistics.median(r["rate"] for r in rows["base"])
        slow = statistics.median(r["rate"] for r in rows["slow"])
        held = statistics.median(r["held"] for r in rows["slow"])
        ratio = slow / base
        print("%-10s %14.1f %14.1f %8.2f %12d" % (name, base, slow, ratio, held))
        print("           runs base: %s" % " ".join("%.0f" % r["rate"] for r in rows["base"]))
        print("           runs slow: %s" % " ".join("%.0f" % r["rate"] for r in rows["slow"]))
        verdicts.append((name, ratio))
    print()
    for name, ratio in verdicts:
        print("%s: slow/base = %.2f (floor %.2f)" % (name, ratio, FLOOR))
        if ratio < FLOOR:
            failures.append("%s: ratio %.2f below the floor %.2f" % (name, ratio, FLOOR))
    for f in failures:
        print("FAIL: " + f)
    print("PASS" if not failures else "")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
