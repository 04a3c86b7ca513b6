#!/usr/bin/env python3
"""The swarm catches each flawed approach "timeout is not failure" rejects. A mutant build
(-DAGENTPAY_SIM_MUTANTS=ON; scripts/test-asan.sh builds one) puts each back on request:
  1 a timed-out payment retried under a new key (a fresh signature)
  2 an upstream timeout taken as success (captured)
  3 a hold released on an upstream timeout (and an x402 client's budget on a timeout)
  4 a client that retries without bound
For each, `agentpay sim swarm --mutant N --seeds 1000` must stop at a violation, naming the seed, the
step and the invariant; the table of what caught each is printed. Without a mutant the same seeds
hold (the catch is the mutant's doing).

usage: test_mutants.py --agentpay MUTANT_BUILD/agentpay [unittest args]"""
import os
import re
import subprocess
import sys
import unittest

AGENTPAY = os.path.join(os.path.dirname(__file__), "..", "..", "build-asan", "agentpay")
SEEDS = 1000
NAMES = {1: "fresh key after a timeout", 2: "timeout taken as success",
         3: "hold or budget released on timeout", 4: "retries without bound"}


def swarm(*args):
    return subprocess.run([AGENTPAY, "sim", "swarm"] + list(args), capture_output=True, text=True,
                          timeout=1800)


class MutantsTest(unittest.TestCase):
    def test_each_mutant_is_caught_within_1000_seeds(self):
        caught = []
        for mutant in sorted(NAMES):
            out = swarm("--mutant", str(mutant), "--seeds", str(SEEDS))
            self.assertEqual(out.returncode, 1,
                             "mutant %d (%s) was not caught in %d seeds:\n%s%s"
                             % (mutant, NAMES[mutant], SEEDS, out.stdout, out.stderr))
            self.assertIn("MUTANT=%d" % mutant, out.stdout)
            found = re.search(r"SEED=(\d+) VIOLATION at step (\d+): ([a-z_]+): (.*)", out.stdout)
            self.assertIsNotNone(found, out.stdout)
            seed, step, invariant, detail = found.groups()
            caught.append((mutant, seed, step, invariant, detail))
            # The seed that caught it holds without the mutant.
            clean = swarm("--seeds", "1", "--seed-start", seed)
            self.assertEqual(clean.returncode, 0, clean.stdout + clean.stderr)
        print()
        for mutant, seed, step, invariant, detail in caught:
            print("mutant %d (%s): caught by seed %s at step %s, invariant %s: %s"
                  % (mutant, NAMES[mutant], seed, step, invariant, detail[:160]))

    def test_an_unknown_mutant_is_a_usage_error(self):
        out = swarm("--mutant", "5", "--seeds", "1")
        self.assertEqual(out.returncode, 2, out.stdout + out.stderr)
        self.assertNotIn("SEED=", out.stdout)


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--agentpay" in args:
        i = args.index("--agentpay")
        AGENTPAY = args[i + 1]
        del args[i:i + 2]
    unittest.main(argv=[sys.argv[0]] + args, verbosity=2)
