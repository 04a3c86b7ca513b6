#!/usr/bin/env python3
"""The Python package's overhead (issue 39, floor 0.9): paid requests/s through the package
against the C++ agent client as a library call, same gateway, same run.

One `agentpay serve` (SQLite, the demo seller upstream, one paid route) with a funded wallet
account. Each round pays --payments new business actions (a task of its own, steps 0..N-1, so
every one is a real payment: 402, hold, upstream, capture) from --threads threads sharing one
budget file, twice:
  cpp     build/bench/client_pay_bench: client::Pay called from C++ threads;
  python  the installed wheel: agentpay.pay() from Python threads (the C ABI through ctypes, the
          GIL released while the library works), in a venv of Debian's Python.
Rounds alternate the order. Prints each phase's payments/s and the ratio of Python's best round to
C++'s best round.

Run:  python3 bench/python_overhead.py --build build [--payments 400] [--threads 4] [--rounds 3]
Needs the build's wheel installed in build/python/venv (ctest -R python.venv makes it).
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))

import harness  # noqa: E402

PRICE = 1000

PYTHON_PHASE = r"""
import concurrent.futures, json, sys, time
import agentpay
url, key_file, budget_db, payments, threads, task = sys.argv[1:7]
payments, threads = int(payments), int(threads)
with open(key_file) as f:
    key = f.read().strip()
def one(i):
    r = agentpay.pay(url, method="POST", body=json.dumps({"n": i}), headers={"Content-Type": "application/json"},
                     api_key=key, task=task, step=i, budget_db=budget_db, budget=10**12, check=False)
    return r.exit_code == agentpay.ExitCode.PAID
began = time.monotonic()
with concurrent.futures.ThreadPoolExecutor(threads) as pool:
    paid = sum(pool.map(one, range(payments)))
seconds = time.monotonic() - began
print(json.dumps({"payments": payments, "paid": paid, "seconds": seconds, "per_second": paid / seconds}))
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--payments", type=int, default=400)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    harness.set_binary(os.path.join(build, "agentpay"))
    venv_python = os.path.join(build, "python", "venv", "bin", "python")
    cpp_bench = os.path.join(build, "bench", "client_pay_bench")
    for path in (venv_python, cpp_bench):
        if not os.path.exists(path):
            sys.exit("missing %s (ninja -C build client_pay_bench; ctest -R python.venv)" % path)
    workdir = tempfile.mkdtemp(prefix="agentpay-py-bench-")
    seller = harness.Seller(workdir)
    seller.start()
    gw = harness.Gateway(workdir, seller.url, price=PRICE)
    gw.start()
    rates = {"cpp": [], "python": []}
    try:
        rounds = args.rounds
        account = gw.create_account("bench", deposit=PRICE * args.payments * 2 * rounds + PRICE)
        key_file = os.path.join(workdir, "api.key")
        harness.write_secret(key_file, account.api_key + "\n")
        url = "http://127.0.0.1:%d/work" % gw.port
        budget_db = os.path.join(workdir, "budget.db")
        for r in range(rounds):
            for phase in ("cpp", "python") if r % 2 == 0 else ("python", "cpp"):
                task = "%s-%d" % (phase, r)
                common = [url, key_file, budget_db, str(args.payments), str(args.threads), task]
                if phase == "cpp":
                    argv = [cpp_bench, "--url", url, "--api-key-file", key_file, "--budget-db", budget_db,
                            "--payments", str(args.payments), "--threads", str(args.threads), "--task", task]
                else:
                    argv = [venv_python, "-c", PYTHON_PHASE] + common
                out = subprocess.run(argv, capture_output=True, text=True, timeout=600)
                if not out.stdout.strip():
                    raise RuntimeError("%s phase failed: %s" % (phase, out.stderr[-2000:]))
                result = json.loads(out.stdout.strip().splitlines()[-1])
                if result["paid"] != args.payments:
                    raise RuntimeError("%s paid %d of %d: %s" % (phase, result["paid"], args.payments,
                                                                  out.stderr[-2000:]))
                rates[phase].append(result["per_second"])
                print("round %d %-6s %7.1f payments/s (%d in %.2f s)" % (
                    r + 1, phase, result["per_second"], result["paid"], result["seconds"]), flush=True)
    finally:
        gw.stop()
        seller.kill9()
        shutil.rmtree(workdir, ignore_errors=True)
    top = {phase: max(v) for phase, v in rates.items()}
    print("best round: python %.1f, cpp %.1f payments/s" % (top["python"], top["cpp"]))
    print("BENCH_SUMMARY python/cpp = %.2f (floor 0.9)" % (top["python"] / top["cpp"]))


if __name__ == "__main__":
    main()
