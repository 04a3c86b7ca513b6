#!/usr/bin/env python3
"""Self-test of run_doc_blocks.py (ctest `docs.runner_selftest`): on small markdown trees it must fail
on a broken block (and say where), honour skip / expect / file markers, carry shell state from block
to block, stop a hung block, reject misplaced markers, and leave no background process behind.

Run: python3 tests/docs/test_runner.py --agentpay build/src/agentpay
"""

import argparse
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNNER = HERE / "run_doc_blocks.py"
AGENTPAY = ""


def run(readme: str, docs: dict[str, str] | None = None, timeout: float = 20.0,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    root = Path(tempfile.mkdtemp(prefix="doc-runner-selftest-"))
    (root / "README.md").write_text(textwrap.dedent(readme))
    (root / "docs").mkdir()
    for name, text in (docs or {}).items():
        (root / "docs" / name).write_text(textwrap.dedent(text))
    return subprocess.run(
        [sys.executable, str(RUNNER), "--agentpay", AGENTPAY, "--root", str(root),
         "--timeout", str(timeout)],
        capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


class RunnerTest(unittest.TestCase):
    def test_broken_block_fails_and_says_where(self):
        result = run("""\
            # Title

            ```sh
            echo before
            ```

            ```sh
            ./build/agentpay serve --no-such-flag
            echo never printed
            ```

            ```sh
            echo after
            ```
            """)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("FAIL README.md:7:", result.stdout)
        self.assertIn("--no-such-flag", result.stdout)        # the block is shown
        self.assertIn("exit status 2", result.stdout)          # agentpay's usage error
        output = result.stdout.split("---- output ----")[1]
        self.assertNotIn("never printed", output)              # set -e stopped the block
        self.assertIn("README.md: 1 passed, 1 failed, 1 not run, 0 skipped", result.stdout)
        self.assertTrue(result.stdout.rstrip().endswith("1 passed, 1 failed"), result.stdout)

    def test_agentpay_symlink_state_and_expect(self):
        result = run("""\
            ```sh
            ./build/agentpay --help
            GREETING=hello
            cd build
            ```
            <!-- doc-test: expect "hello from ../build" -->
            <!-- doc-test: expect "agentpay" -->
            ```sh
            echo "$GREETING from ../$(basename "$PWD")"
            ls
            ```
            """)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertTrue(result.stdout.rstrip().endswith("2 passed, 0 failed"), result.stdout)

    def test_expect_missing_fails(self):
        result = run("""\
            <!-- doc-test: expect "Idempotent-Replayed: true" -->
            ```sh
            echo "Idempotent-Replayed: false"
            ```
            """)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("expected text not in the output: 'Idempotent-Replayed: true'", result.stdout)

    def test_skip_is_not_run_and_needs_a_reason(self):
        result = run("""\
            <!-- doc-test: skip (a public testnet) -->
            ```sh
            false
            ```
            """, docs={"b.md": """\
            <!-- doc-test: skip () -->
            ```sh
            true
            ```
            """})
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("README.md: 0 passed, 0 failed, 0 not run, 1 skipped", result.stdout)
        self.assertIn("docs/b.md:1: a skip needs a reason", result.stdout)

    def test_file_marker_writes_the_block(self):
        result = run("""\
            <!-- doc-test: file conf/agentpay.toml -->
            ```toml
            listen = "127.0.0.1:8405"
            ```
            <!-- doc-test: expect "OK 8405" -->
            ```sh
            grep -q 'listen = "127.0.0.1:8405"' conf/agentpay.toml && echo "OK 8405"
            ```
            ```toml
            not = "written: no marker"
            ```
            """)
        self.assertEqual(result.returncode, 0, result.stdout)
        self.assertTrue(result.stdout.rstrip().endswith("2 passed, 0 failed"), result.stdout)

    def test_misplaced_or_unknown_marker_fails(self):
        for text, message in [
                ('<!-- doc-test: expect "x" -->\nsome prose\n```sh\necho x\n```\n',
                 "is not right before a fence"),
                ("<!-- doc-test: retry 3 -->\n```sh\ntrue\n```\n", "unknown marker"),
                ("<!-- doc-test: file x.sh -->\n```sh\ntrue\n```\n", "'file' is for non-sh"),
                ("- a list item:\n  ```sh\n  true\n  ```\n", "an indented ```sh fence")]:
            result = run(text)
            self.assertEqual(result.returncode, 1, result.stdout)
            self.assertIn(message, result.stdout)

    def test_hung_block_times_out(self):
        started = time.monotonic()
        result = run("```sh\nsleep 60\n```\n", timeout=2)
        self.assertEqual(result.returncode, 1, result.stdout)
        self.assertIn("timed out after 2 s", result.stdout)
        self.assertLess(time.monotonic() - started, 30)

    def test_background_processes_are_stopped(self):
        with tempfile.TemporaryDirectory() as tmp:
            pids = Path(tmp) / "pids"
            result = run("""\
                ```sh
                ./build/agentpay seller --listen 127.0.0.1:8403 &
                echo $! >> "$PIDS"
                sleep 1000 &
                echo $! >> "$PIDS"
                until curl -sf http://127.0.0.1:8403/_seller/stats >/dev/null; do sleep 0.1; done
                ```
                """, env={"PIDS": str(pids)}, docs={"second.md": """\
                ```sh
                ./build/agentpay seller --listen 127.0.0.1:8403 &
                echo $! >> "$PIDS"
                until curl -sf http://127.0.0.1:8403/_seller/stats >/dev/null; do sleep 0.1; done
                ```
                """})
            self.assertEqual(result.returncode, 0, result.stdout)
            # The second file could bind 8403 only because the first file's seller was gone.
            self.assertTrue(result.stdout.rstrip().endswith("2 passed, 0 failed"), result.stdout)
            started = [int(line) for line in pids.read_text().split()]
            self.assertEqual(len(started), 3)
            for pid in started:
                self.assertFalse(alive(pid), f"process {pid} outlived the runner")


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--agentpay", required=True)
    args, rest = parser.parse_known_args()
    AGENTPAY = str(Path(args.agentpay).resolve())
    unittest.main(argv=[sys.argv[0]] + rest, verbosity=2)
