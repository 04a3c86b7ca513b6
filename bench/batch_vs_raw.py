#!/usr/bin/env python3
"""Batched settlement: paid x402 requests/s through the gateway settling up to 16 payments a
transaction, against the raw single-relayer ceiling (issue 38).

Each phase gets a fresh Anvil (chain id 84532, automine: one block per transaction) with TestUSDC,
Multicall3 at its canonical address (as Multicall3Lite) and 16 buyers funded, and 16 concurrent
workers for --seconds (bench/x402_load.mjs). Everything a phase signs is signed before its clock
starts, so that the phases measure settlement, not the load generator's signing:
  raw      the single relayer's ceiling: the authorizations and one relayer transaction for each
           (fixed gas, fees read once, nonces counted by hand) signed in advance, then sent in
           nonce order as fast as the node takes them, each worker waiting for its receipt;
  gateway  `agentpay serve` (settle=before, the demo seller upstream, SQLite) paid with payments
           made in advance by the OFFICIAL client's own pieces (@x402/fetch's x402HTTPClient),
           one paid request each; a payment counts once answered 200 with a successful
           PAYMENT-RESPONSE, i.e. settled on chain and served. One transaction per payment;
  batched  the same with --settle-batch-max 16 (Multicall3 aggregate3).
Prints each phase's payments/s with the median and 99th percentile of a payment's time (request to
paid answer; for raw, send to receipt), and the ratio of the batched gateway's best round to raw's
best round, both measured in this run (the machine is noisy: compare ratios). Every phase checks
its count against the Transfers to payTo on chain. Rounds alternate the order of the phases.

Run:  python3 bench/batch_vs_raw.py --agentpay build/agentpay [--seconds 10] [--rounds 2]
"""

import argparse
import os
import shutil
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import x402_vs_relayer as R  # noqa: E402

PHASES = {
    "raw": ("raw-presigned", None),
    "gateway": ("gateway-presigned", ()),
    "batched": ("gateway-presigned", ("--settle-batch-max", str(R.BATCH_MAX))),
}
# Payments signed in advance per second of a phase: more than each can settle on this machine, so
# that none runs out before its clock does (one that did would end early and count what it did).
PRESIGN_PER_SECOND = {"raw": 400, "gateway": 800, "batched": 800}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agentpay", required=True)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    R.harness._binary = os.path.abspath(args.agentpay)
    keys, addresses = R.buyers(R.WORKERS)
    workdir = tempfile.mkdtemp(prefix="agentpay-batch-bench-")
    rates = {mode: [] for mode in PHASES}
    p99 = {mode: {} for mode in PHASES}
    try:
        for r in range(args.rounds):
            order = ("raw", "gateway", "batched")
            for mode in order if r % 2 == 0 else tuple(reversed(order)):
                result = R.phase(mode, args.seconds, keys, addresses, workdir, phases=PHASES,
                                 presign=int(PRESIGN_PER_SECOND[mode] * args.seconds))
                rates[mode].append(result["per_second"])
                p99[mode][result["per_second"]] = result["p99_ms"]
                print("round %d %-8s %6.1f payments/s (p50 %s ms, p99 %s ms; %d settled in %.1f s, "
                      "%.2f blocks each, %d errors%s)" % (
                          r + 1, mode, result["per_second"], R.fmt_ms(result["p50_ms"]),
                          R.fmt_ms(result["p99_ms"]), result["settled"], result["seconds"],
                          result["blocks_per_payment"], result["errors"],
                          ", first: " + result["first_error"] if result["first_error"] else ""),
                      flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    top = {mode: max(v) for mode, v in rates.items()}
    print("best round, payments/s (p99 ms): raw %.1f (%s), gateway %.1f (%s), batched %.1f (%s)" % tuple(
        x for mode in ("raw", "gateway", "batched") for x in (top[mode], R.fmt_ms(p99[mode][top[mode]]))))
    print("BENCH_SUMMARY batched/raw = %.2f (p99 %s ms against raw's %s ms; gateway unbatched/raw %.2f; "
          "floor 2.0)" % (top["batched"] / top["raw"], R.fmt_ms(p99["batched"][top["batched"]]),
                          R.fmt_ms(p99["raw"][top["raw"]]), top["gateway"] / top["raw"]))


if __name__ == "__main__":
    main()
