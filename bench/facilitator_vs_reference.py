#!/usr/bin/env python3
"""x402 sellers' throughput with AgentPay as their facilitator against the reference one (issue 38).

Both phases serve the same paid resource with the official middleware (@x402/express 2.27) and are
paid by the same load: 16 concurrent workers for --seconds, each with its own buyer, paying with the
OFFICIAL client (@x402/fetch) again and again (bench/x402_load.mjs, gateway mode: a payment counts
once answered 200 with a successful PAYMENT-RESPONSE, i.e. settled on chain and served). Each phase
gets a fresh Anvil (chain id 84532, automine) with TestUSDC and the buyers funded:

  agentpay   examples/facilitator/seller.mjs as written: HTTPFacilitatorClient over HTTP to
             `agentpay serve --facilitator-listen` (SQLite; no paid route of its own);
  reference  tests/chain_env/reference_server.mjs: the same middleware with the reference
             facilitator of @x402/core and @x402/evm in the seller's own process (no HTTP hop),
             its signer built as the x402 examples build it (viem, nonce manager, 50 ms polling).

Prints each phase's payments/s per round, with the median and 99th percentile of a payment's time
(request to paid answer), and the ratio of AgentPay's best round to the reference's best round, all
measured in this run (the machine is noisy: compare ratios, not absolute figures). Every phase
checks its count against the Transfers to payTo on chain. Rounds alternate the order of the phases.

Run:  python3 bench/facilitator_vs_reference.py --agentpay build/agentpay [--seconds 10] [--rounds 2]
"""

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAIN_ENV = os.path.join(ROOT, "tests", "chain_env")
sys.path.insert(0, os.path.join(ROOT, "tests", "integration"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import harness  # noqa: E402
import x402_harness as X  # noqa: E402
from x402_vs_relayer import WORKERS, BenchChain, buyers, check_counted, load  # noqa: E402

PRICE = X.PRICE
SELLER_KEY = "bench-seller-" + "k" * 32


def node_server(argv, env, log_path):
    """A node server that prints one JSON line once listening; returns (process, that line)."""
    with open(log_path, "w") as log:
        process = subprocess.Popen(argv, cwd=CHAIN_ENV, env=env, stdout=subprocess.PIPE, stderr=log,
                                   text=True)
    line = process.stdout.readline()
    if not line:
        with open(log_path) as log:
            raise RuntimeError("%s did not start: %s" % (argv[1], log.read()[-2000:]))
    return process, json.loads(line)


def stop(process):
    process.terminate()
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    process.stdout.close()


def phase(mode, seconds, keys, addresses, workdir):
    chain = BenchChain(addresses)
    gateway = server = None
    try:
        if mode == "agentpay":
            port = harness.free_port()
            sellers = os.path.join(workdir, "sellers-%s" % secrets.token_hex(3))
            harness.write_secret(sellers, "bench %s %s\n" % (SELLER_KEY, X.PAY_TO.address))
            gateway = X.X402Gateway(workdir, chain, "http://127.0.0.1:9", routes=(),
                                    name="bench-facilitator-%s" % secrets.token_hex(3),
                                    extra_args=("--facilitator-listen", "127.0.0.1:%d" % port,
                                                "--facilitator-sellers-file", sellers))
            gateway.start()
            harness.wait_port(port, 30)
            app = os.path.join(workdir, "seller-%s" % secrets.token_hex(3))
            os.makedirs(app)
            shutil.copy(os.path.join(ROOT, "examples", "facilitator", "seller.mjs"), app)
            os.symlink(os.path.join(CHAIN_ENV, "node_modules"), os.path.join(app, "node_modules"))
            env = dict(os.environ, FACILITATOR_URL="http://127.0.0.1:%d" % port, SELLER_KEY=SELLER_KEY,
                       PAY_TO=X.PAY_TO.address, ASSET=chain.token, NETWORK=X.NETWORK, PRICE=str(PRICE),
                       PORT="0")
            server, ready = node_server(["node", os.path.join(app, "seller.mjs")], env,
                                        os.path.join(app, "seller.log"))
            url = ready["url"] + "/report"
        else:
            server, ready = node_server(
                ["node", "reference_server.mjs", "--rpc", chain.url, "--asset", chain.token,
                 "--pay-to", X.PAY_TO.address, "--chain-id", str(X.CHAIN_ID), "--amount", str(PRICE),
                 "--name", X.TOKEN_NAME, "--version", X.TOKEN_VERSION],
                dict(os.environ), os.path.join(workdir, "reference-%s.log" % secrets.token_hex(3)))
            url = ready["url"] + "/paid"
        result = load("gateway", seconds, keys, chain, url=url)
        check_counted(mode, result, chain)
        return result
    finally:
        if server:
            stop(server)
        if gateway:
            gateway.stop()
        chain.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agentpay", required=True)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    harness._binary = os.path.abspath(args.agentpay)
    keys, addresses = buyers(WORKERS)
    workdir = tempfile.mkdtemp(prefix="agentpay-facilitator-bench-")
    rounds = {"agentpay": [], "reference": []}
    try:
        for r in range(args.rounds):
            for mode in ("reference", "agentpay") if r % 2 == 0 else ("agentpay", "reference"):
                result = phase(mode, args.seconds, keys, addresses, workdir)
                rounds[mode].append(result)
                late = result["settled_late"]
                print("round %d %-9s %6.1f payments/s, p50 %s ms, p99 %s ms (%d settled, %d errors%s%s)" % (
                    r + 1, mode, result["per_second"], fmt(result["p50_ms"]), fmt(result["p99_ms"]),
                    result["settled"], result["errors"],
                    ", %d of them settled after their answer" % late if late else "",
                    ", first: " + result["first_error"] if result["first_error"] else ""), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    best = {mode: max(results, key=lambda x: x["per_second"]) for mode, results in rounds.items()}
    print("best round: agentpay %.1f payments/s (p99 %s ms), reference %.1f (p99 %s ms)" % (
        best["agentpay"]["per_second"], fmt(best["agentpay"]["p99_ms"]),
        best["reference"]["per_second"], fmt(best["reference"]["p99_ms"])))
    print("BENCH_SUMMARY facilitator agentpay/reference = %.2f (floor 2.0)" % (
        best["agentpay"]["per_second"] / best["reference"]["per_second"]))


def fmt(ms):
    return "-" if ms is None else "%.0f" % ms


if __name__ == "__main__":
    main()
