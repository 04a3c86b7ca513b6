#!/usr/bin/env python3
"""`agentpay sim swarm` as CI and a user run it: 2,000 seeds of the real gateway within five minutes
with every invariant held, the same seeds giving the same events hash, and clear usage errors
(exit 2, nothing run). The five minutes are the swarm's CPU time: it runs on one thread, so on an
idle machine that is its wall time, and ctest -j runs it beside other tests, whose share of the
cores would otherwise count against it.

usage: test_swarm_cli.py [--agentpay PATH] [unittest args]"""
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
import unittest

AGENTPAY = os.path.join(os.path.dirname(__file__), "..", "..", "build", "agentpay")
CI_SEEDS = 2000
CI_CPU_SECONDS = 300
# Only a bound on a swarm that hangs (the ctest TIMEOUT of sim.swarm is above it).
WALL_LIMIT_SECONDS = 800


def children_cpu_seconds():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def swarm(*args, timeout=WALL_LIMIT_SECONDS, cwd=None):
    return subprocess.run([os.path.abspath(AGENTPAY), "sim", "swarm"] + list(args),
                          capture_output=True, text=True, timeout=timeout, cwd=cwd)


def events_hash(stdout):
    found = re.search(r"events hash: ([0-9a-f]{16})", stdout)
    assert found, stdout
    return found.group(1)


class SwarmCliTest(unittest.TestCase):
    def test_two_thousand_seeds_hold_every_invariant_within_five_minutes(self):
        t0, cpu0 = time.monotonic(), children_cpu_seconds()
        out = swarm("--seeds", str(CI_SEEDS))
        took, cpu = time.monotonic() - t0, children_cpu_seconds() - cpu0
        self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertIn("SEED=1..%d" % CI_SEEDS, out.stdout)
        self.assertIn("%d seeds held every invariant" % CI_SEEDS, out.stdout)
        self.assertLess(cpu, CI_CPU_SECONDS, "CPU seconds for %d seeds" % CI_SEEDS)
        counts = re.search(r"(\d+) steps, (\d+) requests, (\d+) answers, (\d+) crashes, "
                           r"(\d+) operations charged", out.stdout)
        self.assertIsNotNone(counts, out.stdout)
        steps, requests, answers, crashes, charged = map(int, counts.groups())
        # The seeds did what a swarm is for: crashes, answers lost on the way, charges.
        self.assertGreater(crashes, 100)
        self.assertGreater(requests, answers)
        self.assertGreater(charged, 5000)
        x402 = re.search(r"x402: (\d+) authorizations used on chain, (\d+) reorganisations, "
                         r"(\d+) transactions dropped, (\d+) budget reservations released unused",
                         out.stdout)
        self.assertIsNotNone(x402, out.stdout)
        paid, reorgs, dropped, released = map(int, x402.groups())
        # And on the x402 side: payments on chain, reorganisations, dropped transactions, budgets
        # given back once their authorization expired unused.
        self.assertGreater(paid, 1000)
        self.assertGreater(reorgs, 50)
        self.assertGreater(dropped, 50)
        self.assertGreater(released, 20)
        # Every kind of fault was drawn, fee spikes among the chain's.
        for group in ("network", "gateway", "seller", "chain"):
            line = re.search(r"faults, %s: (.*)" % group, out.stdout)
            self.assertIsNotNone(line, out.stdout)
            for count, kind in re.findall(r"(\d+) ([a-z0-9 -]+)", line.group(1)):
                self.assertGreater(int(count), 0, "%s: %s" % (group, kind))
        self.assertRegex(out.stdout, r"faults, chain: .*\d+ fee spikes")
        print("\n" + out.stdout.strip() + "\n  (%.1f s CPU, %.1f s wall)" % (cpu, took))

    def test_the_same_seeds_give_the_same_events_hash(self):
        with tempfile.TemporaryDirectory() as workdir:
            first = swarm("--seeds", "40", "--seed-start", "5000", cwd=workdir)
            # The gateway's database lives on the simulated disk: nothing is left where it ran.
            self.assertEqual(os.listdir(workdir), [])
        again = swarm("--seeds", "40", "--seed-start", "5000")
        other = swarm("--seeds", "40", "--seed-start", "6000")
        for out in (first, again, other):
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
        self.assertEqual(events_hash(first.stdout), events_hash(again.stdout))
        self.assertNotEqual(events_hash(first.stdout), events_hash(other.stdout))

    def test_each_part_runs_its_own_clients(self):
        for part in ("wallet", "x402", "budget", "all"):
            out = swarm("--seeds", "3", "--seed-start", "20", "--part", part, timeout=120)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            self.assertIn("3 seeds held every invariant", out.stdout)
            self.assertEqual("PART=%s" % part in out.stdout, part != "all", out.stdout)
            paid = int(re.search(r"x402: (\d+) authorizations used on chain", out.stdout).group(1))
            chain = re.search(r"faults, chain: (\d+) unreachable", out.stdout)
            if part == "wallet":
                self.assertEqual(paid, 0, out.stdout)
                self.assertEqual(chain.group(1), "0", out.stdout)
            elif part != "all":
                self.assertGreater(paid, 0, out.stdout)
        # A part is its own draw: the same seeds, another run.
        hashes = {part: events_hash(swarm("--seeds", "3", "--part", part, timeout=120).stdout)
                  for part in ("wallet", "x402", "budget")}
        self.assertEqual(len(set(hashes.values())), 3, hashes)

    def test_bad_flags_exit_2_and_run_nothing(self):
        for args, message in ((["--seeds", "0"], "--seeds must be 1-1000000000"),
                              (["--seeds", "1000000001"], "--seeds must be 1-1000000000"),
                              (["--seeds", "many"], "--seeds"),
                              (["--seeds", "2", "--seed-start", "18446744073709551615"],
                               "passes 2^64"),
                              (["--bogus"], "bogus"),
                              (["--part", "wallets"], "--part must be wallet, x402, budget or all"),
                              (["--part", ""], "--part must be"),
                              (["--trace", "10", "x.json", "--part", "x"], "--part must be")):
            out = swarm(*args, timeout=30)
            self.assertEqual(out.returncode, 2, (args, out.stdout, out.stderr))
            self.assertIn(message, out.stderr, args)
            self.assertNotIn("SEED=", out.stdout, args)

    def test_a_seed_traced_to_a_file_opens_as_a_trace(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "seed.json")
            out = swarm("--trace", "10", path, timeout=60)
            self.assertEqual(out.returncode, 0, out.stdout + out.stderr)
            with open(path) as f:
                trace = json.load(f)
            self.assertEqual(trace["seed"], "10")
            events = trace["events"]
            self.assertIn("wrote %d events of seed 10 to %s" % (len(events), path), out.stdout)
            self.assertLessEqual(len(events), 10000)
            self.assertEqual([e["at_ms"] for e in events], sorted(e["at_ms"] for e in events))
            for e in events:
                self.assertIsInstance(e["actor"], str)
                self.assertIsInstance(e["kind"], str)
                self.assertIsInstance(e["detail"], str)
        for args, message in ((["--trace", "ten", "x.json"], "SEED must be a whole number"),
                              (["--trace", "10"], "--trace"),
                              (["--trace", "10", "x.json", "--seeds", "5"], "excludes"),
                              (["--trace", "10", "/nonexistent-dir/seed.json"], "cannot write")):
            out = swarm(*args, timeout=60)
            self.assertEqual(out.returncode, 2, (args, out.stdout, out.stderr))
            self.assertIn(message, out.stderr, args)

    def test_help_names_every_flag(self):
        out = swarm("--help", timeout=30)
        self.assertEqual(out.returncode, 0)
        for flag in ("--seeds", "--seed-start", "--trace", "--part"):
            self.assertIn(flag, out.stdout)


if __name__ == "__main__":
    args = sys.argv[1:]
    if "--agentpay" in args:
        i = args.index("--agentpay")
        AGENTPAY = args[i + 1]
        del args[i:i + 2]
    unittest.main(argv=[sys.argv[0]] + args, verbosity=2)
